package datapath

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/ilbgo/ilb/rules"
)

// Test topology (documentation addresses only):
//
//	clients 203.0.113.0/24 ── gateway 192.0.2.254 ── port 0 (192.0.2.1/24, VIP 192.0.2.10)
//	                                                  port 1 (198.51.100.1/24) ── servers 198.51.100.11-13
var (
	port0MAC   = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	port1MAC   = [6]byte{0x02, 0, 0, 0, 0, 0x02}
	gwMAC      = [6]byte{0x02, 0, 0, 0, 0, 0xfe}
	port0Addr  = netip.MustParseAddr("192.0.2.1")
	port1Addr  = netip.MustParseAddr("198.51.100.1")
	gwAddr     = netip.MustParseAddr("192.0.2.254")
	vip        = netip.MustParseAddr("192.0.2.10")
	vip2       = netip.MustParseAddr("192.0.2.20") // VIP of the disabled rule
	clientAddr = netip.MustParseAddr("203.0.113.7")
	serverAddr = []netip.Addr{
		netip.MustParseAddr("198.51.100.11"),
		netip.MustParseAddr("198.51.100.12"),
		netip.MustParseAddr("198.51.100.13"),
	}
	serverMAC = [][6]byte{
		{0x02, 0, 0, 0, 1, 11},
		{0x02, 0, 0, 0, 1, 12},
		{0x02, 0, 0, 0, 1, 13},
	}
)

const (
	ruleWeb      = 1 // TCP VIP:80 → servers:8080, round robin, half-NAT
	ruleDNS      = 2 // UDP VIP:53 → servers:5353
	ruleDisabled = 3 // TCP vip2:80, disabled
)

func testPorts() []PortConfig {
	return []PortConfig{
		{MAC: port0MAC, Addrs: []netip.Prefix{netip.PrefixFrom(port0Addr, 24)}, Gateway: gwAddr},
		{MAC: port1MAC, Addrs: []netip.Prefix{netip.PrefixFrom(port1Addr, 24)}},
	}
}

func servers(group string, port uint16, enabled ...bool) []rules.SnapServer {
	var s []rules.SnapServer
	for i, a := range serverAddr {
		en := true
		if i < len(enabled) {
			en = enabled[i]
		}
		s = append(s, rules.SnapServer{ID: group + "." + string(rune('0'+i)), Addr: a, MinPort: port, MaxPort: port, Enabled: en})
	}
	return s
}

// defaultRules returns the rules most tests use.
func defaultRules() []rules.SnapRule {
	return []rules.SnapRule{
		{ID: ruleWeb, Name: "web", Enabled: true, VIP: vip, Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
			Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, NATTimeout: 120 * time.Second, Servers: servers("_sg1", 8080)},
		{ID: ruleDNS, Name: "dns", Enabled: true, VIP: vip, Proto: rules.ProtoUDP, MinPort: 53, MaxPort: 53,
			Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, NATTimeout: 60 * time.Second, Servers: servers("_sg2", 5353)},
		{ID: ruleDisabled, Name: "off", Enabled: false, VIP: vip2, Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
			Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, NATTimeout: 120 * time.Second, Servers: servers("_sg3", 0)},
	}
}

// makeSnapshot compiles rules into a snapshot the way the rules package does.
func makeSnapshot(gen uint64, rs []rules.SnapRule) *rules.Snapshot {
	return rules.NewSnapshot(gen, rs)
}

// harness drives one engine the way a worker does, one frame per burst, with a fake clock.
type harness struct {
	t    testing.TB
	e    *Engine
	snap *atomic.Pointer[rules.Snapshot]
	now  int64
	gen  uint64
}

func newHarness(t testing.TB, connCap int, rs []rules.SnapRule) *harness {
	t.Helper()
	h := &harness{t: t, snap: new(atomic.Pointer[rules.Snapshot]), now: int64(time.Hour)}
	h.setRules(rs)
	e, err := New(Config{Ports: testPorts(), ConnCapacity: connCap, Snapshot: h.snap})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0 // publish every burst, so tests read what they just did
	h.e = e
	return h
}

func (h *harness) setRules(rs []rules.SnapRule) {
	h.gen++
	h.snap.Store(makeSnapshot(h.gen, rs))
}

func (h *harness) advance(d time.Duration) { h.now += int64(d) }

