package datapath

import "net/netip"

// ParseStatus says whether Decode found every header the engine needs, and if not, what was wrong.
type ParseStatus uint8

// Decode outcomes. Every status but ParseOK means the frame is malformed and is dropped.
const (
	ParseOK              ParseStatus = iota
	ParseShortEthernet               // shorter than an Ethernet header or its 802.1Q tag
	ParseShortARP                    // ARP EtherType but fewer bytes than an Ethernet/IPv4 ARP packet
	ParseBadIPv4                     // short header, version not 4, IHL < 5 or beyond the frame, bad total length
	ParseBadIPv4Checksum             // header checksum does not verify
	ParseBadL4                       // TCP, UDP or ICMP header truncated or inconsistent with the IP length
	ParseBadIPv6                     // short header, version not 6, payload beyond the frame, bad extension header chain
)

// String names the status for logs and test failures.
func (s ParseStatus) String() string {
	switch s {
	case ParseOK:
		return "ok"
	case ParseShortEthernet:
		return "short ethernet"
	case ParseShortARP:
		return "short arp"
	case ParseBadIPv4:
		return "bad ipv4 header"
	case ParseBadIPv4Checksum:
		return "bad ipv4 checksum"
	case ParseBadL4:
		return "bad l4 header"
	case ParseBadIPv6:
		return "bad ipv6 header"
	}
	return "unknown"
}

// Parsed is the decoded summary of one frame. It holds offsets into the frame and copies of the
// few fields classification needs, no pointers, so an Engine reuses one value for every packet.
type Parsed struct {
	EtherType uint16 // inner EtherType when tagged
	Tagged    bool   // frame carries one 802.1Q tag
	L3Off     int    // network header offset
	L4Off     int    // transport header offset (IPv4: L3Off + IHL*4; IPv6: after skipped extension headers)
	L3End     int    // end of the IP packet; bytes beyond are Ethernet padding
	IPLen     int    // IP total length (IPv6: fixed header + payload), the byte count used by the statistics
	Proto     uint8  // IP protocol, IPv6: the first next-header value the parser did not skip
	TTL       uint8  // IPv4 TTL or IPv6 hop limit
	Fragment  bool   // IPv4 fragment (MF or offset) or IPv6 Fragment header; no transport header parsed
	ExtHdrs   bool   // IPv6 hop-by-hop or destination options headers were skipped
	ExtOther  bool   // IPv6 extension header the engine does not walk (routing, mobility, ...); Proto is its type
	ICMPType  uint8  // ICMP/ICMPv6 type
	ICMPCode  uint8  // ICMP/ICMPv6 code
	src, dst  addr   // IP addresses, IPv4 v4-mapped (see Src and Dst)
	SrcPort   uint16 // TCP/UDP source port
	DstPort   uint16 // TCP/UDP destination port
	TCPFlags  uint8  // TCP control bits
}

// Src returns the IP source address.
func (p *Parsed) Src() netip.Addr { return p.src.netip() }

// Dst returns the IP destination address.
func (p *Parsed) Dst() netip.Addr { return p.dst.netip() }

// isV6 reports whether the packet is IPv6.
func (p *Parsed) isV6() bool { return p.EtherType == EtherTypeIPv6 }

