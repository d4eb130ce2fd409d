package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// lookupClient returns the entry of the client's flow from port sport to the VIP, or -1.
func lookupClient(h *harness, sport uint16) int32 {
	src, dst := addrFromNetip(clientAddr), addrFromNetip(vip)
	ci, _ := h.e.conns.lookup(src, dst, sport, 80, ProtoTCP, h.e.conns.hash(src, dst, sport, 80, ProtoTCP))
	return ci
}

// Only a SYN opens a TCP connection: any other segment without an entry is counted and dropped
// and leaves no state, whatever its flags.
func TestNonSYNCreatesNothing(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	for i, flags := range []uint8{TCPAck, TCPFin | TCPAck, 0, TCPPsh | TCPAck, TCPRst, TCPSyn | TCPAck, TCPSyn | TCPFin, TCPSyn | TCPRst} {
		if r, _ := h.process(client(uint16(1000+i), flags).build(t), 0); r.Action != ActionDrop {
			t.Fatalf("flags %#x without a connection: %+v, want drop", flags, r)
		}
	}
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("%d entries from segments that are not SYNs", n)
	}
	h.burst()
	if g := h.stats().Global; g.TCPNoConn != 8 {
		t.Fatalf("TCPNoConn %d, want 8", g.TCPNoConn)
	}
	if rs := h.rule(ruleWeb); rs.PktDropped != 8 {
		t.Fatalf("rule PktDropped %d, want 8", rs.PktDropped)
	}
	// Round robin did not move: the first SYN goes to the first server.
	if i := connectSYN(t, h, 2000); i != 0 {
		t.Fatalf("first SYN went to server %d", i)
	}
	// A UDP datagram still opens a flow (UDP has no handshake).
	u := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 3000, dport: 53, udp: true}
	if r, _ := h.process(u.build(t), 0); r.Action != ActionForward {
		t.Fatalf("UDP: %+v", r)
	}
}

// An entry stays half-open until the client acknowledges the server's SYN+ACK with the right
// number: the SYN+ACK alone (which a spoofed SYN also draws) or a guessed ACK does not count.
func TestHandshakeEstablishes(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	i := connectSYN(t, h, 1000)
	ci := lookupClient(h, 1000)
	c := &h.e.conns.entries[ci]
	if to := h.e.conns.timeoutMs(c); c.state != connHalfOpen || to != uint32(DefaultHalfOpenTimeout/time.Millisecond) {
		t.Fatalf("after SYN: state %d timeout %d ms", c.state, to)
	}
	synAck := fromServer(i, 1000, TCPSyn|TCPAck)
	synAck.seq = 777
	h.process(synAck.build(t), 1)
	if c.state != connHalfOpen {
		t.Fatal("SYN+ACK established the entry")
	}
	guess := client(1000, TCPAck)
	guess.seq, guess.ack = 1001, 12345
	if r, _ := h.process(guess.build(t), 0); r.Action != ActionForward {
		t.Fatalf("segment of a half-open entry: %+v, want forwarded", r)
	}
	if c.state != connHalfOpen {
		t.Fatal("an ACK of the wrong number established the entry")
	}
	ack := client(1000, TCPAck)
	ack.seq, ack.ack = 1001, 778
	h.process(ack.build(t), 0)
	if to := h.e.conns.timeoutMs(c); c.state != connEstablished || to != 120000 || h.e.conns.hoCount != 0 {
		t.Fatalf("after the handshake: state %d timeout %d ms, %d half-open", c.state, to, h.e.conns.hoCount)
	}
	h.burst()
	if g := h.stats().Global; g.ConnEntries != 1 || g.HalfOpenEntries != 0 {
		t.Fatalf("gauges: %d entries, %d half-open", g.ConnEntries, g.HalfOpenEntries)
	}
}

// A UDP flow is half-open until its first reply.
func TestUDPReplyEstablishes(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	u := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 3000, dport: 53, udp: true}
	r, out := h.process(u.build(t), 0)
	if r.Action != ActionForward {
		t.Fatalf("UDP: %+v", r)
	}
	if h.e.conns.hoCount != 1 {
		t.Fatal("new UDP flow not half-open")
	}
	d := decode(t, out)
	back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(), sport: uint16(d.udp.DstPort), dport: 3000, udp: true}
	if r, _ := h.process(back.build(t), 1); r.Action != ActionForward {
		t.Fatalf("reply: %+v", r)
	}
	if h.e.conns.hoCount != 0 {
		t.Fatal("replied UDP flow still half-open")
	}
}