// process runs one frame through a burst and returns the result and the (rewritten) frame.
func (h *harness) process(frame []byte, in uint16) (Result, []byte) {
	h.e.BeginBurst(h.now)
	r := h.e.Process(frame, in)
	h.e.EndBurst()
	if r.Len > cap(frame) || r.Len < 0 {
		h.t.Fatalf("Result.Len %d outside frame capacity %d", r.Len, cap(frame))
	}
	return r, frame[:r.Len]
}

// scan runs empty bursts over two seconds of fake time, long enough for the paced neighbour scan
// to cover its table; a large time jump before it lets the connection sweep cover its table at once.
func (h *harness) scan() {
	for range 20 {
		h.advance(100 * time.Millisecond)
		h.burst()
	}
}

// burst runs an empty burst (time passes, periodic work runs).
func (h *harness) burst() {
	h.e.BeginBurst(h.now)
	h.e.EndBurst()
}

type controlFrame struct {
	frame []byte
	port  uint16
}

// control drains the frames the engine wants to originate.
func (h *harness) control() []controlFrame {
	var out []controlFrame
	for {
		buf := make([]byte, 0, holdFrameMax) // an mbuf's room: held packets come out here too
		n, p, ok := h.e.NextControlFrame(buf)
		if !ok {
			return out
		}
		out = append(out, controlFrame{buf[:n], p})
	}
}

// expectReleased checks that cf is a held packet sent once its next hop answered, forwarded as
// expectForward describes.
func expectReleased(t testing.TB, cf controlFrame, port uint16, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, ttl uint8) decoded {
	t.Helper()
	return expectForward(t, Result{Action: ActionForward, Port: cf.port, Len: len(cf.frame)}, cf.frame, port, dstMAC, src, dst, sport, dport, ttl)
}

// learnNeighbours answers the engine's proactive ARP requests for the gateway and the servers.
func (h *harness) learnNeighbours() {
	h.t.Helper()
	h.burst()
	h.control()
	h.arpReply(gwAddr, gwMAC, 0)
	for i := range serverAddr {
		h.arpReply(serverAddr[i], serverMAC[i], 1)
	}
}

func (h *harness) arpReply(from netip.Addr, mac [6]byte, in uint16) {
	h.t.Helper()
	ourMAC, ourIP := port0MAC, port0Addr
	if in == 1 {
		ourMAC, ourIP = port1MAC, port1Addr
	}
	r, _ := h.process(arpFrame(h.t, layers.ARPReply, mac, ourMAC, from, ourMAC, ourIP), in)
	if r.Action != ActionPass {
		h.t.Fatalf("ARP reply: action %v, want pass", r.Action)
	}
}

// pkt describes a test packet; build turns it into a frame with correct checksums. The IP
// version follows the addresses.
type pkt struct {
	srcMAC, dstMAC [6]byte
	src, dst       netip.Addr
	sport, dport   uint16
	udp            bool
	ttl            uint8 // 0 = 64 (TTL or hop limit)
	flags          uint8 // TCP flags
	seq, ack       uint32
	payload        []byte
	vlan           uint16 // 0 = untagged
	ipOptions      bool   // add 4 bytes of IPv4 options (IHL 6)
	noUDPChecksum  bool
	fragment       bool   // IPv4: set MF; IPv6: insert a Fragment header (M set)
	ext6           extHdr // IPv6: insert an 8-byte extension header
	tailPad        int    // Ethernet padding after the IP packet
}

// extHdr selects an IPv6 extension header a test packet carries.
type extHdr uint8

const (
	extNone extHdr = iota
	extHopByHop
	extDestOpts
	extRouting
)

func (p pkt) is6() bool { return p.src.Is6() }

