package datapath

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// Echo requests to a VIP — of an enabled or a disabled rule — or to a proxy-src address are
// answered by the engine in place.
func TestICMPEchoAnswered(t *testing.T) {
	cases := []struct {
		name     string
		src, dst netip.Addr
		rule     uint64 // rule counting icmp_echo_processed; 0 none
	}{
		{"VIP", clientAddr, vip, ruleWeb},
		{"disabled rule's VIP", clientAddr, vip2, ruleDisabled},
		{"IPv6 VIP", clientAddr6, vip6, ruleWeb6},
		{"proxy-src", clientAddr, proxy4[0], 0},
		{"IPv6 DSR VIP", clientAddr6, vipDSR6, ruleDSR6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newWorld(t, nil, nil)
			req, rep := uint8(ICMPv4EchoRequest), uint8(ICMPv4EchoReply)
			if c.src.Is6() {
				req, rep = ICMPv6EchoRequest, ICMPv6EchoReply
			}
			in := icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: c.src, dst: c.dst, ttl: 17, typ: req, rest: 0x12340007, body: []byte("ping payload, odd")}
			want := icmpMsg{srcMAC: port0MAC, dstMAC: gwMAC, src: c.dst, dst: c.src, ttl: 64, typ: rep, rest: 0x12340007, body: []byte("ping payload, odd")}
			r, out := h.process(in.build(t), 0)
			expectGolden(t, r, out, 0, want.build(t)) // same IP ID (icmpMsg uses one): the engine keeps it
			h.burst()
			if g := h.stats().Global; g.ICMPEchoReplies != 1 {
				t.Fatalf("ICMPEchoReplies %d", g.ICMPEchoReplies)
			}
			if c.rule != 0 {
				if rs := h.rule(c.rule); rs.ICMPEchoProcessed != 1 || rs.ICMPDropped != 0 {
					t.Fatalf("rule counters %+v", rs.RuleCounters)
				}
			}
		})
	}
}

