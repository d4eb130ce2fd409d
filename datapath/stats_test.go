package datapath

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// Stats is read from another goroutine while the worker runs; with -race this proves the
// publication is free of data races, and the checks prove each read is one burst's consistent view.
func TestStatsConcurrentReadersSeeConsistentCounters(t *testing.T) {
	h := newHarness(t, 1<<12, defaultRules())
	h.learnNeighbours()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for !stop.Load() {
				s := h.e.Stats()
				var sum uint64
				for _, r := range s.Rules {
					sum += r.PktProcessed
				}
				if sum != s.Global.Forwarded {
					t.Errorf("inconsistent read: servers %d, global forwarded %d", sum, s.Global.Forwarded)
					return
				}
				if s.Global.RxPackets < last {
					t.Errorf("rx went backwards: %d after %d", s.Global.RxPackets, last)
					return
				}
				last = s.Global.RxPackets
				reads.Add(1)
			}
		}()
	}
	frames := make([][]byte, 0, 64)
	for sport := uint16(1000); sport < 1064; sport++ {
		frames = append(frames, client(sport, TCPSyn).build(t))
	}
	buf := make([]byte, 0, 128)
	// Keep bursting until the readers have really overlapped with the worker: on a loaded
	// machine they may not be scheduled during the first 3000 bursts.
	start := time.Now()
	for i := 0; i < 3000 || (reads.Load() < 100 && time.Since(start) < 10*time.Second); i++ {
		h.e.BeginBurst(h.now)
		for j, f := range frames[:1+i%32] {
			buf = append(buf[:0], f...)
			if r := h.e.Process(buf, 0); r.Action != ActionForward {
				t.Fatalf("burst %d frame %d: %+v", i, j, r)
			}
		}
		h.e.EndBurst()
		if i%500 == 0 { // snapshot changes republish the layout while readers run
			h.setRules(defaultRules())
		}
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no concurrent reads happened")
	}
	s := h.e.Stats()
	if s.Global.Forwarded != h.rule(ruleWeb).PktProcessed || s.Global.Forwarded == 0 {
		t.Fatalf("final forwarded %d", s.Global.Forwarded)
	}
}

func TestStatsPublicationIsPaced(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	if s := h.e.Stats(); s.Global.RxPackets != 0 || len(s.Rules) != 0 {
		t.Fatalf("fresh engine: %+v", s)
	}
	h.learnNeighbours()
	h.e.ctr.interval = publishInterval
	before := h.e.Stats().Global.RxPackets
	h.process(client(1000, TCPSyn).build(t), 0)
	if got := h.e.Stats().Global.RxPackets; got != before {
		t.Fatalf("published before the interval: %d → %d", before, got)
	}
	h.advance(time.Millisecond)
	h.burst()
	if got := h.e.Stats().Global.RxPackets; got != before+1 {
		t.Fatalf("not published after the interval: %d → %d", before, got)
	}
}