func (p pkt) build(t testing.TB) []byte {
	t.Helper()
	ttl := p.ttl
	if ttl == 0 {
		ttl = 64
	}
	etype := layers.EthernetTypeIPv4
	if p.is6() {
		etype = layers.EthernetTypeIPv6
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(p.srcMAC[:]), DstMAC: net.HardwareAddr(p.dstMAC[:]), EthernetType: etype}
	var ls []gopacket.SerializableLayer
	ls = append(ls, eth)
	if p.vlan != 0 {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: p.vlan, Type: etype})
	}
	var nl gopacket.NetworkLayer
	var setProto func(layers.IPProtocol)
	if p.is6() {
		ip := &layers.IPv6{Version: 6, HopLimit: ttl, SrcIP: p.src.AsSlice(), DstIP: p.dst.AsSlice()}
		ls, nl, setProto = append(ls, ip), ip, func(x layers.IPProtocol) { ip.NextHeader = x }
	} else {
		ip := &layers.IPv4{Version: 4, TTL: ttl, SrcIP: p.src.AsSlice(), DstIP: p.dst.AsSlice(), Id: 0x1234, Flags: layers.IPv4DontFragment}
		if p.fragment {
			ip.Flags = layers.IPv4MoreFragments
		}
		if p.ipOptions {
			ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}
		ls, nl, setProto = append(ls, ip), ip, func(x layers.IPProtocol) { ip.Protocol = x }
	}
	if p.udp {
		setProto(layers.IPProtocolUDP)
		u := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		if err := u.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, u)
	} else {
		setProto(layers.IPProtocolTCP)
		tc := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Seq: p.seq, Ack: p.ack, Window: 65535,
			SYN: p.flags&TCPSyn != 0, ACK: p.flags&TCPAck != 0, FIN: p.flags&TCPFin != 0, RST: p.flags&TCPRst != 0, PSH: p.flags&TCPPsh != 0}
		if err := tc.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, tc)
	}
	ls = append(ls, gopacket.Payload(p.payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	b := slices.Clone(buf.Bytes())
	if p.noUDPChecksum {
		l4 := len(b) - len(p.payload) - UDPSize
		b[l4+6], b[l4+7] = 0, 0
	}
	if p.is6() && p.fragment {
		b = insertExt6(b, 44)
	}
	if p.is6() && p.ext6 != extNone {
		b = insertExt6(b, [...]uint8{extHopByHop: 0, extDestOpts: 60, extRouting: 43}[p.ext6])
	}
	b = append(b, make([]byte, p.tailPad)...)
	// Give the frame spare capacity, as an mbuf has.
	out := make([]byte, len(b), len(b)+64)
	copy(out, b)
	return out
}

// insertExt6 inserts an 8-byte IPv6 extension header of type typ right after the fixed header
// of an untagged frame. The transport checksum does not change: the pseudo-header holds the
// upper-layer length, not the payload length.
func insertExt6(b []byte, typ uint8) []byte {
	const l3 = 14
	next := b[l3+6]
	ext := []byte{next, 0, 0, 0, 0, 0, 0, 0}
	switch typ {
	case 0, 60:
		ext[2], ext[3] = 1, 4 // a PadN option filling the header
	case 43:
		ext[2], ext[3] = 0, 0 // routing type 0, no segments left
	case 44:
		ext[3] = 1 // offset 0, M set
		ext[4], ext[7] = 0xab, 0xcd
	}
	out := append(slices.Clone(b[:l3+40]), ext...)
	out = append(out, b[l3+40:]...)
	out[l3+6] = typ
	binary.BigEndian.PutUint16(out[l3+4:], binary.BigEndian.Uint16(out[l3+4:])+8)
	return out
}

// client returns a client→VIP TCP packet from port sport with flags.
func client(sport uint16, flags uint8) pkt {
	return pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: flags, seq: 1000, ack: 0}
}

// fromServer returns a server→client TCP packet from server i.
func fromServer(i int, dport uint16, flags uint8) pkt {
	return pkt{srcMAC: serverMAC[i], dstMAC: port1MAC, src: serverAddr[i], dst: clientAddr, sport: 8080, dport: dport, flags: flags, seq: 5000, ack: 1001}
}

func arpFrame(t testing.TB, op uint16, srcMAC, targetMAC [6]byte, sender netip.Addr, ethDst [6]byte, target netip.Addr) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(ethDst[:]), EthernetType: layers.EthernetTypeARP}
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, Operation: op,
		SourceHwAddress: srcMAC[:], SourceProtAddress: sender.AsSlice(), DstHwAddress: targetMAC[:], DstProtAddress: target.AsSlice()}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, a); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, MinFrameSize, MinFrameSize+64) // padded like a real minimum frame
	copy(out, buf.Bytes())
	return out
}

// decoded is what a test checks of an output frame, parsed by gopacket.
type decoded struct {
	eth   *layers.Ethernet
	ip    *layers.IPv4
	ip6   *layers.IPv6
	tcp   *layers.TCP
	udp   *layers.UDP
	arp   *layers.ARP
	icmp4 *layers.ICMPv4
	icmp6 *layers.ICMPv6
}

// src, dst and ttl return the IP layer's fields whichever the version.
func (d decoded) src() netip.Addr {
	if d.ip6 != nil {
		a, _ := netip.AddrFromSlice(d.ip6.SrcIP)
		return a
	}
	a, _ := netip.AddrFromSlice(d.ip.SrcIP)
	return a.Unmap()
}