// Decode parses frame. It never reads outside frame and never panics; on ParseOK the offsets
// it sets are within frame. Ethernet types other than IPv4, IPv6 and ARP and IP protocols other
// than TCP, UDP and ICMP decode as ParseOK with only the outer fields set, so the caller decides
// their fate.
func (p *Parsed) Decode(frame []byte) ParseStatus {
	*p = Parsed{}
	if len(frame) < plainIPv4L4 {
		return p.decodeOther(frame)
	}
	switch et := Ethernet(frame).Type(); {
	case et == EtherTypeIPv6: // untagged IPv6: straight to its parser
		p.EtherType, p.L3Off = EtherTypeIPv6, EthernetHeaderSize
		return p.decodeIPv6(frame, EthernetHeaderSize)
	case et != EtherTypeIPv4 || frame[EthernetHeaderSize] != ipv4Plain:
		return p.decodeOther(frame)
	}
	// Untagged IPv4 without options, the forwarding fast path: the same checks as decodeIPv4
	// with IHL 5, straight-line, on a fixed-size view of the header.
	p.EtherType, p.L3Off = EtherTypeIPv4, EthernetHeaderSize
	h := (*[IPv4MinSize]byte)(frame[EthernetHeaderSize:plainIPv4L4])
	ip := IPv4(h[:])
	tl := ip.TotalLen()
	if tl < IPv4MinSize || tl > len(frame)-EthernetHeaderSize {
		return ParseBadIPv4
	}
	if !ipv4Header20Valid(h) {
		return ParseBadIPv4Checksum
	}
	p.Proto = ip.Protocol()
	p.TTL = ip.TTL()
	p.src = addrFrom4(ip.Src())
	p.dst = addrFrom4(ip.Dst())
	end := EthernetHeaderSize + tl
	p.IPLen, p.L4Off, p.L3End = tl, plainIPv4L4, end
	if ip.IsFragment() {
		p.Fragment = true // see decodeIPv4
		return ParseOK
	}
	switch l4 := frame[plainIPv4L4:end]; p.Proto {
	case ProtoTCP:
		return p.decodeTCP(l4)
	case ProtoUDP:
		return p.decodeUDP(l4, false)
	}
	return p.decodeL4(frame, ProtoICMP)
}

// Offsets of the fast path: the version/IHL byte of an IPv4 header without options, and where
// its transport header starts in an untagged frame.
const (
	ipv4Plain   = 4<<4 | IPv4MinSize/4
	plainIPv4L4 = EthernetHeaderSize + IPv4MinSize
)

// decodeOther is Decode for every frame but an untagged IPv4 one without options: the Ethernet
// header, an 802.1Q tag, then ARP, IPv4 with options (or malformed) or IPv6.
func (p *Parsed) decodeOther(frame []byte) ParseStatus {
	if len(frame) < EthernetHeaderSize {
		return ParseShortEthernet
	}
	et := Ethernet(frame).Type()
	off := EthernetHeaderSize
	if et == EtherTypeVLAN {
		if len(frame) < EthernetHeaderSize+VLANTagSize {
			return ParseShortEthernet
		}
		et = VLAN(frame[EthernetHeaderSize:]).Type()
		off += VLANTagSize
		p.Tagged = true
	}
	p.EtherType = et
	p.L3Off = off
	switch et {
	case EtherTypeARP:
		if len(frame)-off < ARPSize {
			return ParseShortARP
		}
		p.L3End = off + ARPSize
	case EtherTypeIPv4:
		return p.decodeIPv4(frame, off)
	case EtherTypeIPv6:
		return p.decodeIPv6(frame, off)
	}
	return ParseOK
}

// decodeIPv4 parses the IPv4 header at off and the TCP, UDP or ICMP header after it.
func (p *Parsed) decodeIPv4(frame []byte, off int) ParseStatus {
	ip := IPv4(frame[off:])
	if len(ip) < IPv4MinSize || ip.Version() != 4 {
		return ParseBadIPv4
	}
	hl := ip.HeaderLen()
	tl := ip.TotalLen()
	if hl < IPv4MinSize || hl > len(ip) || tl < hl || tl > len(ip) {
		return ParseBadIPv4
	}
	if !ipv4HeaderValid(ip[:hl]) {
		return ParseBadIPv4Checksum
	}
	p.Proto = ip.Protocol()
	p.TTL = ip.TTL()
	p.src = addrFrom4(ip.Src())
	p.dst = addrFrom4(ip.Dst())
	p.IPLen = tl
	p.L4Off = off + hl
	p.L3End = off + tl
	if ip.IsFragment() {
		// Only the first fragment carries the transport header; the engine balances none of them.
		p.Fragment = true
		return ParseOK
	}
	return p.decodeL4(frame, ProtoICMP)
}