// Other ICMP to a VIP is dropped and counted; ICMP to anyone else passes untouched.
func TestICMPOtherToVIPDropped(t *testing.T) {
	h := newWorld(t, nil, nil)
	for _, m := range []icmpMsg{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: gwAddr, dst: vip, typ: 3, code: 1},  // host unreachable
		{srcMAC: gwMAC, dstMAC: port0MAC, src: gwAddr, dst: vip, typ: 11, code: 0}, // time exceeded
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: 0},       // echo reply
		{srcMAC: gwMAC, dstMAC: port0MAC, src: gwAddr6, dst: vip6, typ: 1, code: 4},
	} {
		if r, _ := h.process(m.build(t), 0); r.Action != ActionDrop {
			t.Fatalf("%+v: %+v", m, r)
		}
	}
	for _, m := range []icmpMsg{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: port0Addr, typ: 8},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: netip.MustParseAddr("192.0.2.99"), typ: 8},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: port0Addr6, typ: 128},
	} {
		f := m.build(t)
		orig := slices.Clone(f)
		if r, out := h.process(f, 0); r.Action != ActionPass || !bytes.Equal(out, orig) {
			t.Fatalf("%+v: %+v", m, r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.ICMPDropped != 4 {
		t.Fatalf("ICMPDropped %d", g.ICMPDropped)
	}
	if rs := h.rule(ruleWeb); rs.ICMPDropped != 3 {
		t.Fatalf("web ICMPDropped %d", rs.ICMPDropped)
	}
}

// tooBig builds a frag-needed (IPv4) or packet-too-big (IPv6) message from router to dst
// quoting the given IP packet (first n bytes; 0 = all).
func tooBig(router netip.Addr, routerMAC, ourMAC [6]byte, dst netip.Addr, quote []byte, n int) icmpMsg {
	if n > 0 {
		quote = quote[:n]
	}
	if router.Is6() {
		return icmpMsg{srcMAC: routerMAC, dstMAC: ourMAC, src: router, dst: dst, typ: ICMPv6PacketTooBig, rest: 1280, body: quote}
	}
	return icmpMsg{srcMAC: routerMAC, dstMAC: ourMAC, src: router, dst: dst, typ: ICMPv4DestUnreach, code: ICMPv4FragNeededCode, rest: 1400, body: quote}
}

// Frag-needed / packet-too-big about a packet the engine sent is translated (outer and quoted
// headers, all checksums) and forwarded to the endpoint that sent the quoted packet.
func TestICMPTooBigTranslated(t *testing.T) {
	for _, c := range allTopoCases() {
		if c.topo == rules.TopoDSR {
			continue // no connections: DSR replies never pass the engine
		}
		for _, quoteLen := range []int{0, 8} { // the whole packet, or only 8 transport bytes
			t.Run(c.String(), func(t *testing.T) {
				h := newWorld(t, roundRobinWorld(), nil)
				cl, v, sv, px, vport, sport := c.endpoints()
				hl := 20
				router, srvRouter := gwAddr, netip.MustParseAddr("198.51.100.254")
				if c.v6 {
					hl, router, srvRouter = 40, gwAddr6, netip.MustParseAddr("2001:db8:100::fe")
				}
				n := 0
				if quoteLen > 0 {
					n = hl + quoteLen
				}
				first := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: 40000, dport: vport, udp: c.udp, flags: TCPSyn, payload: []byte("request")}
				if r, _ := h.process(first.build(t), 0); r.Action != ActionForward {
					t.Fatal(r)
				}
				natSrc, natPort := cl, uint16(40000)
				if c.topo == rules.TopoNAT {
					natSrc, natPort = px[1], natPortFirst
				}
				// A reply the engine sent toward the client (VIP → client) was too big for a
				// router on the client's path: the router tells the VIP.
				sent := pkt{src: v, dst: cl, sport: vport, dport: 40000, udp: c.udp, ttl: 63, flags: TCPAck, seq: 7, payload: []byte("a big reply")}
				orig := sent // as the server sent it
				orig.src, orig.sport, orig.dst, orig.dport, orig.ttl = sv[0], sport, natSrc, natPort, 63
				msg := tooBig(router, gwMAC, port0MAC, v, ipPacket(sent.build(t)), n)
				want := msg
				want.srcMAC, want.dstMAC, want.dst, want.ttl = port1MAC, serverMAC[0], sv[0], 63
				if c.topo == rules.TopoNAT {
					want.src = px[1] // the server knows the load balancer by its proxy address
				}
				want.body = ipPacket(orig.build(t))
				if n > 0 {
					want.body = want.body[:n]
				}
				r, out := h.process(msg.build(t), 0)
				expectGolden(t, r, out, 1, want.build(t))

				if c.topo == rules.TopoNAT {
					// A request the engine sent the server (proxy → server) was too big for a
					// router on the server's side: the router tells the proxy address, and the
					// client learns it from the VIP.
					sent := pkt{src: natSrc, dst: sv[0], sport: natPort, dport: sport, udp: c.udp, ttl: 63, flags: TCPAck, payload: []byte("a big request")}
					orig := sent
					orig.src, orig.sport, orig.dst, orig.dport, orig.ttl = cl, 40000, v, vport, 63
					msg := tooBig(srvRouter, otherHostMAC, port1MAC, natSrc, ipPacket(sent.build(t)), n)
					want := msg
					want.srcMAC, want.dstMAC, want.src, want.dst, want.ttl = port0MAC, gwMAC, v, cl, 63
					want.body = ipPacket(orig.build(t))
					if n > 0 {
						want.body = want.body[:n]
					}
					r, out := h.process(msg.build(t), 1)
					expectGolden(t, r, out, 0, want.build(t))
				}
				h.burst()
				var processed uint64
				for _, rs := range h.stats().Rules {
					processed += rs.ICMPTooBigProcessed
				}
				want2 := uint64(1)
				if c.topo == rules.TopoNAT {
					want2 = 2
				}
				if g := h.stats().Global; g.ICMPTooBigForwarded != want2 || processed != want2 {
					t.Fatalf("forwarded %d, rules processed %d, want %d", g.ICMPTooBigForwarded, processed, want2)
				}
			})
		}
	}
}

// Messages that match no connection, quote nonsense, come with a bad checksum, or reach a
// half-NAT VIP about the wrong direction are dropped and counted.
func TestICMPTooBigDropped(t *testing.T) {
	h := newWorld(t, nil, nil)
	connect(t, h, 1000)
	unknown := pkt{src: vip, dst: clientAddr, sport: 80, dport: 999, ttl: 63, flags: TCPAck}
	known := pkt{src: vip, dst: clientAddr, sport: 80, dport: 1000, ttl: 63, flags: TCPAck}
	badSum := tooBig(gwAddr, gwMAC, port0MAC, vip, ipPacket(known.build(t)), 0).build(t)
	badSum[len(badSum)-1] ^= 0x40
	wrongDir := pkt{src: clientAddr, dst: serverAddr[0], sport: 1000, dport: 8080, ttl: 63, flags: TCPAck}
	frames := [][]byte{
		tooBig(gwAddr, gwMAC, port0MAC, vip, ipPacket(unknown.build(t)), 0).build(t),
		tooBig(gwAddr, gwMAC, port0MAC, vip, []byte{0x45, 0, 0}, 0).build(t),
		tooBig(gwAddr, gwMAC, port0MAC, vip, ipPacket(known.build(t)), 27).build(t), // ports cut
		badSum,
		tooBig(gwAddr, gwMAC, port0MAC, vip, ipPacket(wrongDir.build(t)), 0).build(t),
		tooBig(gwAddr6, gwMAC, port0MAC, vip6, ipPacket(known.build(t)), 0).build(t), // IPv4 quoted in ICMPv6
	}
	for i, f := range frames {
		if r, _ := h.process(f, 0); r.Action != ActionDrop {
			t.Fatalf("frame %d: %+v", i, r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.ICMPTooBigDropped != uint64(len(frames)) || g.ICMPTooBigForwarded != 0 {
		t.Fatalf("dropped %d forwarded %d", g.ICMPTooBigDropped, g.ICMPTooBigForwarded)
	}
	if rs := h.rule(ruleWeb); rs.ICMPTooBigDropped != uint64(len(frames)-1) {
		t.Fatalf("web ICMPTooBigDropped %d", rs.ICMPTooBigDropped)
	}
}

// An all-zero ICMPv4 echo (id 0, sequence 0, no data) has checksum 0xf7ff; its reply sums to +0
// and must carry 0xffff, not the 0x0000 the incremental update gives (found by FuzzProcess).
func TestICMPEchoAllZeroChecksum(t *testing.T) {
	h := newWorld(t, nil, nil)
	in := icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: ICMPv4EchoRequest}
	want := icmpMsg{srcMAC: port0MAC, dstMAC: gwMAC, src: vip, dst: clientAddr, typ: ICMPv4EchoReply}
	r, out := h.process(in.build(t), 0)
	expectGolden(t, r, out, 0, want.build(t))
	if c := out[14+20+2:][:2]; c[0] != 0xff || c[1] != 0xff {
		t.Fatalf("checksum %x", c)
	}
}