func (d decoded) dst() netip.Addr {
	if d.ip6 != nil {
		a, _ := netip.AddrFromSlice(d.ip6.DstIP)
		return a
	}
	a, _ := netip.AddrFromSlice(d.ip.DstIP)
	return a.Unmap()
}

func (d decoded) ttl() uint8 {
	if d.ip6 != nil {
		return d.ip6.HopLimit
	}
	return d.ip.TTL
}

func decode(t testing.TB, frame []byte) decoded {
	t.Helper()
	var (
		eth     layers.Ethernet
		dot1q   layers.Dot1Q
		ip      layers.IPv4
		ip6     layers.IPv6
		tcp     layers.TCP
		udp     layers.UDP
		arp     layers.ARP
		icmp4   layers.ICMPv4
		icmp6   layers.ICMPv6
		payload gopacket.Payload
	)
	// A DecodingLayerParser stops at the transport layer, so UDP to port 53 is not parsed as DNS.
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip, &ip6, &tcp, &udp, &arp, &icmp4, &icmp6, &payload)
	parser.IgnoreUnsupported = true
	var types []gopacket.LayerType
	if err := parser.DecodeLayers(frame, &types); err != nil {
		t.Fatalf("gopacket cannot decode output: %v", err)
	}
	var d decoded
	for _, lt := range types {
		switch lt {
		case layers.LayerTypeEthernet:
			d.eth = &eth
		case layers.LayerTypeIPv4:
			d.ip = &ip
		case layers.LayerTypeIPv6:
			d.ip6 = &ip6
		case layers.LayerTypeTCP:
			d.tcp = &tcp
		case layers.LayerTypeUDP:
			d.udp = &udp
		case layers.LayerTypeARP:
			d.arp = &arp
		case layers.LayerTypeICMPv4:
			d.icmp4 = &icmp4
		case layers.LayerTypeICMPv6:
			d.icmp6 = &icmp6
		}
	}
	return d
}

