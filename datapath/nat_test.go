package datapath

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// connect sends a client SYN from sport and returns the server index it was balanced to.
// connect opens a half-NAT connection from the client's port sport with a whole handshake
// (SYN, the server's SYN+ACK, the client's ACK), so the entry is established, and returns the
// index of the server it went to.
func connect(t *testing.T, h *harness, sport uint16) int {
	t.Helper()
	i := connectSYN(t, h, sport)
	synAck := fromServer(i, sport, TCPSyn|TCPAck)
	if r, _ := h.process(synAck.build(t), 1); r.Action != ActionForward {
		t.Fatalf("SYN+ACK to %d: %+v", sport, r)
	}
	ack := client(sport, TCPAck)
	ack.seq, ack.ack = 1001, synAck.seq+1
	if r, _ := h.process(ack.build(t), 0); r.Action != ActionForward {
		t.Fatalf("ACK from %d: %+v", sport, r)
	}
	return i
}

// connectSYN sends only the client's SYN from port sport: the entry stays half-open.
func connectSYN(t *testing.T, h *harness, sport uint16) int {
	t.Helper()
	r, out := h.process(client(sport, TCPSyn).build(t), 0)
	if r.Action != ActionForward {
		t.Fatalf("SYN from %d: %+v", sport, r)
	}
	d := decode(t, out)
	i := serverIndex(t, d.ip.DstIP)
	expectForward(t, r, out, 1, serverMAC[i], clientAddr, serverAddr[i], sport, 8080, 63)
	return i
}

func TestHalfNATTCPRoundRobin(t *testing.T) {
	h := newHarness(t, 1024, defaultRules())
	h.learnNeighbours()
	chosen := make(map[uint16]int)
	var per [3]int
	for sport := uint16(10000); sport < 10300; sport++ {
		i := connectSYN(t, h, sport)
		chosen[sport] = i
		per[i]++
	}
	if per != [3]int{100, 100, 100} {
		t.Fatalf("distribution %v, want 100 each", per)
	}
	// Strict rotation, not just an even count.
	for sport := uint16(10000); sport < 10300; sport++ {
		if chosen[sport] != int(sport-10000)%3 {
			t.Fatalf("flow %d went to server %d", sport, chosen[sport])
		}
	}
	// Replies are rewritten back to the VIP and sent toward the client through the gateway.
	for sport, i := range chosen {
		r, out := h.process(fromServer(i, sport, TCPSyn|TCPAck).build(t), 1)
		d := expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, sport, 63)
		if !d.tcp.SYN || !d.tcp.ACK || d.tcp.Seq != 5000 || d.tcp.Ack != 1001 {
			t.Fatalf("TCP header changed: %+v", d.tcp)
		}
	}
	// And the client's next segment follows its entry.
	r, out := h.process(client(10001, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[1], clientAddr, serverAddr[1], 10001, 8080, 63)

	h.burst()
	rs := h.rule(ruleWeb)
	if rs.PktProcessed != 601 {
		t.Fatalf("PktProcessed %d, want 601", rs.PktProcessed)
	}
	for i, s := range rs.Servers {
		want := uint64(200)
		if i == 1 {
			want = 201
		}
		if s.PktProcessed != want || s.Addr != serverAddr[i] || s.ID != "_sg1."+string(rune('0'+i)) {
			t.Fatalf("server %d stats %+v", i, s)
		}
		if s.BytesProcessed != want*40 { // 20 IP + 20 TCP bytes per packet
			t.Fatalf("server %d bytes %d", i, s.BytesProcessed)
		}
	}
	if g := h.stats().Global; g.Forwarded != 601 || g.Dropped != 0 {
		t.Fatalf("Forwarded %d Dropped %d", g.Forwarded, g.Dropped)
	}
}

