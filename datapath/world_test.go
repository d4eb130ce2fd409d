package datapath

import (
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

// The "world" extends the default topology with IPv6 and every topology (documentation
// addresses only):
//
//	clients 203.0.113.0/24, 2001:db8:99::/64
//	   └─ gateway 192.0.2.254 / 2001:db8:2::fe ── port 0: 192.0.2.1/24, 2001:db8:2::1/64
//	                                              port 1: 198.51.100.1/24, 2001:db8:100::1/64
//	                                                 └─ servers 198.51.100.11-13, 2001:db8:100::11-13
//
// VIPs: .10/::10 half-NAT, .30/::30 DSR, .40/::40 full NAT (proxy-src .201/.202, ::201/::202).
var (
	port0Addr6  = netip.MustParseAddr("2001:db8:2::1")
	port1Addr6  = netip.MustParseAddr("2001:db8:100::1")
	gwAddr6     = netip.MustParseAddr("2001:db8:2::fe")
	clientAddr6 = netip.MustParseAddr("2001:db8:99::7")
	vip6        = netip.MustParseAddr("2001:db8:2::10")
	vipDSR      = netip.MustParseAddr("192.0.2.30")
	vipDSR6     = netip.MustParseAddr("2001:db8:2::30")
	vipNAT      = netip.MustParseAddr("192.0.2.40")
	vipNAT6     = netip.MustParseAddr("2001:db8:2::40")
	proxy4      = []netip.Addr{netip.MustParseAddr("198.51.100.201"), netip.MustParseAddr("198.51.100.202")}
	proxy6      = []netip.Addr{netip.MustParseAddr("2001:db8:100::201"), netip.MustParseAddr("2001:db8:100::202")}
	serverAddr6 = []netip.Addr{
		netip.MustParseAddr("2001:db8:100::11"),
		netip.MustParseAddr("2001:db8:100::12"),
		netip.MustParseAddr("2001:db8:100::13"),
	}
)

// Rule IDs of the world, beyond the default three.
const (
	ruleDSR     = 4
	ruleDSRUDP  = 5
	ruleNAT     = 6
	ruleNATUDP  = 7
	ruleWeb6    = 11
	ruleDNS6    = 12
	ruleDSR6    = 14
	ruleDSR6UDP = 15
	ruleNAT6    = 16
	ruleNAT6UDP = 17
)

func worldPorts() []PortConfig {
	return []PortConfig{
		{MAC: port0MAC, Addrs: []netip.Prefix{netip.PrefixFrom(port0Addr, 24), netip.PrefixFrom(port0Addr6, 64)}, Gateway: gwAddr, Gateway6: gwAddr6},
		{MAC: port1MAC, Addrs: []netip.Prefix{netip.PrefixFrom(port1Addr, 24), netip.PrefixFrom(port1Addr6, 64)}},
	}
}

// servers6 returns the IPv6 servers of a group.
func servers6(group string, port uint16) []rules.SnapServer {
	var s []rules.SnapServer
	for i, a := range serverAddr6 {
		s = append(s, rules.SnapServer{ID: group + "." + string(rune('0'+i)), Addr: a, MinPort: port, MaxPort: port, Enabled: true})
	}
	return s
}

func worldRule(id uint64, name string, v netip.Addr, proto uint8, port uint16, topo rules.Topo, algo rules.Algo, sv []rules.SnapServer) rules.SnapRule {
	r := rules.SnapRule{ID: id, Name: name, Enabled: true, VIP: v, Proto: proto, MinPort: port, MaxPort: port,
		Algo: algo, Topo: topo, Servers: sv}
	if topo == rules.TopoNAT {
		r.ProxySrc = proxy4
		if v.Is6() {
			r.ProxySrc = proxy6
		}
	}
	return r
}

// worldRules returns the default rules plus DSR and full-NAT rules, and the IPv6 set.
func worldRules() []rules.SnapRule {
	tcp, udp := rules.ProtoTCP, rules.ProtoUDP
	rr, hip := rules.AlgoRoundRobin, rules.AlgoHashIP
	return append(defaultRules(),
		worldRule(ruleDSR, "dsr", vipDSR, tcp, 80, rules.TopoDSR, rr, servers("_sg4", 0)),
		worldRule(ruleDSRUDP, "dsru", vipDSR, udp, 53, rules.TopoDSR, hip, servers("_sg5", 0)),
		worldRule(ruleNAT, "nat", vipNAT, tcp, 80, rules.TopoNAT, rr, servers("_sg6", 8080)),
		worldRule(ruleNATUDP, "natu", vipNAT, udp, 53, rules.TopoNAT, rr, servers("_sg7", 5353)),
		worldRule(ruleWeb6, "web6", vip6, tcp, 80, rules.TopoHalfNAT, rr, servers6("_sg11", 8080)),
		worldRule(ruleDNS6, "dns6", vip6, udp, 53, rules.TopoHalfNAT, rr, servers6("_sg12", 5353)),
		worldRule(ruleDSR6, "dsr6", vipDSR6, tcp, 80, rules.TopoDSR, rr, servers6("_sg14", 0)),
		worldRule(ruleDSR6UDP, "dsr6u", vipDSR6, udp, 53, rules.TopoDSR, hip, servers6("_sg15", 0)),
		worldRule(ruleNAT6, "nat6", vipNAT6, tcp, 80, rules.TopoNAT, rr, servers6("_sg16", 8080)),
		worldRule(ruleNAT6UDP, "nat6u", vipNAT6, udp, 53, rules.TopoNAT, rr, servers6("_sg17", 5353)),
	)
}

// newWorld returns a harness on the world's ports with rs (worldRules if nil), neighbours learned.
func newWorld(t testing.TB, rs []rules.SnapRule, mod func(*Config)) *harness {
	t.Helper()
	if rs == nil {
		rs = worldRules()
	}
	h := &harness{t: t, snap: new(atomic.Pointer[rules.Snapshot]), now: int64(time.Hour)}
	h.setRules(rs)
	cfg := Config{Ports: worldPorts(), ConnCapacity: 1024, Snapshot: h.snap}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.learnWorld()
	return h
}

// learnWorld answers the engine's proactive ARP and NDP requests for gateways and servers.
func (h *harness) learnWorld() {
	h.t.Helper()
	h.burst()
	h.control()
	h.arpReply(gwAddr, gwMAC, 0)
	for i := range serverAddr {
		h.arpReply(serverAddr[i], serverMAC[i], 1)
	}
	h.naReply(gwAddr6, gwMAC, 0)
	for i := range serverAddr6 {
		h.naReply(serverAddr6[i], serverMAC[i], 1)
	}
}

// naReply delivers a solicited neighbor advertisement from (from, mac) to our port in.
func (h *harness) naReply(from netip.Addr, m [6]byte, in uint16) {
	h.t.Helper()
	to := port0Addr6
	if in == 1 {
		to = port1Addr6
	}
	f := naFrame(h.t, m, from, portMAC(in), to, from, ndpFlagSolicit|ndpFlagOverr, true, 255)
	if r, _ := h.process(f, in); r.Action != ActionPass {
		h.t.Fatalf("NA from %v: %+v, want pass", from, r)
	}
}

// naFrame builds a neighbor advertisement.
func naFrame(t testing.TB, srcMAC [6]byte, src netip.Addr, dstMAC [6]byte, dst, target netip.Addr, flags uint8, tlla bool, hop uint8) []byte {
	t.Helper()
	na := &layers.ICMPv6NeighborAdvertisement{Flags: flags, TargetAddress: target.AsSlice()}
	if tlla {
		na.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: srcMAC[:]}}
	}
	return icmp6Frame(t, srcMAC, src, dstMAC, dst, hop, layers.ICMPv6TypeNeighborAdvertisement, na)
}