// refSum is a deliberately naive ones' complement sum, independent of the package's helpers.
func refSum(b []byte) uint32 {
	var s uint32
	for i := 0; i < len(b); i++ {
		if i%2 == 0 {
			s += uint32(b[i]) << 8
		} else {
			s += uint32(b[i])
		}
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

// refPseudo returns the pseudo-header bytes of a transport segment of length n: IPv4 (12 bytes)
// or IPv6 (40 bytes), built independently of the package.
func refPseudo(src, dst []byte, proto uint8, n int) []byte {
	if len(src) == 4 {
		return append(append(slices.Clone(src), dst...), 0, proto, byte(n>>8), byte(n))
	}
	return append(append(slices.Clone(src), dst...), byte(n>>24), byte(n>>16), byte(n>>8), byte(n), 0, 0, 0, proto)
}

// ipOf locates the IP packet in an untagged or tagged frame and returns its addresses, the
// transport protocol (IPv6: after skipping hop-by-hop/destination options), and the transport
// segment.
func ipOf(t testing.TB, frame []byte) (v6 bool, src, dst []byte, proto uint8, seg []byte, fragment bool) {
	t.Helper()
	off := 14
	if binary.BigEndian.Uint16(frame[12:]) == 0x8100 {
		off = 18
	}
	ip := frame[off:]
	if ip[0]>>4 == 6 {
		pl := int(binary.BigEndian.Uint16(ip[4:]))
		nh, l4 := ip[6], 40
		for nh == 0 || nh == 60 {
			nh, l4 = ip[l4], l4+(int(ip[l4+1])+1)*8
		}
		return true, ip[8:24], ip[24:40], nh, ip[l4 : 40+pl], nh == 44
	}
	hl := int(ip[0]&0xf) * 4
	tl := int(binary.BigEndian.Uint16(ip[2:]))
	hdr := slices.Clone(ip[:hl])
	hdr[10], hdr[11] = 0, 0
	if want, got := uint16(^refSum(hdr)), binary.BigEndian.Uint16(ip[10:]); want != got {
		t.Fatalf("IPv4 header checksum %#04x, recomputed %#04x", got, want)
	}
	return false, ip[12:16], ip[16:20], ip[9], ip[hl:tl], binary.BigEndian.Uint16(ip[6:])&0x3fff != 0
}

// verifyChecksums recomputes the IPv4 header checksum and the TCP, UDP, ICMP or ICMPv6
// checksum of a frame from scratch and compares them with the fields.
func verifyChecksums(t testing.TB, frame []byte) {
	t.Helper()
	v6, src, dst, proto, seg, frag := ipOf(t, frame)
	if frag {
		return // fragment: no transport checksum to verify
	}
	var csOff int
	switch proto {
	case 6:
		csOff = 16
	case 17:
		csOff = 6
	case 1, 58:
		csOff = 2
	default:
		return
	}
	seg = slices.Clone(seg)
	got := binary.BigEndian.Uint16(seg[csOff:])
	if proto == 17 && got == 0 && !v6 {
		return // UDP without checksum
	}
	seg[csOff], seg[csOff+1] = 0, 0
	var sum []byte
	if proto != 1 { // ICMPv4 alone has no pseudo-header
		sum = refPseudo(src, dst, proto, len(seg))
	}
	want := uint16(^refSum(append(sum, seg...)))
	if proto == 17 && want == 0 {
		want = 0xffff
	}
	if want != got {
		t.Fatalf("proto %d checksum %#04x, recomputed %#04x", proto, got, want)
	}
}

func mac(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// portMAC returns the MAC of test port p.
func portMAC(p uint16) [6]byte {
	if p == 1 {
		return port1MAC
	}
	return port0MAC
}

// expectForward checks a forwarded IPv4 or IPv6 frame's addressing and checksums and returns it decoded.
func expectForward(t testing.TB, r Result, frame []byte, port uint16, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, ttl uint8) decoded {
	t.Helper()
	if r.Action != ActionForward || r.Port != port {
		t.Fatalf("result %+v, want forward on port %d", r, port)
	}
	verifyChecksums(t, frame)
	d := decode(t, frame)
	srcMAC := portMAC(port)
	if d.eth.DstMAC.String() != mac(dstMAC) || d.eth.SrcMAC.String() != mac(srcMAC) {
		t.Fatalf("MACs %v > %v, want %v > %v", d.eth.SrcMAC, d.eth.DstMAC, mac(srcMAC), mac(dstMAC))
	}
	if d.ip == nil && d.ip6 == nil {
		t.Fatal("no IP layer in output")
	}
	if got := d.src(); got != src {
		t.Fatalf("IP src %v, want %v", got, src)
	}
	if got := d.dst(); got != dst {
		t.Fatalf("IP dst %v, want %v", got, dst)
	}
	if d.ttl() != ttl {
		t.Fatalf("TTL %d, want %d", d.ttl(), ttl)
	}
	var gs, gd uint16
	switch {
	case d.tcp != nil:
		gs, gd = uint16(d.tcp.SrcPort), uint16(d.tcp.DstPort)
	case d.udp != nil:
		gs, gd = uint16(d.udp.SrcPort), uint16(d.udp.DstPort)
	default:
		t.Fatal("no TCP/UDP layer in output")
	}
	if gs != sport || gd != dport {
		t.Fatalf("ports %d > %d, want %d > %d", gs, gd, sport, dport)
	}
	return d
}

// expectGolden checks that the engine forwarded exactly the frame want describes on port: every
// byte equal to what gopacket builds from scratch, checksums recomputed independently.
func expectGolden(t testing.TB, r Result, out []byte, port uint16, want []byte) {
	t.Helper()
	if r.Action != ActionForward || r.Port != port {
		t.Fatalf("result %+v, want forward on port %d", r, port)
	}
	verifyChecksums(t, out)
	if !bytes.Equal(out, want) {
		t.Fatalf("output differs from golden:\ngot  %x\nwant %x\n%s", out, want,
			gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default).Dump())
	}
}

// serverIndex returns which test server addr is.
func serverIndex(t testing.TB, a net.IP) int {
	t.Helper()
	got, _ := netip.AddrFromSlice(a)
	for i, s := range serverAddr {
		if s == got {
			return i
		}
	}
	t.Fatalf("%v is not a server", a)
	return -1
}

func (h *harness) stats() Stats { return h.e.Stats() }

func (h *harness) rule(id uint64) RuleStats {
	h.t.Helper()
	for _, r := range h.e.Stats().Rules {
		if r.ID == id {
			return r
		}
	}
	h.t.Fatalf("rule %d not in stats", id)
	return RuleStats{}
}

func rulesServer(id string, a netip.Addr) rules.SnapServer {
	return rules.SnapServer{ID: id, Addr: a, MinPort: 8080, MaxPort: 8080, Enabled: true}
}