func TestHalfNATUDPBothWays(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	payload := []byte("a dns query, odd length")
	q := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 33333, dport: 53, udp: true, payload: payload}
	r, out := h.process(q.build(t), 0)
	d := expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 33333, 5353, 63)
	if !bytes.Equal(d.udp.Payload, payload) {
		t.Fatal("payload changed")
	}
	a := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: clientAddr, sport: 5353, dport: 33333, udp: true, payload: []byte("answer")}
	r, out = h.process(a.build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 53, 33333, 63)

	// A datagram without checksum keeps none.
	q.sport, q.noUDPChecksum = 33334, true
	r, out = h.process(q.build(t), 0)
	d = expectForward(t, r, out, 1, serverMAC[1], clientAddr, serverAddr[1], 33334, 5353, 63)
	if d.udp.Checksum != 0 {
		t.Fatalf("UDP checksum %#x, want 0 (none)", d.udp.Checksum)
	}
}

func TestServerPortMapping(t *testing.T) {
	rs := defaultRules()
	rs[0].MinPort, rs[0].MaxPort = 8000, 8009                       // rule range
	rs[0].Servers[0].MinPort, rs[0].Servers[0].MaxPort = 9000, 9009 // same-size range: shift
	rs[0].Servers[1].MinPort, rs[0].Servers[1].MaxPort = 7000, 7000 // single port: collapse
	rs[0].Servers[2].MinPort, rs[0].Servers[2].MaxPort = 0, 0       // no port: keep
	h := newHarness(t, 64, rs)
	h.learnNeighbours()
	want := []uint16{9005, 7000, 8005}
	for i, w := range want {
		p := client(uint16(2000+i), TCPSyn)
		p.dport = 8005
		r, out := h.process(p.build(t), 0)
		expectForward(t, r, out, 1, serverMAC[i], clientAddr, serverAddr[i], uint16(2000+i), w, 63)
		back := fromServer(i, uint16(2000+i), TCPSyn|TCPAck)
		back.sport = w
		r, out = h.process(back.build(t), 1)
		expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 8005, uint16(2000+i), 63)
	}
}

func TestDisabledServerSkippedExistingFlowContinues(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	if i := connect(t, h, 1000); i != 0 {
		t.Fatalf("first flow to server %d", i)
	}
	rs := defaultRules()
	rs[0].Servers[0].Enabled = false
	h.setRules(rs)
	for sport := uint16(2000); sport < 2010; sport++ {
		if i := connect(t, h, sport); i == 0 {
			t.Fatalf("new flow %d went to the disabled server", sport)
		}
	}
	// The established flow keeps its server, both ways.
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	r, out = h.process(fromServer(0, 1000, TCPAck).build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, 1000, 63)
}

func TestDisabledRulePasses(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	p := client(1000, TCPSyn)
	p.dst = vip2
	frame := p.build(t)
	orig := slices.Clone(frame)
	r, out := h.process(frame, 0)
	if r.Action != ActionPass || !bytes.Equal(out, orig) {
		t.Fatalf("disabled rule: %+v, frame changed %v", r, !bytes.Equal(out, orig))
	}
	h.burst()
	rs := h.rule(ruleDisabled)
	if rs.PktNotProcessed != 1 || rs.BytesNotProcessed != 40 || rs.PktProcessed != 0 {
		t.Fatalf("rule stats %+v", rs.RuleCounters)
	}
	if g := h.stats().Global; g.NotProcessed != 1 || g.Passed != 5 { // 4 ARP replies went to the host too
		t.Fatalf("global NotProcessed %d Passed %d", g.NotProcessed, g.Passed)
	}
	if h.e.conns.count() != 0 {
		t.Fatal("a connection was created for a disabled rule")
	}
	// Enabling the rule starts balancing at once.
	rules := defaultRules()
	rules[2].Enabled = true
	h.setRules(rules)
	r, out = h.process(p.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 80, 63)
}

func TestNoEnabledServerDrops(t *testing.T) {
	rs := defaultRules()
	for i := range rs[0].Servers {
		rs[0].Servers[i].Enabled = false
	}
	h := newHarness(t, 64, rs)
	h.learnNeighbours()
	if r, _ := h.process(client(1000, TCPSyn).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("no enabled server: %+v", r)
	}
	h.burst()
	if rs := h.rule(ruleWeb); rs.PktDropped != 1 || rs.BytesDropped != 40 {
		t.Fatalf("rule stats %+v", rs.RuleCounters)
	}
}