// Eviction takes the least recently active entry that is not established, in O(1), and never an
// established one; with NoEvict a full table refuses new connections.
func TestEvictionOrder(t *testing.T) {
	h := newHarness(t, 4, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000) // established
	connect(t, h, 1001) // established
	connectSYN(t, h, 2000)
	h.advance(time.Millisecond)
	connectSYN(t, h, 2001)
	h.advance(time.Millisecond)
	// 2000 retransmits its SYN: now 2001 is the least recently active.
	h.process(client(2000, TCPSyn).build(t), 0)
	h.advance(time.Millisecond)

	connectSYN(t, h, 2002) // evicts 2001
	if lookupClient(h, 2001) >= 0 || lookupClient(h, 2000) < 0 {
		t.Fatal("eviction did not take the least recently active half-open entry")
	}
	connectSYN(t, h, 2003) // evicts 2000
	if lookupClient(h, 2000) >= 0 || lookupClient(h, 2002) < 0 {
		t.Fatal("second eviction did not take the next oldest")
	}
	for _, sp := range []uint16{1000, 1001} {
		if ci := lookupClient(h, sp); ci < 0 || h.e.conns.entries[ci].state != connEstablished {
			t.Fatalf("established entry %d was evicted", sp)
		}
	}
	h.burst()
	if g := h.stats().Global; g.HalfOpenEvicted != 2 || g.NoMemory != 0 {
		t.Fatalf("HalfOpenEvicted %d NoMemory %d, want 2 0", g.HalfOpenEvicted, g.NoMemory)
	}

	// A table of established entries only: a new SYN is refused, nothing is evicted.
	full := newHarness(t, 4, defaultRules())
	full.learnNeighbours()
	for sp := uint16(1000); sp < 1004; sp++ {
		connect(t, full, sp)
	}
	if r, _ := full.process(client(1004, TCPSyn).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("SYN into a table of established entries: %+v, want drop", r)
	}
	if full.e.conns.count() != 4 {
		t.Fatal("an established entry was evicted")
	}

	// NoEvict: half-open entries are not evicted either.
	ne := newHarness(t, 4, defaultRules())
	e, err := New(Config{Ports: testPorts(), ConnCapacity: 4, Snapshot: ne.snap, NoEvict: true})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	ne.e = e
	ne.learnNeighbours()
	for sp := uint16(1000); sp < 1004; sp++ {
		connectSYN(t, ne, sp)
	}
	if r, _ := ne.process(client(1004, TCPSyn).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("NoEvict: %+v, want drop", r)
	}
	ne.burst()
	if g := ne.stats().Global; g.NoMemory != 1 || g.HalfOpenEvicted != 0 {
		t.Fatalf("NoEvict: NoMemory %d HalfOpenEvicted %d", g.NoMemory, g.HalfOpenEvicted)
	}
}

// A SYN flood from spoofed sources, many times the table's size, leaves established flows
// alone and lets a legitimate connection in at any time; its entries go at the half-open
// timeout, and a settable timeout is honoured.
func TestSYNFloodEngine(t *testing.T) {
	h := newHarness(t, 1024, defaultRules())
	e, err := New(Config{Ports: testPorts(), ConnCapacity: 1024, Snapshot: h.snap, HalfOpenTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.learnNeighbours()
	held := connect(t, h, 1000)
	flood := pkt{srcMAC: gwMAC, dstMAC: port0MAC, dst: vip, dport: 80, flags: TCPSyn}
	frame := flood.withSrc(netip.MustParseAddr("203.0.113.1")).build(t)
	buf := make([]byte, len(frame))
	for k := 0; k < 20000; k++ {
		copy(buf, frame)
		binary.BigEndian.PutUint32(buf[EthernetHeaderSize+12:], 0xcb007100|uint32(k%200)) // 203.0.113.x
		binary.BigEndian.PutUint16(buf[EthernetHeaderSize+IPv4MinSize:], uint16(1024+k))
		fixIPv4Checksum(buf[EthernetHeaderSize:])
		if k%32 == 0 {
			h.advance(100 * time.Microsecond)
		}
		h.process(buf, 0)
		if k%1000 == 0 {
			// A legitimate client gets in during the flood, and the held flow answers.
			if i := connect(t, h, uint16(3000+k/1000)); i < 0 {
				t.Fatal("legitimate connection refused")
			}
			r, out := h.process(client(1000, TCPAck).build(t), 0)
			expectForward(t, r, out, 1, serverMAC[held], clientAddr, serverAddr[held], 1000, 8080, 63)
		}
	}
	h.burst()
	g := h.stats().Global
	if g.NoMemory != 0 || g.HalfOpenEvicted < 20000-1024 {
		t.Fatalf("NoMemory %d HalfOpenEvicted %d", g.NoMemory, g.HalfOpenEvicted)
	}
	// Two seconds after the flood its entries are gone; the established ones stay.
	h.advance(2*time.Second + time.Millisecond)
	for range 1024 / halfOpenExpireLimit { // each burst removes up to halfOpenExpireLimit
		h.burst()
	}
	if n, ho := h.e.conns.count(), h.e.conns.hoCount; ho != 0 || n != 21 {
		t.Fatalf("%d entries, %d half-open after the timeout; want the 21 established", n, ho)
	}
}

// withSrc returns p from another source address.
func (p pkt) withSrc(a netip.Addr) pkt { p.src = a; return p }

// fixIPv4Checksum recomputes an IPv4 header's checksum in place (the TCP checksum does not
// matter to the engine).
func fixIPv4Checksum(ip []byte) {
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip[:IPv4MinSize]))
}