// Nothing on the packet path allocates: new flows, established flows, replies, ARP answers,
// neighbour misses with their ARP requests, passes and drops, and the per-burst work.
func TestNoAllocationsOnThePacketPath(t *testing.T) {
	h := newHarness(t, 1<<12, defaultRules())
	h.learnNeighbours()
	h.e.ctr.interval = 0
	connect(t, h, 1000)
	frames := []struct {
		f  []byte
		in uint16
	}{
		{client(1000, TCPAck).build(t), 0},
		{fromServer(0, 1000, TCPAck).build(t), 1},
		{arpRequest(t, gwMAC, gwAddr, vip), 0},
		{arpFrame(t, 2, serverMAC[1], port1MAC, serverAddr[1], port1MAC, port1Addr), 1},
		{func() []byte { p := client(1, TCPSyn); p.dst = vip2; return p.build(t) }(), 0},
		{func() []byte { p := client(1, TCPSyn); p.dst = port0Addr; return p.build(t) }(), 0},
		{client(1, TCPSyn).build(t)[:30], 0},
		{pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true}.build(t), 0},
	}
	buf := make([]byte, 0, 256)
	ctl := make([]byte, 0, 128)
	sport := uint16(2000)
	// A flow from an on-link client whose MAC nobody answers: each reply is a neighbour miss
	// that queues an ARP request once a second.
	onLink := pkt{srcMAC: unlearnableMAC, dstMAC: port0MAC, src: netip.MustParseAddr("192.0.2.77"), dst: vip, sport: 5, dport: 80, flags: TCPSyn}
	r, out := h.process(onLink.build(t), 0)
	if r.Action != ActionForward {
		t.Fatalf("on-link SYN: %+v", r)
	}
	si := serverIndex(t, decode(t, out).ip.DstIP)
	frames = append(frames, struct {
		f  []byte
		in uint16
	}{pkt{srcMAC: serverMAC[si], dstMAC: port1MAC, src: serverAddr[si], dst: onLink.src, sport: 8080, dport: 5, flags: TCPAck}.build(t), 1})
	before := h.e.Stats().Global
	allocs := testing.AllocsPerRun(200, func() {
		h.now += int64(10 * time.Millisecond)
		h.e.BeginBurst(h.now)
		for _, f := range frames {
			buf = append(buf[:0], f.f...)
			h.e.Process(buf, f.in)
		}
		sport++ // a new flow each round: patch the client port of a prepared frame
		buf = append(buf[:0], frames[0].f...)
		binary.BigEndian.PutUint16(buf[EthernetHeaderSize+IPv4MinSize:], sport)
		buf[EthernetHeaderSize+IPv4MinSize+tcpFlags] = TCPSyn
		h.e.Process(buf, 0)
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
	if g.NeighbourMisses-before.NeighbourMisses < 200 || g.ARPRequestsSent-before.ARPRequestsSent < 2 ||
		g.ARPRepliesSent-before.ARPRepliesSent < 200 || g.Forwarded-before.Forwarded < 600 {
		t.Fatalf("the paths were not all exercised: %+v", g)
	}
}

// The kstat set of show-statistics (spec §2.7): num_rules, num_servers, and per-server processed
// counters that count both directions of NAT flows but DSR only toward the server.
func TestStatsKstatSet(t *testing.T) {
	h := newWorld(t, nil, nil)
	for _, c := range allTopoCases() {
		p, _ := benchFlow(c)
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("%v: %+v", c, r)
		}
		if c.topo == rules.TopoDSR {
			continue
		}
		d := decode(t, out)
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(), udp: c.udp, flags: TCPAck}
		if d.tcp != nil {
			back.sport, back.dport = uint16(d.tcp.DstPort), uint16(d.tcp.SrcPort)
		} else {
			back.sport, back.dport = uint16(d.udp.DstPort), uint16(d.udp.SrcPort)
		}
		if r, _ := h.process(back.build(t), 1); r.Action != ActionForward {
			t.Fatalf("%v reply: %+v", c, r)
		}
	}
	h.burst()
	s := h.stats()
	if s.NumRules != len(worldRules()) {
		t.Fatalf("NumRules %d", s.NumRules)
	}
	var fwd uint64
	for _, rs := range s.Rules {
		if rs.NumServers != 3 {
			t.Fatalf("rule %s NumServers %d", rs.Name, rs.NumServers)
		}
		want := uint64(0)
		switch rs.ID {
		case ruleDSR, ruleDSRUDP, ruleDSR6, ruleDSR6UDP:
			want = 1
		case ruleWeb, ruleDNS, ruleNAT, ruleNATUDP, ruleWeb6, ruleDNS6, ruleNAT6, ruleNAT6UDP:
			want = 2
		}
		if rs.PktProcessed != want {
			t.Fatalf("rule %s processed %d, want %d", rs.Name, rs.PktProcessed, want)
		}
		fwd += rs.PktProcessed
	}
	if s.Global.Forwarded != fwd {
		t.Fatalf("forwarded %d, rules processed %d", s.Global.Forwarded, fwd)
	}
}