func TestUnmatchedAndLocalPass(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	cases := []struct {
		name string
		p    pkt
	}{
		{"VIP, other port", func() pkt { p := client(1000, TCPSyn); p.dport = 81; return p }()},
		{"other address", func() pkt { p := client(1000, TCPSyn); p.dst = netip.MustParseAddr("192.0.2.99"); return p }()},
		{"interface address", func() pkt { p := client(1000, TCPSyn); p.dst = port0Addr; p.dport = 22; return p }()},
		{"server to us (health check)", func() pkt { p := fromServer(0, 40000, TCPSyn|TCPAck); p.dst = port1Addr; return p }()},
	}
	for _, c := range cases {
		frame := c.p.build(t)
		orig := slices.Clone(frame)
		in := uint16(0)
		if c.p.dstMAC == port1MAC {
			in = 1
		}
		if r, out := h.process(frame, in); r.Action != ActionPass || !bytes.Equal(out, orig) {
			t.Fatalf("%s: %+v", c.name, r)
		}
	}
	h.burst()
	if g := h.stats().Global; g.VIPPortUnmatched != 1 || g.Unmatched != 1 || g.Local != 2 || g.Passed != 8 { // 4 ARP replies passed too
		t.Fatalf("VIPPortUnmatched %d Unmatched %d Local %d Passed %d, want 1 1 2 8", g.VIPPortUnmatched, g.Unmatched, g.Local, g.Passed)
	}
}

// A RST does not end an entry at once: it starts a short closing state in which the flow keeps
// its server. After a real reset nothing follows and the entry goes at the half-open timeout; a
// blind RST (any sequence number, from anyone who knows the endpoints) is followed by the
// flow's next segment, which finds the same server and makes the entry established again.
func TestRSTClosingState(t *testing.T) {
	for _, fromClient := range []bool{true, false} {
		h := newHarness(t, 64, defaultRules())
		h.learnNeighbours()
		connect(t, h, 1000) // server 0
		var r Result
		if fromClient {
			r, _ = h.process(client(1000, TCPRst).build(t), 0)
		} else {
			r, _ = h.process(fromServer(0, 1000, TCPRst|TCPAck).build(t), 1)
		}
		if r.Action != ActionForward {
			t.Fatalf("RST not forwarded: %+v", r)
		}
		ci := int32(h.e.conns.hoHead)
		if n := h.e.conns.count(); n != 1 || ci < 0 || h.e.conns.entries[ci].state != connClosing {
			t.Fatalf("RST from client %v: %d entries, half-open head %d, want one closing entry", fromClient, n, ci)
		}
		// Nothing follows a real reset: the entry goes at the half-open timeout, and the
		// client's next SYN is a new connection, to the next server.
		h.advance(DefaultHalfOpenTimeout + time.Millisecond)
		h.burst()
		if n := h.e.conns.count(); n != 0 {
			t.Fatalf("%d entries after the closing timeout", n)
		}
		if r, _ := h.process(fromServer(0, 1000, TCPAck).build(t), 1); r.Action != ActionPass {
			t.Fatalf("reply after the entry ended: %+v", r)
		}
		if i := connect(t, h, 1000); i != 1 {
			t.Fatalf("new connection went to server %d, want the next one", i)
		}
		h.burst()
		if g := h.stats().Global; g.ConnReset != 1 || g.HalfOpenExpired != 1 {
			t.Fatalf("ConnReset %d HalfOpenExpired %d, want 1 1", g.ConnReset, g.HalfOpenExpired)
		}
	}
}