// One TCP/UDP packet in checksumSampleEvery per port has its checksum verified; wrong ones are
// counted for their port and still forwarded.
func TestChecksumSampled(t *testing.T) {
	h := newHarness(t, 1<<12, defaultRules())
	h.learnNeighbours()
	i := connect(t, h, 1000)
	good := client(1000, TCPAck).build(t)
	bad := client(1000, TCPAck).build(t)
	bad[EthernetHeaderSize+IPv4MinSize+16] ^= 0x55 // the TCP checksum
	reply := fromServer(i, 1000, TCPAck).build(t)
	buf := make([]byte, 0, 256)
	send := func(f []byte, in uint16, n int) {
		for range n {
			buf = append(buf[:0], f...)
			if r := h.e.Process(buf, in); r.Action != ActionForward {
				t.Fatalf("%+v", r)
			}
		}
	}
	h.e.BeginBurst(h.now)
	send(bad, 0, 64*10)
	send(good, 0, 64*5)
	send(reply, 1, 64*3)
	h.e.EndBurst()
	st := h.stats()
	p0, p1 := st.Ports[0], st.Ports[1]
	// The samples fall on fixed packets: each port's first TCP/UDP packet, then every 64th.
	// Port 0 saw the handshake's SYN (sampled) and ACK, then 640 bad and 320 good segments:
	// 962 packets, 16 samples, those at packets 65..641 bad (10). Port 1 saw the SYN+ACK
	// (sampled) and 192 replies: 4 samples.
	if p0.ChecksumSampled != 16 || p1.ChecksumSampled != 4 {
		t.Fatalf("sampled %d on port 0, %d on port 1; want 16 and 4", p0.ChecksumSampled, p1.ChecksumSampled)
	}
	if p0.ChecksumBad != 10 || p1.ChecksumBad != 0 {
		t.Fatalf("bad %d on port 0, %d on port 1; want 10 and 0", p0.ChecksumBad, p1.ChecksumBad)
	}
	if st.Global.ChecksumSampled != 20 || st.Global.ChecksumBad != p0.ChecksumBad {
		t.Fatalf("global %d sampled %d bad", st.Global.ChecksumSampled, st.Global.ChecksumBad)
	}
}

// l4ChecksumValid agrees with a full computation for TCP and UDP over both families, and takes
// an IPv4 UDP checksum of 0 as "none".
func TestL4ChecksumValid(t *testing.T) {
	for _, c := range allTopoCases() {
		cl, v, _, _, vport, _ := c.endpoints()
		f := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: 1, dport: vport, udp: c.udp, flags: TCPSyn, payload: []byte("odd")}.build(t)
		var p Parsed
		if p.Decode(f) != ParseOK {
			t.Fatal("decode")
		}
		if !l4ChecksumValid(f, &p) {
			t.Fatalf("%v: a correct checksum fails", c)
		}
		off := p.L4Off + l4ChecksumOffset(p.Proto)
		f[off] ^= 1
		if l4ChecksumValid(f, &p) {
			t.Fatalf("%v: a wrong checksum passes", c)
		}
		if c.udp && !c.v6 {
			f[off], f[off+1] = 0, 0
			if !l4ChecksumValid(f, &p) {
				t.Fatal("IPv4 UDP without a checksum fails")
			}
		}
	}
}
