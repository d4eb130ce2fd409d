package datapath

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// snMulticast returns the solicited-node group of a.
func snMulticast(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

var port0LL = netip.MustParseAddr("fe80::ff:fe00:1") // EUI-64 of 02:00:00:00:00:01

// Solicitations for every address the engine owns — VIPs, proxy-src addresses, interface
// addresses and the port's link-local address — are answered with an advertisement carrying
// the port's MAC, byte for byte what RFC 4861 prescribes.
func TestNDPAnswersOwnedAddresses(t *testing.T) {
	cases := []struct {
		name   string
		in     uint16
		target netip.Addr
		asker  netip.Addr
		mac    [6]byte
	}{
		{"VIP", 0, vip6, gwAddr6, gwMAC},
		{"DSR VIP from a server", 1, vipDSR6, serverAddr6[0], serverMAC[0]},
		{"proxy-src", 1, proxy6[1], serverAddr6[1], serverMAC[1]},
		{"interface address", 0, port0Addr6, gwAddr6, gwMAC},
		{"link-local", 0, port0LL, netip.MustParseAddr("fe80::1"), gwMAC},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newWorld(t, nil, nil)
			ns := nsFrame(t, c.mac, c.asker, snMulticast(c.target), c.target, true, 255)
			r, out := h.process(ns, c.in)
			want := naFrame(t, portMAC(c.in), c.target, c.mac, c.asker, c.target, ndpFlagSolicit|ndpFlagOverr, true, 255)
			expectGolden(t, r, out, c.in, want)
			// The asker was learned.
			if i := h.e.neigh.find(addrFromNetip(c.asker), c.in); i < 0 || h.e.neigh.slots[i].mac != c.mac {
				t.Fatal("asker not learned")
			}
		})
	}
}

func TestNDPSolicitationVariants(t *testing.T) {
	h := newWorld(t, nil, nil)
	// Neighbour unreachability detection: unicast, no source option, shorter than the answer;
	// the advertisement grows into the frame's capacity and goes to the sender's MAC.
	nud := nsFrame(t, gwMAC, gwAddr6, vip6, vip6, false, 255)
	r, out := h.process(nud, 0)
	if r.Len <= len(nud) {
		t.Fatalf("Len %d for a %d-byte solicitation", r.Len, len(nud))
	}
	expectGolden(t, r, out, 0, naFrame(t, port0MAC, vip6, gwMAC, gwAddr6, vip6, ndpFlagSolicit|ndpFlagOverr, true, 255))

	// Without room for the answer: dropped, counted.
	tight := slices.Clip(nsFrame(t, gwMAC, gwAddr6, vip6, vip6, false, 255))
	if r, _ := h.process(tight, 0); r.Action != ActionDrop {
		t.Fatalf("no room: %+v", r)
	}

	// Duplicate address detection of an address we own: answered to all nodes, not solicited.
	dad := nsFrame(t, otherHostMAC, netip.IPv6Unspecified(), snMulticast(vip6), vip6, false, 255)
	r, out = h.process(dad, 0)
	allNodesMAC := [6]byte{0x33, 0x33, 0, 0, 0, 1}
	expectGolden(t, r, out, 0, naFrame(t, port0MAC, vip6, allNodesMAC, netip.MustParseAddr("ff02::1"), vip6, ndpFlagOverr, true, 255))

	// Someone else's address: not answered, frame untouched.
	other := nsFrame(t, gwMAC, gwAddr6, snMulticast(netip.MustParseAddr("2001:db8:2::99")), netip.MustParseAddr("2001:db8:2::99"), true, 255)
	orig := slices.Clone(other)
	if r, out := h.process(other, 0); r.Action != ActionDrop || !bytes.Equal(out, orig) {
		t.Fatalf("foreign target: %+v", r)
	}
	h.burst()
	g := h.stats().Global
	if g.NDPAdvertsSent != 2 || g.NoRoom != 1 || g.NDPIgnored != 1 {
		t.Fatalf("sent %d noroom %d ignored %d", g.NDPAdvertsSent, g.NoRoom, g.NDPIgnored)
	}
}