func TestBlindRSTKeepsServer(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	for sp := uint16(1000); sp < 1003; sp++ {
		connect(t, h, sp) // servers 0, 1, 2
	}
	// An attacker who guessed the endpoints resets the first connection with a made-up sequence.
	blind := client(1000, TCPRst)
	blind.seq = 0xdeadbeef
	h.process(blind.build(t), 0)
	// The client's next segment still reaches server 0 (round robin would pick server 0 again
	// only by chance: its next choice is server 0 after three, so move it on first).
	connectSYN(t, h, 2000) // server 0
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	ci, _ := h.e.conns.lookup(addrFromNetip(clientAddr), addrFromNetip(vip), 1000, 80, ProtoTCP,
		h.e.conns.hash(addrFromNetip(clientAddr), addrFromNetip(vip), 1000, 80, ProtoTCP))
	if ci < 0 || h.e.conns.entries[ci].state != connEstablished {
		t.Fatal("the flow's segment after a blind RST did not restore the entry")
	}
	// Long after the closing timeout the flow still lives with its own server.
	h.advance(60 * time.Second)
	r, out = h.process(fromServer(0, 1000, TCPAck).build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, 1000, 63)
}

func TestFINFINACKRemovesEntry(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000)
	step := func(p pkt, in uint16) {
		t.Helper()
		if r, _ := h.process(p.build(t), in); r.Action != ActionForward {
			t.Fatalf("%+v not forwarded: %+v", p, r)
		}
	}
	fin := client(1000, TCPFin|TCPAck)
	fin.seq, fin.ack, fin.payload = 2000, 7000, []byte("bye") // FIN carries seq 2003
	step(fin, 0)
	srvAck := fromServer(0, 1000, TCPAck)
	srvAck.seq, srvAck.ack = 7000, 2004
	step(srvAck, 1)
	if h.e.conns.count() != 1 {
		t.Fatal("entry removed after one FIN")
	}
	srvFin := fromServer(0, 1000, TCPFin|TCPAck)
	srvFin.seq, srvFin.ack = 7000, 2004
	step(srvFin, 1)
	if h.e.conns.count() != 1 {
		t.Fatal("entry removed before the server's FIN was acknowledged")
	}
	// An ACK that does not cover the server's FIN keeps it.
	early := client(1000, TCPAck)
	early.seq, early.ack = 2004, 7000
	step(early, 0)
	if h.e.conns.count() != 1 {
		t.Fatal("entry removed by an ACK below the FIN")
	}
	last := client(1000, TCPAck)
	last.seq, last.ack = 2004, 7001
	step(last, 0)
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("%d entries after FIN/FIN/ACK", n)
	}
}

func TestFINStateClearedByPortReuse(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000)
	fin := client(1000, TCPFin|TCPAck)
	fin.seq, fin.ack = 2000, 7000
	h.process(fin.build(t), 0)
	// The client reuses the port: a new SYN clears the close state of the entry.
	h.process(client(1000, TCPSyn).build(t), 0)
	srvFin := fromServer(0, 1000, TCPFin|TCPAck)
	srvFin.seq, srvFin.ack = 7000, 2001
	h.process(srvFin.build(t), 1)
	last := client(1000, TCPAck)
	last.seq, last.ack = 2001, 7001
	h.process(last.build(t), 0)
	if n := h.e.conns.count(); n != 1 {
		t.Fatalf("%d entries: the old FIN was still counted", n)
	}
}

func TestIdleExpiry(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000) // server 0
	h.advance(100 * time.Second)
	// Traffic in the reply direction keeps it alive.
	if r, _ := h.process(fromServer(0, 1000, TCPAck).build(t), 1); r.Action != ActionForward {
		t.Fatalf("reply within the timeout: %+v", r)
	}
	h.advance(100 * time.Second)
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)

	// Idle for longer than nat-timeout (120 s): the lookup finds it expired and the packet starts
	// a new connection, to the next server.
	h.advance(121 * time.Second)
	h.learnNeighbours() // the test's neighbours answer the engine's refresh requests
	if r, _ := h.process(fromServer(0, 1000, TCPAck).build(t), 1); r.Action != ActionPass {
		t.Fatalf("reply of an expired entry: %+v, want pass", r)
	}
	if i := connect(t, h, 1000); i != 1 {
		t.Fatalf("after expiry went to server %d, want 1", i)
	}

	// The sweep frees entries nobody looks up again.
	for sport := uint16(3000); sport < 3020; sport++ {
		connect(t, h, sport)
	}
	if n := h.e.conns.count(); n != 21 {
		t.Fatalf("%d entries", n)
	}
	h.advance(121 * time.Second)
	h.scan()
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("%d entries after the sweep", n)
	}
	// UDP uses its own rule's 60 s timeout.
	q := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 5000, dport: 53, udp: true}
	h.process(q.build(t), 0)
	h.advance(61 * time.Second)
	h.scan()
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("UDP entry survived its 60 s timeout")
	}
}

