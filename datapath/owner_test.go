package datapath

import (
	"net/netip"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// twoWorkers returns the harnesses of two engines, workers 0 and 1 of 2, over one snapshot,
// each with its neighbours resolved: what ilbd runs with two worker lcores.
func twoWorkers(t *testing.T, rs []rules.SnapRule, mod func(*Config)) [2]*harness {
	t.Helper()
	var hs [2]*harness
	for w := range hs {
		hs[w] = newWorld(t, rs, func(c *Config) {
			c.WorkerIndex, c.WorkerCount, c.Handoff = w, 2, true
			if mod != nil {
				mod(c)
			}
		})
	}
	hs[1].snap = hs[0].snap
	hs[1].e.snapP = hs[0].snap
	return hs
}

// deliver gives frame to the worker it arrived at and, when that worker hands it off, to the
// owner, as the worker loops do; it returns the result and the worker that handled it.
func deliver(t *testing.T, hs [2]*harness, at int, frame []byte, in uint16) (Result, []byte, int) {
	t.Helper()
	r, out := hs[at].process(frame, in)
	if r.Action != ActionHandoff {
		return r, out, at
	}
	o := int(r.Port)
	if o == at || o > 1 {
		t.Fatalf("worker %d handed a frame to worker %d", at, o)
	}
	h := hs[o]
	h.e.BeginBurst(h.now)
	r = h.e.ProcessHandedOff(frame, in)
	h.e.EndBurst()
	if r.Action == ActionHandoff {
		t.Fatal("the owner handed a frame on again")
	}
	return r, frame[:r.Len], o
}

// Whichever worker receives them, every packet of a flow — the client's, the server's
// replies, and for full NAT the replies to the proxy port — is handled by one worker, the
// owner, and the handoffs are counted on both sides.
func TestFlowOwnershipAcrossWorkers(t *testing.T) {
	for _, c := range allTopoCases() {
		if c.udp {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			hs := twoWorkers(t, roundRobinWorld(), nil)
			cl, v, _, _, vport, _ := c.endpoints()
			for sport := uint16(40000); sport < 40040; sport++ {
				syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: sport, dport: vport, flags: TCPSyn}
				at := int(sport) % 2 // the device spreads arrivals over both workers
				r, out, owner := deliver(t, hs, at, syn.build(t), 0)
				if r.Action != ActionForward {
					t.Fatalf("SYN: %+v", r)
				}
				if want := hs[0].e.clientOwner(addrFromNetip(cl)); owner != want {
					t.Fatalf("SYN handled by worker %d, owner is %d", owner, want)
				}
				if c.topo == rules.TopoDSR {
					continue
				}
				d := decode(t, out)
				back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
					sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 7}
				// The reply arrives at the other worker.
				r, _, rOwner := deliver(t, hs, 1-at, back.build(t), 1)
				if r.Action != ActionForward || rOwner != owner {
					t.Fatalf("reply: %+v on worker %d, the flow's owner is %d", r, rOwner, owner)
				}
				if c.topo == rules.TopoNAT && FullNATPortOwner(uint16(d.tcp.SrcPort), 2) != owner {
					t.Fatalf("full-NAT port %d is not in the owner's share", d.tcp.SrcPort)
				}
			}
			var in, out uint64
			for _, h := range hs {
				h.burst()
				g := h.stats().Global
				in, out = in+g.HandoffIn, out+g.HandoffOut
			}
			if in == 0 || in != out {
				t.Fatalf("handoffs: %d out, %d in", out, in)
			}
		})
	}
}

// Clients of one persistence prefix are owned by one worker when the steering prefix is the
// pmask, so the persistence entry made for the first one serves them all, whichever worker
// their packets reach.
func TestPersistenceAcrossWorkers(t *testing.T) {
	hs := twoWorkers(t, stickyRules(24, ruleWeb), func(c *Config) { c.SteerPrefix4 = 24 })
	base := clientAddr.As4()
	var server netip.Addr
	for i := range 12 {
		a := base
		a[3] = byte(10 + i)
		src := netip.AddrFrom4(a)
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: src, dst: vip, sport: uint16(5000 + i), dport: 80, flags: TCPSyn}
		r, out, _ := deliver(t, hs, i%2, syn.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("client %v: %+v", src, r)
		}
		got := decode(t, out).dst()
		if i == 0 {
			server = got
		} else if got != server {
			t.Fatalf("client %v of the prefix went to %v, the first to %v", src, got, server)
		}
	}
	owner := hs[0].e.clientOwner(addrFromNetip(clientAddr))
	if n := hs[owner].e.sticky.count(); n != 1 {
		t.Fatalf("owner holds %d persistence entries, want 1", n)
	}
	if n := hs[1-owner].e.sticky.count(); n != 0 {
		t.Fatalf("the other worker holds %d persistence entries", n)
	}
	// Without the steering prefix the clients spread over both workers.
	plain := twoWorkers(t, stickyRules(24, ruleWeb), nil)
	seen := map[int]bool{}
	for i := range 64 {
		a := base
		a[3] = byte(i)
		seen[plain[0].e.clientOwner(addrFromNetip(netip.AddrFrom4(a)))] = true
	}
	if len(seen) != 2 {
		t.Fatal("client addresses of a /24 do not spread over two workers")
	}
}