// RFC 4861 §7.1 validation: hop limit 255, code 0, checksum, option lengths, no multicast target.
func TestNDPInvalidDropped(t *testing.T) {
	h := newWorld(t, nil, nil)
	good := func() []byte { return nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255) }
	l4 := 14 + 40
	cases := map[string][]byte{
		"hop limit 64": nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 64),
		"bad checksum": func() []byte { b := good(); b[l4+2] ^= 1; return b }(),
		"code 1": func() []byte {
			b := good()
			b[l4+1] = 1
			refixICMP6(b)
			return b
		}(),
		"option length 0": func() []byte {
			b := good()
			b[l4+25] = 0
			refixICMP6(b)
			return b
		}(),
		"multicast target": nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), netip.MustParseAddr("ff02::1"), true, 255),
		"DAD with option":  nsFrame(t, gwMAC, netip.IPv6Unspecified(), snMulticast(vip6), vip6, true, 255),
		"short":            naFrame(t, gwMAC, gwAddr6, port0MAC, port0Addr6, gwAddr6, 0, false, 255)[:14+40+20],
	}
	for name, f := range cases {
		if name == "short" {
			// Payload length says 20: a message shorter than the NDP minimum.
			f[14+4], f[14+5] = 0, 20
		}
		if r, _ := h.process(f, 0); r.Action != ActionDrop {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.NDPInvalid != uint64(len(cases)) || g.NDPAdvertsSent != 0 {
		t.Fatalf("NDPInvalid %d (want %d), sent %d", g.NDPInvalid, len(cases), g.NDPAdvertsSent)
	}
}

// Advertisements teach the cache: solicited ones create on-link entries, unsolicited multicast
// ones only update known neighbours; all go on to the host.
func TestNDPLearning(t *testing.T) {
	h := newWorld(t, nil, nil)
	known := func(a netip.Addr, p uint16) ([6]byte, bool) {
		i := h.e.neigh.find(addrFromNetip(a), p)
		if i < 0 || h.e.neigh.slots[i].state != neighReachable {
			return [6]byte{}, false
		}
		return h.e.neigh.slots[i].mac, true
	}
	host := netip.MustParseAddr("2001:db8:100::77")
	hostMAC := [6]byte{0x02, 0, 0, 0, 7, 7}
	if r, _ := h.process(naFrame(t, hostMAC, host, port1MAC, port1Addr6, host, ndpFlagSolicit, true, 255), 1); r.Action != ActionPass {
		t.Fatalf("NA: %+v", r)
	}
	if m, ok := known(host, 1); !ok || m != hostMAC {
		t.Fatal("solicited NA not learned")
	}
	stranger := netip.MustParseAddr("2001:db8:100::78")
	allNodesMAC := [6]byte{0x33, 0x33, 0, 0, 0, 1}
	h.process(naFrame(t, hostMAC, stranger, allNodesMAC, netip.MustParseAddr("ff02::1"), stranger, ndpFlagOverr, true, 255), 1)
	if _, ok := known(stranger, 1); ok {
		t.Fatal("unsolicited multicast NA created an entry")
	}
	newMAC := [6]byte{0x02, 0, 0, 0, 8, 8}
	h.process(naFrame(t, newMAC, serverAddr6[0], allNodesMAC, netip.MustParseAddr("ff02::1"), serverAddr6[0], ndpFlagOverr, true, 255), 1)
	if m, _ := known(serverAddr6[0], 1); m != newMAC {
		t.Fatal("unsolicited NA did not update a known neighbour")
	}
	offNet := netip.MustParseAddr("2001:db8:77::1")
	h.process(naFrame(t, hostMAC, offNet, port1MAC, port1Addr6, offNet, ndpFlagSolicit, true, 255), 1)
	if _, ok := known(offNet, 1); ok {
		t.Fatal("learned an off-link target")
	}
}

// The engine solicits its IPv6 next hops itself: to the solicited-node group, from its address
// on the prefix, with its MAC as source option.
func TestNDPSolicitationsForNextHops(t *testing.T) {
	h := &harness{t: t, snap: new(atomicSnapshot), now: 1e12}
	h.setRules(worldRules())
	e, err := New(Config{Ports: worldPorts(), Snapshot: h.snap})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.burst()
	var ns []controlFrame
	for _, cf := range h.control() {
		if Ethernet(cf.frame).Type() == EtherTypeIPv6 {
			ns = append(ns, cf)
		}
	}
	if len(ns) != 4 {
		t.Fatalf("%d solicitations, want 4 (gateway + 3 servers)", len(ns))
	}
	want := map[netip.Addr]uint16{gwAddr6: 0, serverAddr6[0]: 1, serverAddr6[1]: 1, serverAddr6[2]: 1}
	for _, cf := range ns {
		verifyChecksums(t, cf.frame)
		d := decode(t, cf.frame)
		if d.icmp6 == nil || d.icmp6.TypeCode.Type() != layers.ICMPv6TypeNeighborSolicitation || d.ip6.HopLimit != 255 {
			t.Fatalf("not a solicitation: %x", cf.frame)
		}
		target, _ := netip.AddrFromSlice(cf.frame[14+40+8 : 14+40+24])
		port, ok := want[target]
		if !ok || cf.port != port {
			t.Fatalf("solicitation for %v on port %d", target, cf.port)
		}
		delete(want, target)
		ourAddr := []netip.Addr{port0Addr6, port1Addr6}[port]
		pm := portMAC(port)
		if d.src() != ourAddr || d.dst() != snMulticast(target) {
			t.Fatalf("%v > %v", d.src(), d.dst())
		}
		g := snMulticast(target).As16()
		if !bytes.Equal(d.eth.DstMAC, []byte{0x33, 0x33, 0xff, g[13], g[14], g[15]}) || !bytes.Equal(d.eth.SrcMAC, pm[:]) {
			t.Fatalf("MACs %v > %v", d.eth.SrcMAC, d.eth.DstMAC)
		}
		if opt := cf.frame[14+40+24:]; opt[0] != 1 || opt[1] != 1 || !bytes.Equal(opt[2:8], pm[:]) {
			t.Fatalf("source link-layer option %x", opt)
		}
	}
	h.burst()
	if g := h.stats().Global; g.NDPSolicitsSent != 4 {
		t.Fatalf("NDPSolicitsSent %d", g.NDPSolicitsSent)
	}
}

// A link-local IPv6 gateway is solicited from the port's link-local address and used.
func TestNDPLinkLocalGateway(t *testing.T) {
	ports := worldPorts()
	llgw := netip.MustParseAddr("fe80::fe")
	ports[0].Gateway6 = llgw
	h := &harness{t: t, snap: new(atomicSnapshot), now: 1e12}
	h.setRules(worldRules())
	e, err := New(Config{Ports: ports, Snapshot: h.snap})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.burst()
	found := false
	for _, cf := range h.control() {
		if Ethernet(cf.frame).Type() == EtherTypeIPv6 && decode(t, cf.frame).src() == port0LL {
			found = true
		}
	}
	if !found {
		t.Fatal("no solicitation from the link-local address")
	}
	h.process(naFrame(t, gwMAC, llgw, port0MAC, port0LL, llgw, ndpFlagSolicit, true, 255), 0)
	for i := range serverAddr6 {
		h.naReply(serverAddr6[i], serverMAC[i], 1)
	}
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, flags: TCPSyn}
	h.process(p.build(t), 0)
	back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr6[0], dst: clientAddr6, sport: 8080, dport: 1, flags: TCPSyn | TCPAck}
	r, out := h.process(back.build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip6, clientAddr6, 80, 1, 63)
}

