package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// Nothing on the packet path allocates, for any topology or family: new flows (with NAT port
// allocation and persistence), established flows both ways, DSR, ICMP echo and too-big, NDP
// solicitations and advertisements, neighbour misses with their solicitations, drops and passes.
func TestNoAllocationsEveryPath(t *testing.T) {
	rs := stickyRules(24, ruleWeb6, ruleDSR)
	h := newWorld(t, rs, func(c *Config) { c.ConnCapacity = 1 << 14 })
	type frame struct {
		f  []byte
		in uint16
	}
	var frames []frame
	var newFlows []frame // sport patched every round
	for _, c := range allTopoCases() {
		p, _ := benchFlow(c)
		p.flags = TCPSyn
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("%v: %+v", c, r)
		}
		newFlows = append(newFlows, frame{p.build(t), 0})
		p.flags = TCPAck
		frames = append(frames, frame{p.build(t), 0})
		if c.topo != rules.TopoDSR { // the reply
			d := decode(t, out)
			var sp, dp uint16
			if d.tcp != nil {
				sp, dp = uint16(d.tcp.DstPort), uint16(d.tcp.SrcPort)
			} else {
				sp, dp = uint16(d.udp.DstPort), uint16(d.udp.SrcPort)
			}
			frames = append(frames, frame{pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(), sport: sp, dport: dp, udp: c.udp, flags: TCPAck}.build(t), 1})
			quoted := pkt{src: p.dst, dst: p.src, sport: p.dport, dport: p.sport, udp: c.udp, ttl: 63, flags: TCPAck}
			router := gwAddr
			if c.v6 {
				router = gwAddr6
			}
			frames = append(frames, frame{tooBig(router, gwMAC, port0MAC, p.dst, ipPacket(quoted.build(t)), 0).build(t), 0})
		}
	}
	frames = append(frames,
		frame{icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: 8, body: []byte("x")}.build(t), 0},
		frame{icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, typ: 128, body: []byte("x")}.build(t), 0},
		frame{icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: gwAddr, dst: vip, typ: 11}.build(t), 0},
		frame{nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255), 0},
		frame{nsFrame(t, gwMAC, gwAddr6, vipNAT6, vipNAT6, false, 255), 0},
		frame{naFrame(t, serverMAC[1], serverAddr6[1], port1MAC, port1Addr6, serverAddr6[1], ndpFlagSolicit, true, 255), 1},
		frame{arpRequest(t, serverMAC[0], serverAddr[0], proxy4[0]), 1},
		frame{pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 81}.build(t), 0},
		frame{pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, fragment: true}.build(t), 0},
		frame{pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 80, ext6: extRouting}.build(t), 0},
		frame{pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1, dport: 53, udp: true, noUDPChecksum: true}.build(t), 0},
	)
	// An on-link IPv6 client nobody resolved: each reply is a neighbour miss that queues a
	// solicitation now and then.
	onLink := pkt{srcMAC: unlearnableMAC, dstMAC: port0MAC, src: netip.MustParseAddr("2001:db8:2::77"), dst: vip6, sport: 5, dport: 80, flags: TCPSyn}
	r, out := h.process(onLink.build(t), 0)
	if r.Action != ActionForward {
		t.Fatalf("on-link SYN: %+v", r)
	}
	srv := decode(t, out).dst()
	frames = append(frames, frame{pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: srv, dst: onLink.src, sport: 8080, dport: 5, flags: TCPAck}.build(t), 1})

	buf := make([]byte, 0, 256)
	ctl := make([]byte, 0, 128)
	sport := uint16(2000)
	before := h.e.Stats().Global
	allocs := testing.AllocsPerRun(200, func() {
		h.now += int64(10 * time.Millisecond)
		h.e.BeginBurst(h.now)
		for _, f := range frames {
			buf = append(buf[:0], f.f...)
			h.e.Process(buf, f.in)
		}
		sport++
		for _, f := range newFlows {
			buf = append(buf[:0], f.f...)
			off := EthernetHeaderSize + IPv4MinSize
			if binary.BigEndian.Uint16(buf[12:]) == EtherTypeIPv6 {
				off = EthernetHeaderSize + IPv6HeaderSize
			}
			binary.BigEndian.PutUint16(buf[off:], sport)
			h.e.Process(buf, f.in)
		}
		h.e.EndBurst()
		for {
			if _, _, ok := h.e.NextControlFrame(ctl); !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per burst", allocs)
	}
	h.burst()
	g := h.e.Stats().Global
	if g.NDPSolicitsSent == before.NDPSolicitsSent || g.ICMPTooBigForwarded-before.ICMPTooBigForwarded < 200*8 ||
		g.NDPAdvertsSent-before.NDPAdvertsSent < 400 || g.ICMPEchoReplies-before.ICMPEchoReplies < 400 || g.Forwarded-before.Forwarded < 200*30 {
		t.Fatalf("the paths were not all exercised: %+v", g)
	}
}