// decodeIPv6 parses the IPv6 fixed header at off, skips hop-by-hop and destination options
// headers, and parses the TCP, UDP or ICMPv6 header after them.
func (p *Parsed) decodeIPv6(frame []byte, off int) ParseStatus {
	pkt := frame[off:]
	if len(pkt) < IPv6HeaderSize {
		return ParseBadIPv6
	}
	ip := IPv6((*[IPv6HeaderSize]byte)(pkt)[:])
	if ip.Version() != 6 {
		return ParseBadIPv6
	}
	tl := IPv6HeaderSize + ip.PayloadLen()
	if tl > len(pkt) {
		return ParseBadIPv6 // a jumbogram (payload length 0 with a jumbo option) is rejected later, as too short
	}
	p.TTL = ip.HopLimit()
	p.src = ip.Src()
	p.dst = ip.Dst()
	p.IPLen = tl
	p.L3End = off + tl
	nh := ip.NextHeader()
	l4 := off + IPv6HeaderSize
	switch nh { // no extension headers, the common case: the transport header follows at once
	case ProtoTCP:
		p.Proto, p.L4Off = nh, l4
		return p.decodeTCP(pkt[IPv6HeaderSize:tl])
	case ProtoUDP:
		p.Proto, p.L4Off = nh, l4
		return p.decodeUDP(pkt[IPv6HeaderSize:tl], true)
	}
	for k := 0; nh == ipv6HopByHop || nh == ipv6DestOpts; k++ {
		// Hop-by-hop must come first (RFC 8200 §4.1); more than a few options headers is an attack.
		if (nh == ipv6HopByHop && k > 0) || k == maxIPv6ExtHeaders || l4+8 > p.L3End {
			return ParseBadIPv6
		}
		n := (int(frame[l4+1]) + 1) * 8
		if l4+n > p.L3End {
			return ParseBadIPv6
		}
		nh = frame[l4]
		l4 += n
		p.ExtHdrs = true
	}
	p.Proto = nh
	p.L4Off = l4
	switch {
	case nh == ipv6Fragment:
		if l4+ipv6FragSize > p.L3End {
			return ParseBadIPv6
		}
		p.Fragment = true
		return ParseOK
	case isUnbalanceableExt(nh):
		p.ExtOther = true
		return ParseOK
	}
	return p.decodeL4(frame, ProtoICMPv6)
}

// decodeL4 parses the transport header at p.L4Off: TCP, UDP or the given ICMP version.
func (p *Parsed) decodeL4(frame []byte, icmp uint8) ParseStatus {
	l4 := frame[p.L4Off:p.L3End]
	switch p.Proto {
	case ProtoTCP:
		return p.decodeTCP(l4)
	case ProtoUDP:
		return p.decodeUDP(l4, icmp == ProtoICMPv6)
	case icmp:
		if len(l4) < ICMPHeaderSize {
			return ParseBadL4
		}
		p.ICMPType, p.ICMPCode = ICMP(l4).Type(), ICMP(l4).Code()
	}
	return ParseOK
}

// decodeTCP parses the TCP header at the start of l4, the IP payload; small enough to inline.
func (p *Parsed) decodeTCP(l4 []byte) ParseStatus {
	if len(l4) < TCPMinSize {
		return ParseBadL4
	}
	t := TCP((*[TCPMinSize]byte)(l4)[:])
	if hl := t.HeaderLen(); hl < TCPMinSize || hl > len(l4) {
		return ParseBadL4
	}
	p.SrcPort, p.DstPort, p.TCPFlags = t.SrcPort(), t.DstPort(), t.Flags()
	return ParseOK
}

// decodeUDP parses the UDP header at the start of l4, the IP payload; small enough to inline.
func (p *Parsed) decodeUDP(l4 []byte, v6 bool) ParseStatus {
	if len(l4) < UDPSize {
		return ParseBadL4
	}
	u := UDP((*[UDPSize]byte)(l4)[:])
	if ul := u.Length(); ul < UDPSize || ul > len(l4) {
		return ParseBadL4
	}
	if v6 && u.Checksum() == 0 {
		return ParseBadL4 // the UDP checksum is mandatory in IPv6 (RFC 8200 §8.1)
	}
	p.SrcPort, p.DstPort = u.SrcPort(), u.DstPort()
	return ParseOK
}
