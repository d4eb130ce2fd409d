package datapath

// IPv6 neighbour discovery (RFC 4861), the IPv6 half of what ARP does for IPv4: the engine
// answers solicitations for every address it owns — VIPs, proxy-src addresses, the port's
// interface addresses and its EUI-64 link-local address (so the host behind the exception path,
// which shares the port's MAC, is reachable too) — learns neighbours from solicitations and
// advertisements, and solicits the next hops it needs through NextControlFrame.

// isNDPType reports whether an ICMPv6 type is a neighbour discovery message (RS, RA, NS, NA,
// redirect).
func isNDPType(t uint8) bool { return t >= ICMPv6RouterSolicit && t <= ICMPv6Redirect }

// handleNDP validates an NDP message (RFC 4861 §7.1) and handles solicitations and
// advertisements; router discovery and redirects are the host's business.
func (e *Engine) handleNDP(frame []byte, p *Parsed, in uint16) Result {
	if p.ICMPType != ICMPv6NeighSolicit && p.ICMPType != ICMPv6NeighAdvert {
		return e.pass(gLocal, frame)
	}
	msg := frame[p.L4Off:p.L3End]
	// A hop limit of 255 proves the message was not forwarded: it comes from the link.
	if p.TTL != ndpHopLimit || p.ICMPCode != 0 || len(msg) < ndpMinSize || !icmpChecksumValid(frame, p) {
		return e.drop(gNDPInvalid, frame)
	}
	n := NDP(msg)
	target := n.Target()
	if target.isMulticast6() {
		return e.drop(gNDPInvalid, frame)
	}
	if p.ICMPType == ICMPv6NeighSolicit {
		lla, found, valid := n.LinkAddr(ndpOptSrcLLA)
		// Duplicate address detection comes from :: to the solicited-node group, without an option.
		if !valid || (p.src.isZero() && (found || p.dst != solicitedNode(target))) {
			return e.drop(gNDPInvalid, frame)
		}
		return e.answerSolicit(frame, p, in, target, lla, found)
	}
	lla, found, valid := n.LinkAddr(ndpOptTgtLLA)
	if !valid || (p.dst.isMulticast6() && n.Flags()&ndpFlagSolicit != 0) {
		return e.drop(gNDPInvalid, frame)
	}
	if found {
		// Solicited answers create entries for on-link targets; unsolicited multicast ones
		// (a neighbour announcing a new MAC) only update what we know.
		e.learn(target, in, lla, !p.dst.isMulticast6() && e.isConnected(in, target))
	}
	// The host behind the exception path may be waiting for this advertisement too.
	return e.pass(gNDPAdvertsReceived, frame)
}

// answerSolicit turns a solicitation for an address we own into the advertisement, in place.
func (e *Engine) answerSolicit(frame []byte, p *Parsed, in uint16, target addr, lla [6]byte, found bool) Result {
	dad := p.src.isZero()
	if !e.owns(in, target) {
		if found && !dad {
			e.learn(p.src, in, lla, false) // not ours, but a sender we know may have moved
		}
		return e.drop(gNDPIgnored, frame)
	}
	dstMAC, dstIP := Ethernet(frame).Src(), p.src
	flags := uint8(ndpFlagSolicit | ndpFlagOverr)
	switch {
	case dad:
		// Someone probes an address we own: tell everyone (RFC 4861 §7.2.4), which makes the
		// prober see the duplicate.
		dstMAC, dstIP, flags = multicastMAC(allNodes), allNodes, ndpFlagOverr
	case found:
		e.learn(p.src, in, lla, true)
		dstMAC = lla
	}
	if !dad && !isUnicastMAC(dstMAC) {
		return e.drop(gNDPIgnored, frame)
	}
	size := p.L3Off + IPv6HeaderSize + ndpMinSize + ndpOptLLASize
	if size > cap(frame) {
		return e.drop(gNoRoom, frame)
	}
	frame = frame[:size]
	mac := e.ports[in].mac
	eth := Ethernet(frame)
	eth.SetDst(dstMAC)
	eth.SetSrc(mac)
	ip := IPv6(frame[p.L3Off:])
	ip.SetFixed(ndpMinSize+ndpOptLLASize, ProtoICMPv6, ndpHopLimit)
	ip.SetSrc(target)
	ip.SetDst(dstIP)
	msg := frame[p.L3Off+IPv6HeaderSize:]
	NDP(msg).SetAdvert(flags, target, mac)
	setICMPChecksum(msg, true, target, dstIP)
	e.count(gNDPAdvertsSent)
	return e.send(in, frame)
}

// buildNeighSolicit writes a neighbor solicitation for target out of port p: to the target's
// solicited-node group, from our address on its prefix, with our MAC as the source option.
func (e *Engine) buildNeighSolicit(buf []byte, p uint16, target addr) int {
	frame := buf[:ndpFrameSize]
	mac := e.ports[p].mac
	group := solicitedNode(target)
	src := e.ndpSource(p, target)
	eth := Ethernet(frame)
	eth.SetDst(multicastMAC(group))
	eth.SetSrc(mac)
	eth.SetType(EtherTypeIPv6)
	ip := IPv6(frame[EthernetHeaderSize:])
	ip.SetFixed(ndpMinSize+ndpOptLLASize, ProtoICMPv6, ndpHopLimit)
	ip.SetSrc(src)
	ip.SetDst(group)
	msg := frame[EthernetHeaderSize+IPv6HeaderSize:]
	NDP(msg).SetSolicit(target, mac)
	setICMPChecksum(msg, true, src, group)
	return ndpFrameSize
}