// nsFrame builds a neighbor solicitation for target; dst is unicast or the solicited-node group.
func nsFrame(t testing.TB, srcMAC [6]byte, src, dst, target netip.Addr, slla bool, hop uint8) []byte {
	t.Helper()
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice()}
	if slla {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: srcMAC[:]}}
	}
	dstMAC := [6]byte{0x33, 0x33}
	d := dst.As16()
	copy(dstMAC[2:], d[12:])
	if !dst.IsMulticast() {
		dstMAC = port0MAC
	}
	return icmp6Frame(t, srcMAC, src, dstMAC, dst, hop, layers.ICMPv6TypeNeighborSolicitation, ns)
}

func icmp6Frame(t testing.TB, srcMAC [6]byte, src netip.Addr, dstMAC [6]byte, dst netip.Addr, hop uint8, typ uint8, body gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(dstMAC[:]), EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: hop, NextHeader: layers.IPProtocolICMPv6, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, ic, body); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(buf.Bytes()), len(buf.Bytes())+64)
	copy(out, buf.Bytes())
	return out
}

// icmpMsg is a raw ICMP/ICMPv6 message in an IP packet; build computes the ICMP checksum with
// the test's own reference sum.
type icmpMsg struct {
	srcMAC, dstMAC [6]byte
	src, dst       netip.Addr
	ttl            uint8
	typ, code      uint8
	rest           uint32 // the 4 bytes after the checksum: id/seq, MTU
	body           []byte
}

func (m icmpMsg) build(t testing.TB) []byte {
	t.Helper()
	ttl := m.ttl
	if ttl == 0 {
		ttl = 64
	}
	msg := make([]byte, 8, 8+len(m.body))
	msg[0], msg[1] = m.typ, m.code
	binary.BigEndian.PutUint32(msg[4:], m.rest)
	msg = append(msg, m.body...)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(m.srcMAC[:]), DstMAC: net.HardwareAddr(m.dstMAC[:])}
	var ip gopacket.SerializableLayer
	var pseudo []byte
	if m.src.Is6() {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, HopLimit: ttl, NextHeader: layers.IPProtocolICMPv6, SrcIP: m.src.AsSlice(), DstIP: m.dst.AsSlice()}
		pseudo = refPseudo(m.src.AsSlice(), m.dst.AsSlice(), 58, len(msg))
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip = &layers.IPv4{Version: 4, TTL: ttl, Protocol: layers.IPProtocolICMPv4, SrcIP: m.src.AsSlice(), DstIP: m.dst.AsSlice(), Id: 0x4321}
	}
	binary.BigEndian.PutUint16(msg[2:], uint16(^refSum(append(pseudo, msg...))))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, gopacket.Payload(msg)); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(buf.Bytes()), len(buf.Bytes())+64)
	copy(out, buf.Bytes())
	return out
}

// ipPacket returns the IP packet of an untagged frame (without Ethernet padding).
func ipPacket(frame []byte) []byte {
	ip := frame[14:]
	if ip[0]>>4 == 6 {
		return slices.Clone(ip[:40+int(binary.BigEndian.Uint16(ip[4:]))])
	}
	return slices.Clone(ip[:binary.BigEndian.Uint16(ip[2:])])
}

type atomicPointerSnapshot = atomic.Pointer[rules.Snapshot]
