package datapath

import (
	"encoding/binary"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// The benchmarks drive the engine as a worker does: BeginBurst, 32 frames, EndBurst, so the
// per-burst work (counter publication, expiry sweep, neighbour scan) is amortised in the figures.
// Each iteration copies a template frame into the buffer first (the rewrite is in place); that
// copy of ~60 bytes is included.
const benchBurst = 32

func benchEngine(b *testing.B, connCap int) *harness {
	h := newHarness(b, connCap, defaultRules())
	h.learnNeighbours()
	h.e.ctr.interval = publishInterval // as in production: counters published once per ms
	return h
}

func runBench(b *testing.B, h *harness, in uint16, prepare func(buf []byte, i int)) {
	buf := make([]byte, 0, 2048)
	e := h.e
	b.ReportAllocs()
	b.ResetTimer()
	e.BeginBurst(h.now)
	for i := 0; b.Loop(); i++ {
		if i%benchBurst == 0 {
			e.EndBurst()
			e.BeginBurst(h.now)
		}
		buf = buf[:cap(buf)]
		prepare(buf, i)
		if r := e.Process(buf[:benchLen], in); r.Action != ActionForward {
			b.Fatalf("iteration %d: %+v", i, r)
		}
	}
	e.EndBurst()
}

var benchLen int

// establishFlow opens the connection of client packet p (port 0) with a whole handshake: p as a
// SYN, the server's SYN+ACK, the client's ACK. It returns the client's and the server's next
// segments (ACKs) of the now established flow. DSR keeps no state: p goes out once as a SYN.
func establishFlow(tb testing.TB, h *harness, p pkt) (c2s, s2c pkt) {
	tb.Helper()
	p.flags = TCPSyn
	r, out := h.process(p.build(tb), 0)
	if r.Action != ActionForward {
		tb.Fatalf("SYN: %+v", r)
	}
	d := decode(tb, out)
	back := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: d.dst(), dst: d.src(),
		sport: uint16(d.tcp.DstPort), dport: uint16(d.tcp.SrcPort), flags: TCPSyn | TCPAck, seq: 5000, ack: p.seq + 1}
	p.flags, p.seq, p.ack = TCPAck, p.seq+1, back.seq+1
	if h.e.conns.count() == 0 {
		return p, back // DSR
	}
	if r, _ := h.process(back.build(tb), 1); r.Action != ActionForward {
		tb.Fatalf("SYN+ACK: %+v", r)
	}
	if r, _ := h.process(p.build(tb), 0); r.Action != ActionForward {
		tb.Fatalf("ACK: %+v", r)
	}
	back.flags, back.seq = TCPAck, back.seq+1
	return p, back
}

func BenchmarkHalfNATEstablished(b *testing.B) {
	h := benchEngine(b, 1<<16)
	p, _ := establishFlow(b, h, client(1000, TCPSyn))
	tmpl := p.build(b)
	benchLen = len(tmpl)
	runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
}

func BenchmarkHalfNATReply(b *testing.B) {
	h := benchEngine(b, 1<<16)
	_, back := establishFlow(b, h, client(1000, TCPSyn))
	tmpl := back.build(b)
	benchLen = len(tmpl)
	runBench(b, h, 1, func(buf []byte, _ int) { copy(buf, tmpl) })
}

// BenchmarkHalfNATNewFlow sends a SYN from a new client port every iteration. The table holds
// 1<<17 entries; every 1<<15 flows it is emptied (timer stopped) so inserts never hit a full table
// and ports can be reused.
func BenchmarkHalfNATNewFlow(b *testing.B) {
	const period = 1 << 15
	h := benchEngine(b, 1<<17)
	tmpl := client(1000, TCPSyn).build(b)
	benchLen = len(tmpl)
	sportOff := EthernetHeaderSize + IPv4MinSize + tcpSrcPort
	runBench(b, h, 0, func(buf []byte, i int) {
		if i%period == 0 && i > 0 {
			b.StopTimer()
			h.e.resetConnsForBench()
			b.StartTimer()
		}
		copy(buf, tmpl)
		binary.BigEndian.PutUint16(buf[sportOff:], uint16(1024+i%period))
	})
}