func TestConnTableFull(t *testing.T) {
	h := newHarness(t, 4, defaultRules())
	h.learnNeighbours()
	for sport := uint16(1000); sport < 1004; sport++ {
		connect(t, h, sport)
	}
	if r, _ := h.process(client(1004, TCPSyn).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("fifth flow in a 4-entry table: %+v", r)
	}
	// Established flows still work.
	r, out := h.process(client(1002, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[2], clientAddr, serverAddr[2], 1002, 8080, 63)
	h.burst()
	if g := h.stats().Global; g.NoMemory != 1 {
		t.Fatalf("NoMemory %d", g.NoMemory)
	}
	if rs := h.rule(ruleWeb); rs.NoMemPktDropped != 1 || rs.NoMemBytesDropped != 40 {
		t.Fatalf("rule %+v", rs.RuleCounters)
	}
	// A reset connection is no longer established: it is evicted to make room.
	h.process(client(1000, TCPRst).build(t), 0)
	connect(t, h, 1004)
}

func TestTTL(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	p := client(1000, TCPSyn)
	p.ttl = 1
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("TTL 1: %+v", r)
	}
	if h.e.conns.count() != 0 {
		t.Fatal("entry created for an expiring packet")
	}
	p.ttl = 2
	r, out := h.process(p.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 1)
	// Established flows check it too.
	back := fromServer(0, 1000, TCPAck)
	back.ttl = 1
	if r, _ := h.process(back.build(t), 1); r.Action != ActionDrop {
		t.Fatalf("reply with TTL 1: %+v", r)
	}
	back.ttl = 255
	r, out = h.process(back.build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, 1000, 254)
	h.burst()
	if g := h.stats().Global; g.TTLExceeded != 2 {
		t.Fatalf("TTLExceeded %d", g.TTLExceeded)
	}
}

func TestSnapshotSwapKeepsConnections(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000)
	connect(t, h, 1001)
	// The web rule is deleted altogether.
	h.setRules(defaultRules()[1:])
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	r, out = h.process(fromServer(1, 1001, TCPAck).build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, 1001, 63)
	// New flows no longer match.
	if r, _ := h.process(client(1002, TCPSyn).build(t), 0); r.Action != ActionPass {
		t.Fatalf("new flow to a deleted rule: %+v", r)
	}
	// Its counters remain while it drains (two handshakes of three packets, then one each)...
	rs := h.rule(ruleWeb)
	if !rs.Draining || rs.PktProcessed != 8 {
		t.Fatalf("draining rule stats %+v", rs)
	}
	// ...and go once its last connection is gone: reset, then gone at the closing timeout.
	h.process(client(1000, TCPRst).build(t), 0)
	h.process(client(1001, TCPRst).build(t), 0)
	h.advance(DefaultHalfOpenTimeout + time.Millisecond)
	h.burst()
	for _, r := range h.stats().Rules {
		if r.ID == ruleWeb {
			t.Fatal("deleted rule still listed after its connections ended")
		}
	}
	// Re-creating a rule with the same name is a new rule instance with fresh counters.
	rules2 := defaultRules()
	rules2[0].ID = 10
	h.setRules(rules2)
	connect(t, h, 3000)
	h.burst()
	if rs := h.rule(10); rs.PktProcessed != 3 || rs.Name != "web" {
		t.Fatalf("new rule stats %+v", rs)
	}
}