// An ARP reply one worker receives teaches the other one too, through LearnNeighbour.
func TestNeighbourCopiesTeachOtherWorkers(t *testing.T) {
	hs := twoWorkers(t, nil, nil)
	local := netip.MustParseAddr("192.0.2.50")
	localMAC := [6]byte{0x02, 0, 0, 0, 5, 0}
	for w := range hs { // both want it
		hs[w].e.BeginBurst(hs[w].now)
		hs[w].e.resolve(addrFromNetip(local), 0)
		hs[w].e.EndBurst()
	}
	reply := arpFrame(t, 2, localMAC, port0MAC, local, port0MAC, port0Addr)
	if !IsNeighbourFrame(reply) {
		t.Fatal("an ARP reply is not a neighbour frame")
	}
	copyFrame := append([]byte(nil), reply...)
	if r, _ := hs[0].process(reply, 0); r.Action != ActionPass {
		t.Fatalf("ARP reply: %+v", r)
	}
	hs[1].e.BeginBurst(hs[1].now)
	hs[1].e.LearnNeighbour(copyFrame, 0)
	hs[1].e.EndBurst()
	for w, h := range hs {
		i := h.e.neigh.find(addrFromNetip(local), 0)
		if i < 0 || h.e.neigh.slots[i].mac != localMAC || h.e.neigh.slots[i].state != neighReachable {
			t.Fatalf("worker %d did not learn the neighbour", w)
		}
	}
	// Not neighbour frames: IPv4 TCP, IPv6 TCP.
	if IsNeighbourFrame(client(1, TCPSyn).build(t)) {
		t.Fatal("TCP taken for a neighbour frame")
	}
	ns := nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255)
	if !IsNeighbourFrame(ns) {
		t.Fatal("a neighbour solicitation is not a neighbour frame")
	}
}

// Traffic for the host goes to worker 0, the exception path's owner, and one worker alone
// never hands off.
func TestHostTrafficOwnedByWorkerZero(t *testing.T) {
	hs := twoWorkers(t, nil, nil)
	toHost := client(22, TCPSyn)
	toHost.dst = port0Addr
	r, _, owner := deliver(t, hs, 1, toHost.build(t), 0)
	if r.Action != ActionPass || owner != 0 {
		t.Fatalf("to the host: %+v on worker %d, want a pass on worker 0", r, owner)
	}
	single := newWorld(t, nil, nil)
	for sport := uint16(1); sport < 50; sport++ {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: TCPSyn}
		if r, _ := single.process(p.build(t), 0); r.Action == ActionHandoff {
			t.Fatal("a single worker handed a frame off")
		}
	}
}

// MergeStats adds what each worker counted: globals, ports, rules and their servers.
func TestMergeStats(t *testing.T) {
	hs := twoWorkers(t, nil, nil)
	var want [3]int
	for sport := uint16(1000); sport < 1040; sport++ {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: TCPSyn}
		_, _, _ = deliver(t, hs, int(sport)%2, p.build(t), 0)
		want[0]++
	}
	for _, h := range hs {
		h.burst()
	}
	a, b := hs[0].stats(), hs[1].stats()
	m := MergeStats(a, b)
	if m.Global.RxPackets != a.Global.RxPackets+b.Global.RxPackets || m.Global.HandoffIn != a.Global.HandoffIn+b.Global.HandoffIn {
		t.Fatalf("globals not summed: %d + %d = %d", a.Global.RxPackets, b.Global.RxPackets, m.Global.RxPackets)
	}
	var got uint64
	for _, r := range m.Rules {
		if r.ID == ruleWeb {
			got = r.PktProcessed
		}
	}
	if got != uint64(want[0]) {
		t.Fatalf("rule web processed %d packets over both workers, want %d", got, want[0])
	}
	if len(m.Ports) != len(a.Ports) || m.Ports[0].ChecksumSampled != a.Ports[0].ChecksumSampled+b.Ports[0].ChecksumSampled {
		t.Fatalf("ports not summed: %+v", m.Ports)
	}
}