// resetConnsForBench empties the connection and persistence tables in place, returning NAT ports.
func (e *Engine) resetConnsForBench() {
	for i := range e.conns.entries {
		if e.conns.entries[i].flags&connInUse != 0 {
			e.removeConn(int32(i))
		}
	}
	for i := range e.sticky.entries {
		if e.sticky.entries[i].inUse {
			e.sticky.remove(int32(i))
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	f := client(1000, TCPAck).build(b)
	var p Parsed
	b.ReportAllocs()
	for b.Loop() {
		if p.Decode(f) != ParseOK {
			b.Fatal("decode")
		}
	}
}

func BenchmarkARPReply(b *testing.B) {
	h := benchEngine(b, 64)
	tmpl := arpFrame(b, 1, gwMAC, [6]byte{}, gwAddr, broadcastMAC, vip)
	benchLen = len(tmpl)
	runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
}

// benchWorld returns a world harness for benchmarks: every topology, IPv4 and IPv6.
func benchWorld(b *testing.B, rs func() []rules.SnapRule) *harness {
	h := newWorld(b, rs(), func(c *Config) { c.ConnCapacity = 1 << 17 })
	h.e.ctr.interval = publishInterval
	return h
}

// benchFlow is a client flow of one topology and family.
func benchFlow(c topoCase) (p pkt, sportOff int) {
	cl, v, _, _, vport, _ := c.endpoints()
	p = pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: 1000, dport: vport, udp: c.udp, flags: TCPSyn, seq: 1000}
	sportOff = EthernetHeaderSize + IPv4MinSize
	if c.v6 {
		sportOff = EthernetHeaderSize + IPv6HeaderSize
	}
	return p, sportOff
}

func tcpCases() []topoCase {
	var cs []topoCase
	for _, c := range allTopoCases() {
		if !c.udp {
			cs = append(cs, c)
		}
	}
	return cs
}

// BenchmarkEstablished forwards packets of one established flow client→server, for every
// topology and family (DSR has no state: every packet is balanced, which is its steady state).
func BenchmarkEstablished(b *testing.B) {
	for _, c := range tcpCases() {
		b.Run(c.String(), func(b *testing.B) {
			h := benchWorld(b, roundRobinWorld)
			p, _ := benchFlow(c)
			p, _ = establishFlow(b, h, p)
			tmpl := p.build(b)
			benchLen = len(tmpl)
			runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
		})
	}
}

// BenchmarkReply forwards server→client packets of an established NAT flow.
func BenchmarkReply(b *testing.B) {
	for _, c := range tcpCases() {
		if c.topo == rules.TopoDSR {
			continue // replies bypass the load balancer
		}
		b.Run(c.String(), func(b *testing.B) {
			h := benchWorld(b, roundRobinWorld)
			p, _ := benchFlow(c)
			_, back := establishFlow(b, h, p)
			tmpl := back.build(b)
			benchLen = len(tmpl)
			runBench(b, h, 1, func(buf []byte, _ int) { copy(buf, tmpl) })
		})
	}
}

// BenchmarkNewFlow sends a SYN from a new client port every iteration; the tables are emptied
// (timer stopped) every 1<<15 flows so inserts never hit a full table and NAT ports are reused.
func BenchmarkNewFlow(b *testing.B) {
	for _, c := range tcpCases() {
		b.Run(c.String(), func(b *testing.B) { benchNewFlow(b, c, roundRobinWorld) })
	}
	// Sticky: pmask /24 over half-NAT, every flow a persistence hit after the first.
	b.Run("HalfNAT/TCP/IPv4/sticky", func(b *testing.B) {
		benchNewFlow(b, topoCase{rules.TopoHalfNAT, false, false}, func() []rules.SnapRule { return stickyRules(24, ruleWeb) })
	})
	b.Run("FullNAT/TCP/IPv6/sticky", func(b *testing.B) {
		benchNewFlow(b, topoCase{rules.TopoNAT, true, false}, func() []rules.SnapRule { return stickyRules(64, ruleNAT6) })
	})
	b.Run("HalfNAT/TCP/IPv4/hash-ip-port", func(b *testing.B) {
		benchNewFlow(b, topoCase{rules.TopoHalfNAT, false, false}, func() []rules.SnapRule { return hashRules(rules.AlgoHashIPPort) })
	})
}

func benchNewFlow(b *testing.B, c topoCase, rs func() []rules.SnapRule) {
	const period = 1 << 15
	h := benchWorld(b, rs)
	p, sportOff := benchFlow(c)
	p.flags = TCPSyn
	tmpl := p.build(b)
	benchLen = len(tmpl)
	runBench(b, h, 0, func(buf []byte, i int) {
		if i%period == 0 && i > 0 {
			b.StopTimer()
			h.e.resetConnsForBench()
			b.StartTimer()
		}
		copy(buf, tmpl)
		binary.BigEndian.PutUint16(buf[sportOff:], uint16(1024+i%period))
	})
}

// BenchmarkICMPEcho answers echo requests to a VIP.
func BenchmarkICMPEcho(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		m := icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: ICMPv4EchoRequest, body: make([]byte, 56)}
		name := "IPv4"
		if v6 {
			m.src, m.dst, m.typ, name = clientAddr6, vip6, ICMPv6EchoRequest, "IPv6"
		}
		b.Run(name, func(b *testing.B) {
			h := benchWorld(b, worldRules)
			tmpl := m.build(b)
			benchLen = len(tmpl)
			runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
		})
	}
}

// BenchmarkNDPSolicit answers neighbor solicitations for a VIP.
func BenchmarkNDPSolicit(b *testing.B) {
	h := benchWorld(b, worldRules)
	tmpl := nsFrame(b, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255)
	benchLen = len(tmpl)
	runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
}
