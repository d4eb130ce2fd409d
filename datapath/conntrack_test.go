package datapath

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The per-packet part of an entry is exactly two cache lines; growing it costs a miss per packet.
func TestConnEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n != 128 {
		t.Fatalf("conn is %d bytes, want 128", n)
	}
}

// The index must find every live entry by both keys and none of the removed ones, through any
// sequence of inserts and backward-shift deletions, including heavy collisions.
func TestConnTableAgainstModel(t *testing.T) {
	for _, seed := range [][3]uint64{{1, 2, 3}, {0, 0, 0}} {
		tab := newConnTable(256, seed)
		tab.index.mask = 63 // a small index forces long probe runs and wrap-around
		tab.index.slots = tab.index.slots[:64]
		tab.entries = tab.entries[:24]
		tab.meta = tab.meta[:24]
		tab.free = tab.free[:0]
		for i := 23; i >= 0; i-- {
			tab.free = append(tab.free, uint32(i))
		}
		tab.nfree = 24
		rng := rand.New(rand.NewPCG(seed[0], 9))
		live := map[int32]conn{}
		mk := func(n int) conn {
			return conn{
				orig:  tuple{src: addrFrom4(0xcb007100 + uint32(n%7)), dst: addrFrom4(0xc000020a), sport: uint16(n), dport: 80},
				xlat:  tuple{src: addrFrom4(0xcb007100 + uint32(n%7)), dst: addrFrom4(0xc6336400 + uint32(n%3)), sport: uint16(n), dport: 8080},
				proto: ProtoTCP,
			}
		}
		for op := 0; op < 20000; op++ {
			if rng.IntN(2) == 0 && tab.nfree > 0 {
				n := rng.IntN(5000)
				c := mk(n)
				h := tab.hash(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto)
				if ci, _ := tab.lookup(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto, h); ci >= 0 {
					continue // already present
				}
				ci, st := tab.insert(&c, h, 0, 0)
				if st != insertOK {
					t.Fatalf("insert: %v", st)
				}
				live[ci] = tab.entries[ci]
			} else if len(live) > 0 {
				for ci := range live {
					tab.remove(ci)
					delete(live, ci)
					break
				}
			}
			if tab.count() != len(live) {
				t.Fatalf("count %d, model %d", tab.count(), len(live))
			}
			for ci, c := range live {
				o, x := c.orig, c.xlat
				if got, dir := tab.lookup(o.src, o.dst, o.sport, o.dport, c.proto, tab.hash(o.src, o.dst, o.sport, o.dport, c.proto)); got != ci || dir != dirC2S {
					t.Fatalf("op %d: c2s lookup of %d gave %d/%d", op, ci, got, dir)
				}
				if got, dir := tab.lookup(x.dst, x.src, x.dport, x.sport, c.proto, tab.hash(x.dst, x.src, x.dport, x.sport, c.proto)); got != ci || dir != dirS2C {
					t.Fatalf("op %d: s2c lookup of %d gave %d/%d", op, ci, got, dir)
				}
			}
			used := 0
			for _, s := range tab.index.slots {
				if s.ref != 0 {
					used++
				}
			}
			if used != 2*len(live) {
				t.Fatalf("op %d: %d index slots used for %d entries", op, used, len(live))
			}
		}
	}
}
