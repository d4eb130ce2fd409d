package datapath

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// Hop-by-hop and destination options headers are skipped: the packet is balanced with its
// extension header intact.
func TestIPv6OptionsHeadersSkipped(t *testing.T) {
	for _, ext := range []extHdr{extHopByHop, extDestOpts} {
		h := newWorld(t, nil, nil)
		in := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1234, dport: 80, flags: TCPSyn, ext6: ext, payload: []byte("x")}
		want := in
		want.srcMAC, want.dstMAC, want.dst, want.dport, want.ttl = port1MAC, serverMAC[0], serverAddr6[0], 8080, 63
		r, out := h.process(in.build(t), 0)
		expectGolden(t, r, out, 1, want.build(t))
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr6[0], dst: clientAddr6, sport: 8080, dport: 1234, flags: TCPSyn | TCPAck, ext6: ext}
		wantBack := back
		wantBack.srcMAC, wantBack.dstMAC, wantBack.src, wantBack.sport, wantBack.ttl = port0MAC, gwMAC, vip6, 80, 63
		r, out = h.process(back.build(t), 1)
		expectGolden(t, r, out, 0, wantBack.build(t))
	}
}

// Fragments (IPv4 MF/offset, IPv6 Fragment header) and routing headers toward a VIP or proxy
// address are dropped and counted; elsewhere they are not ours.
func TestIPv6FragmentsAndRoutingHeaders(t *testing.T) {
	h := newWorld(t, nil, nil)
	drops := []pkt{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, fragment: true},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipNAT6, sport: 1, dport: 80, udp: true, fragment: true},
		{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: proxy4[0], sport: 8080, dport: 4096, fragment: true},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, ext6: extRouting},
	}
	for i, p := range drops {
		in := uint16(0)
		if p.dstMAC == port1MAC {
			in = 1
		}
		if r, _ := h.process(p.build(t), in); r.Action != ActionDrop {
			t.Fatalf("packet %d: %+v", i, r)
		}
	}
	for _, p := range []pkt{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: port0Addr6, sport: 1, dport: 22, fragment: true},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: port0Addr6, sport: 1, dport: 22, ext6: extRouting},
	} {
		f := p.build(t)
		orig := slices.Clone(f)
		if r, out := h.process(f, 0); r.Action != ActionPass || !bytes.Equal(out, orig) {
			t.Fatalf("%+v", r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.FragIn != 3 || g.FragDropped != 3 || g.IPv6ExtDropped != 1 {
		t.Fatalf("FragIn %d FragDropped %d IPv6ExtDropped %d", g.FragIn, g.FragDropped, g.IPv6ExtDropped)
	}
	if h.e.conns.count() != 0 {
		t.Fatal("balanced a fragment")
	}
}

func TestIPv6HopLimit(t *testing.T) {
	h := newWorld(t, nil, nil)
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, flags: TCPSyn, ttl: 1}
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("hop limit 1: %+v", r)
	}
	p.ttl = 2
	r, out := h.process(p.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr6, serverAddr6[0], 1, 8080, 1)
	for _, d := range []pkt{
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipDSR6, sport: 1, dport: 80, ttl: 1},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipDSR, sport: 1, dport: 80, ttl: 1},
	} {
		if r, _ := h.process(d.build(t), 0); r.Action != ActionDrop {
			t.Fatalf("DSR with TTL 1: %+v", r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.TTLExceeded != 3 {
		t.Fatalf("TTLExceeded %d", g.TTLExceeded)
	}
}

// Every malformation of the new parsers is dropped, counted under its reason and never
// modifies the frame.
func TestMalformedIPv6AndICMP(t *testing.T) {
	l3 := EthernetHeaderSize
	tcp6 := func(t *testing.T) []byte {
		return pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, flags: TCPSyn}.build(t)
	}
	setPL := func(b []byte, n int) []byte { binary.BigEndian.PutUint16(b[l3+4:], uint16(n)); return b }
	v6Reason := func(g GlobalCounters) uint64 { return g.MalformedIPv6 }
	cases := []struct {
		name   string
		frame  func(t *testing.T) []byte
		reason func(GlobalCounters) uint64
	}{
		{"IPv6 shorter than 40", func(t *testing.T) []byte { return tcp6(t)[:l3+39] }, v6Reason},
		{"version 4 in IPv6 EtherType", func(t *testing.T) []byte { b := tcp6(t); b[l3] = 0x40; return b }, v6Reason},
		{"payload beyond frame", func(t *testing.T) []byte { return setPL(tcp6(t), 200) }, v6Reason},
		{"hop-by-hop not first", func(t *testing.T) []byte {
			b := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, ext6: extDestOpts}.build(t)
			b[l3+40] = 0 // destination options followed by hop-by-hop
			return b
		}, v6Reason},
		{"options header beyond payload", func(t *testing.T) []byte {
			b := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, ext6: extHopByHop}.build(t)
			b[l3+41] = 9 // 80 bytes
			return b
		}, v6Reason},
		{"too many options headers", func(t *testing.T) []byte {
			b := tcp6(t)
			b = b[:l3+40]
			b[l3+6] = 60
			for k := range 5 {
				nh := byte(60)
				if k == 4 {
					nh = 59
				}
				b = append(b, nh, 0, 1, 4, 0, 0, 0, 0)
			}
			return setPL(b, 40)
		}, v6Reason},
		{"fragment header cut", func(t *testing.T) []byte {
			b := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, fragment: true}.build(t)
			return setPL(b, 4)
		}, v6Reason},
		{"IPv6 TCP cut", func(t *testing.T) []byte { return setPL(tcp6(t), 19) }, l4Reason},
		{"IPv6 UDP without checksum", func(t *testing.T) []byte {
			return pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 53, udp: true, noUDPChecksum: true}.build(t)
		}, l4Reason},
		{"ICMPv4 shorter than 8", func(t *testing.T) []byte {
			b := icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: 8}.build(t)
			binary.BigEndian.PutUint16(b[l3+2:], 20+7)
			fixIPChecksum(b)
			return b
		}, l4Reason},
		{"ICMPv6 shorter than 8", func(t *testing.T) []byte {
			return setPL(icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, typ: 128}.build(t), 7)
		}, l4Reason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newWorld(t, nil, nil)
			frame := c.frame(t)
			orig := slices.Clone(frame)
			before := h.stats().Global
			r, out := h.process(frame, 0)
			if r.Action != ActionDrop {
				t.Fatalf("action %v, want drop", r.Action)
			}
			if !slices.Equal(out, orig) {
				t.Fatal("malformed frame was modified")
			}
			g := h.stats().Global
			if g.Malformed != before.Malformed+1 || c.reason(g) != c.reason(before)+1 {
				t.Fatalf("counters: malformed %d→%d, reason %d→%d", before.Malformed, g.Malformed, c.reason(before), c.reason(g))
			}
		})
	}
}