// A proxy-src address that is also an interface address (the usual Solaris set-up) still
// steers replies to the worker whose share holds the port.
func TestOwnershipProxyIsPortAddress(t *testing.T) {
	rs := roundRobinWorld()
	for i := range rs {
		if rs[i].ID == ruleNAT {
			rs[i].ProxySrc = []netip.Addr{port1Addr}
		}
	}
	hs := twoWorkers(t, rs, nil)
	bad := 0
	for sport := uint16(40000); sport < 40020; sport++ {
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: sport, dport: 80, flags: TCPSyn}
		r, out, owner := deliver(t, hs, int(sport)%2, syn.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("SYN %+v", r)
		}
		d := decode(t, out)
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
			sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 7}
		r, _, rOwner := deliver(t, hs, 1-owner, back.build(t), 1)
		if r.Action != ActionForward || rOwner != owner {
			bad++
			t.Logf("reply port %d: %+v handled by %d, owner %d", d.tcp.SrcPort, r, rOwner, owner)
		}
	}
	if bad > 0 {
		t.Errorf("%d replies lost", bad)
	}
}

// Connections of a deleted rule keep their owner while they drain: the other worker still
// hands their replies over instead of passing them to the host.
func TestOwnershipSurvivesRuleDeletion(t *testing.T) {
	hs := twoWorkers(t, roundRobinWorld(), nil)
	o := owner0(hs)
	bad := 0
	var est []pkt
	for sport := uint16(40000); sport < 40020; sport++ {
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: TCPSyn, seq: 100}
		_, out, _ := deliver(t, hs, o, syn.build(t), 0)
		d := decode(t, out)
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
			sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 7, ack: 101}
		deliver(t, hs, o, back.build(t), 1)
		ack := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: TCPAck, seq: 101, ack: 8}
		deliver(t, hs, o, ack.build(t), 0)
		est = append(est, back)
	}
	hs[0].snap.Store(makeSnapshot(99, nil)) // every rule deleted
	for _, b := range est {
		b.flags = TCPAck
		r, _, w := deliver(t, hs, 1-o, b.build(t), 1)
		if r.Action != ActionForward {
			bad++
			t.Logf("reply after delete: %+v on worker %d (owner %d)", r, w, o)
		}
	}
	if bad > 0 {
		t.Errorf("%d replies of surviving connections lost after rule deletion", bad)
	}
}

// owner0 is the worker owning clientAddr's flows.
func owner0(hs [2]*harness) int { return hs[0].e.clientOwner(addrFromNetip(clientAddr)) }

// A full-NAT connection that finds its ports exhausted evicts only half-open entries that
// hold ports it could use: not the pending handshakes of other rules.
func TestFullNATExhaustionEvictsOnlyItsArenas(t *testing.T) {
	h := newWorld(t, roundRobinWorld(), func(c *Config) { c.WorkerIndex, c.WorkerCount = 0, 4096 })
	// Exhaust both proxy arenas with established full-NAT connections
	n := 0
	for sport := uint16(1000); ; sport++ {
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: sport, dport: 80, flags: TCPSyn, seq: 100}
		r, out := h.process(syn.build(t), 0)
		if r.Action != ActionForward {
			break
		}
		d := decode(t, out)
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
			sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 7, ack: 101}
		h.process(back.build(t), 1)
		ack := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: sport, dport: 80, flags: TCPAck, seq: 101, ack: 8}
		h.process(ack.build(t), 0)
		n++
	}
	t.Logf("%d established full-NAT conns, half-open %d", n, h.e.conns.hoCount)
	// 20 legitimate half-NAT handshakes in progress.
	for sport := uint16(50000); sport < 50020; sport++ {
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: sport, dport: 80, flags: TCPSyn}
		h.process(syn.build(t), 0)
	}
	before := h.e.conns.hoCount
	syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: 60000, dport: 80, flags: TCPSyn}
	r, _ := h.process(syn.build(t), 0)
	t.Logf("full-NAT SYN: %+v; half-open before %d after %d", r, before, h.e.conns.hoCount)
	if h.e.conns.hoCount < before {
		t.Errorf("one refused full-NAT SYN evicted %d unrelated half-open entries", before-h.e.conns.hoCount)
	}
}

// A VIP that is also an interface address is balanced by the client's owner, replies included.
func TestOwnershipVIPIsPortAddress(t *testing.T) {
	rs := roundRobinWorld()
	for i := range rs {
		if rs[i].ID == ruleWeb {
			rs[i].VIP = port0Addr
		}
	}
	hs := twoWorkers(t, rs, nil)
	bad := 0
	for c := 0; c < 16; c++ {
		cl := netip.AddrFrom4([4]byte{203, 0, 113, byte(20 + c)})
		syn := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: port0Addr, sport: 4000, dport: 80, flags: TCPSyn}
		r, out, owner := deliver(t, hs, c%2, syn.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("SYN %+v", r)
		}
		d := decode(t, out)
		back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
			sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 7}
		r, _, rOwner := deliver(t, hs, 1-owner, back.build(t), 1)
		if r.Action != ActionForward || rOwner != owner {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of 16 half-NAT replies lost with VIP = port address", bad)
	}
}