func TestIPOptionsAndPadding(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	p := client(1000, TCPSyn)
	p.ipOptions, p.payload, p.tailPad = true, []byte("xyz"), 7
	frame := p.build(t)
	r, out := h.process(frame, 0)
	if r.Len != len(frame) {
		t.Fatalf("Len %d, want %d (padding kept)", r.Len, len(frame))
	}
	expectForward(t, r, out[:len(out)-7], 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	d := decode(t, out[:len(out)-7])
	if d.ip.IHL != 6 || len(d.ip.Options) == 0 {
		t.Fatalf("IHL %d", d.ip.IHL)
	}
}

// The ports are untagged: a tagged frame, whatever it carries, is counted and dropped, so a tag
// is never carried onto another port (another segment, another VLAN).
func TestVLANTaggedDropped(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	syn := client(1000, TCPSyn)
	syn.vlan = 42
	if r, _ := h.process(syn.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("tagged SYN: %+v, want drop", r)
	}
	connect(t, h, 1001)
	ack := client(1001, TCPAck)
	ack.vlan = 7
	if r, _ := h.process(ack.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("tagged segment of a connection: %+v, want drop", r)
	}
	reply := fromServer(0, 1001, TCPAck)
	reply.vlan = 7
	if r, _ := h.process(reply.build(t), 1); r.Action != ActionDrop {
		t.Fatalf("tagged reply: %+v, want drop", r)
	}
	if r, _ := h.process(arpRequestTagged(t, 9), 0); r.Action != ActionDrop {
		t.Fatalf("tagged ARP: %+v, want drop", r)
	}
	if h.e.conns.count() != 1 {
		t.Fatalf("%d entries, want only the untagged connection", h.e.conns.count())
	}
	h.burst()
	st := h.stats()
	if st.Global.VLANDropped != 4 || st.Ports[0].VLANDropped != 3 || st.Ports[1].VLANDropped != 1 {
		t.Fatalf("VLANDropped global %d, ports %+v; want 4, 3 and 1", st.Global.VLANDropped, st.Ports)
	}
}

// arpRequestTagged is an ARP request for the VIP carrying 802.1Q tag vid.
func arpRequestTagged(t *testing.T, vid uint16) []byte {
	t.Helper()
	f := arpRequest(t, gwMAC, gwAddr, vip)
	tagged := make([]byte, 0, len(f)+VLANTagSize)
	tagged = append(tagged, f[:12]...)
	tagged = append(tagged, 0x81, 0x00, byte(vid>>8), byte(vid))
	return append(tagged, f[12:]...)
}

func TestFragmentToVIPDropped(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	p := client(1000, TCPSyn)
	p.fragment = true
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("fragment to VIP: %+v", r)
	}
	p.dst = netip.MustParseAddr("192.0.2.99")
	if r, _ := h.process(p.build(t), 0); r.Action != ActionPass {
		t.Fatalf("fragment elsewhere: %+v", r)
	}
	h.burst()
	if g := h.stats().Global; g.FragIn != 1 || g.FragDropped != 1 {
		t.Fatalf("FragIn %d FragDropped %d", g.FragIn, g.FragDropped)
	}
}

func TestForeignUnicastDropped(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	p := client(1000, TCPSyn)
	p.dstMAC = otherHostMAC
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("frame for another MAC: %+v", r)
	}
	if h.e.conns.count() != 0 {
		t.Fatal("balanced a frame for another MAC")
	}
}

func TestNATDump(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000)
	ch, ok := h.e.RequestNATDump(0)
	if !ok {
		t.Fatal("request refused")
	}
	if _, ok := h.e.RequestNATDump(0); ok {
		t.Fatal("second concurrent request accepted")
	}
	h.burst()
	got := <-ch
	want := NATEntry{Proto: ProtoTCP, Client: netip.AddrPortFrom(clientAddr, 1000), VIP: netip.AddrPortFrom(vip, 80),
		NATSrc: netip.AddrPortFrom(clientAddr, 1000), Server: netip.AddrPortFrom(serverAddr[0], 8080), RuleID: ruleWeb,
		Created: h.now, LastUsed: h.now}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("dump %+v, want %+v", got, want)
	}
	if _, ok := h.e.RequestNATDump(0); !ok {
		t.Fatal("request refused after the previous one was served")
	}
}