// Every prefix of every kind of frame the new code handles is processed without panic.
func TestTruncatedIPv6ICMPNDPNeverPanic(t *testing.T) {
	h := newWorld(t, nil, nil)
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipNAT6, sport: 1, dport: 80, flags: TCPSyn}
	h.process(p.build(t), 0)
	known := pkt{src: vipNAT6, dst: clientAddr6, sport: 80, dport: 1, ttl: 63, flags: TCPAck}
	frames := [][]byte{
		p.build(t),
		pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr6[0], dst: proxy6[1], sport: 8080, dport: 4096, flags: TCPAck}.build(t),
		pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, ext6: extHopByHop}.build(t),
		pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, fragment: true}.build(t),
		icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, typ: 128, body: []byte("abc")}.build(t),
		icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: 8, body: []byte("abc")}.build(t),
		tooBig(gwAddr6, gwMAC, port0MAC, vipNAT6, ipPacket(known.build(t)), 0).build(t),
		nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255),
		naFrame(t, gwMAC, gwAddr6, port0MAC, port0Addr6, gwAddr6, ndpFlagSolicit, true, 255),
	}
	for _, f := range frames {
		for n := 0; n <= len(f); n++ {
			b := slices.Clone(f[:n])
			r, _ := h.process(b, 0)
			if r.Len > cap(b) {
				t.Fatalf("len %d: Result.Len %d beyond capacity", n, r.Len)
			}
		}
	}
}