// Link-local traffic is never load-balanced, not even toward a VIP.
func TestIPv6LinkLocalNeverBalanced(t *testing.T) {
	h := newWorld(t, nil, nil)
	for _, p := range []pkt{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: netip.MustParseAddr("fe80::1"), dst: vip6, sport: 1, dport: 80, flags: TCPSyn},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: netip.MustParseAddr("fe80::10"), sport: 1, dport: 80, flags: TCPSyn},
	} {
		f := p.build(t)
		orig := slices.Clone(f)
		if r, out := h.process(f, 0); r.Action != ActionPass || !bytes.Equal(out, orig) {
			t.Fatalf("%v > %v: %+v", p.src, p.dst, r)
		}
	}
	if h.e.conns.count() != 0 {
		t.Fatal("balanced link-local traffic")
	}
}

type atomicSnapshot = atomicPointerSnapshot

// refixICMP6 recomputes the ICMPv6 checksum of an untagged frame after a test edited it.
func refixICMP6(b []byte) {
	ip := b[14:]
	n := int(ip[4])<<8 | int(ip[5])
	msg := ip[40 : 40+n]
	msg[2], msg[3] = 0, 0
	sum := ^refSum(append(refPseudo(ip[8:24], ip[24:40], 58, n), msg...))
	msg[2], msg[3] = byte(sum>>8), byte(sum)
}
