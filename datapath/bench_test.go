package datapath

import (
	"encoding/binary"
	"testing"
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

func BenchmarkHalfNATEstablished(b *testing.B) {
	h := benchEngine(b, 1<<16)
	h.process(client(1000, TCPSyn).build(b), 0)
	tmpl := client(1000, TCPAck).build(b)
	benchLen = len(tmpl)
	runBench(b, h, 0, func(buf []byte, _ int) { copy(buf, tmpl) })
}

func BenchmarkHalfNATReply(b *testing.B) {
	h := benchEngine(b, 1<<16)
	h.process(client(1000, TCPSyn).build(b), 0)
	tmpl := fromServer(0, 1000, TCPAck).build(b)
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

// resetConnsForBench empties the connection table in place.
func (e *Engine) resetConnsForBench() {
	t := &e.conns
	clear(t.entries)
	clear(t.index)
	for i := range t.free {
		t.free[i] = uint32(len(t.free) - 1 - i)
	}
	t.nfree = len(t.free)
	for i := range e.slots {
		e.slots[i].refs = 0
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
