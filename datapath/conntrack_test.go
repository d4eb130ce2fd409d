package datapath

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The per-packet part of an entry is one cache line; growing it costs a miss per packet. The
// metadata packs without padding, and times recorded in ms ticks read back across a wrap.
func TestConnEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n != cacheLine {
		t.Fatalf("conn is %d bytes, want %d", n, cacheLine)
	}
	if n := unsafe.Sizeof(connMeta{}); n != 16 {
		t.Fatalf("connMeta is %d bytes, want 16", n)
	}
	for _, now := range []int64{0, 1e6, 3600e9, (1<<32)*1e6 + 5e6, (1<<33)*1e6 - 1} {
		for _, ago := range []int64{0, 1, 1000, 1 << 30} {
			then := (now/1e6 - ago) * 1e6
			if then < 0 {
				continue
			}
			if got := msBefore(now, msOf(then)); got != then {
				t.Fatalf("now %d: a tick %d ms ago reads back as %d, want %d", now, ago, got, then)
			}
		}
	}
}

// flow is the addressing of a test connection: what an entry names by number, spelt out.
type flow struct {
	orig, xlat tuple
	proto      uint8
}

// named returns the entry of f for insert, giving its VIP, server and (full NAT) source
// address numbers in t.names as the engine's slots and arenas would.
func (t *connTable) named(f flow) *conn {
	c := &conn{client: f.orig.src, cport: f.orig.sport, vport: f.orig.dport, sport: f.xlat.dport, nport: f.xlat.sport,
		proto: f.proto, sticky: -1}
	number := func(list *[]addr, a addr) int32 {
		for i, v := range *list {
			if v == a {
				return int32(i)
			}
		}
		*list = append(*list, a)
		return int32(len(*list) - 1)
	}
	c.rule = number(&t.names.vip, f.orig.dst)
	for len(t.names.timeoutMs) < len(t.names.vip) {
		t.names.timeoutMs = append(t.names.timeoutMs, 60000)
	}
	c.server = number(&t.names.server, f.xlat.dst)
	if f.xlat.src != f.orig.src {
		c.arena, c.flags = uint16(number(&t.names.proxy, f.xlat.src)+1), connFullNAT
	}
	return c
}

// The index must find every live entry by both keys and none of the removed ones, through any
// sequence of inserts and removals. 16 entries get 4 buckets (40 slots for up to 32 keys): the
// design's maximum load, so buckets fill and keys are displaced.
func TestConnTableAgainstModel(t *testing.T) {
	for _, seed := range [][3]uint64{{1, 2, 3}, {0, 0, 0}} {
		tab := newConnTable(16, seed)
		if len(tab.index.buckets) != 4 {
			t.Fatalf("%d buckets for 16 entries, want 4", len(tab.index.buckets))
		}
		rng := rand.New(rand.NewPCG(seed[0], 9))
		live := map[int32]flow{}
		mk := func(n int) flow {
			return flow{
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
				ci, st := tab.insert(tab.named(c), h, 0)
				if st != insertOK {
					t.Fatalf("insert: %v", st)
				}
				live[ci] = c
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
			checkConnIndex(t, &tab)
		}
		if tab.index.moves == 0 {
			t.Errorf("seed %v: no key was ever displaced: the test does not load the index", seed)
		}
	}
}

// checkConnIndex verifies the index against the entries: every used slot holds a key of a live
// entry, in one of that key's two buckets and under its tag; every live entry has both keys
// there exactly once; and the index's key count is right.
func checkConnIndex(tb testing.TB, t *connTable) {
	tb.Helper()
	seen := make(map[uint32]int)
	spill := make(map[uint32]int) // home bucket → its keys in their alternate
	used := 0
	for b := range t.index.buckets {
		bk := &t.index.buckets[b]
		for s, tag := range bk.tags {
			if tag == 0 {
				continue
			}
			used++
			r := connRef(bk.refs[s])
			ci := r.entry()
			if ci < 0 || int(ci) >= len(t.entries) || t.entries[ci].flags&connInUse == 0 {
				tb.Fatalf("bucket %d slot %d: ref %#x to a free entry", b, s, r)
			}
			c := &t.entries[ci]
			o, x := t.orig(c), t.xlat(c)
			h := t.hash(o.src, o.dst, o.sport, o.dport, c.proto)
			if r.dir() == dirS2C {
				h = t.hash(x.dst, x.src, x.dport, x.sport, c.proto)
			}
			home, want := t.index.home(h)
			inAlt := uint32(b) != home
			if tag&tagBits != want || (inAlt && uint32(b) != t.index.alt(home, want)) || inAlt != (tag&tagInAlt != 0) {
				tb.Fatalf("bucket %d slot %d: key of entry %d dir %d (home %d, tag %#x) with tag %#x",
					b, s, ci, r.dir(), home, want, tag)
			}
			if inAlt {
				spill[home]++
			}
			seen[uint32(r)]++
		}
	}
	for b := range t.index.buckets {
		if got := t.index.buckets[b].spill; int(got) != spill[uint32(b)] {
			tb.Fatalf("bucket %d counts %d keys in their alternate, has %d", b, got, spill[uint32(b)])
		}
	}
	if used != 2*t.count() || t.index.keys != used || len(seen) != used {
		tb.Fatalf("%d slots used (%d distinct, index counts %d) for %d entries", used, len(seen), t.index.keys, t.count())
	}
}

// flowConn returns flow n of the high-load tests: IPv4 and IPv6 alternately, a handful of
// clients with many ports each (keys that differ in a few bits), half of them full NAT.
func flowConn(n int) flow {
	c := flow{proto: ProtoTCP}
	if n%2 == 0 {
		c.orig = tuple{src: addrFrom4(0xcb007100 + uint32(n%5)), dst: addrFrom4(0xc000020a), sport: uint16(n >> 3), dport: 80}
	} else {
		c.orig = tuple{src: addr{0x20010db800000000, uint64(n % 5)}, dst: addr{0x20010db800010000, 0x80}, sport: uint16(n >> 3), dport: 80}
	}
	c.xlat = c.orig
	c.xlat.dst, c.xlat.dport = c.orig.dst, 8080
	c.xlat.dst.lo ^= uint64(1 + n%3)
	if n%4 < 2 { // full NAT: a proxy address and port
		c.xlat.src.lo ^= 0x100
		c.xlat.sport = uint16(4096 + n/4)
	}
	return c
}

// The index at its maximum load: a table filled to capacity, half removed, refilled, drained in
// insertion order and refilled, and churned at full load, with every live key found by both
// directions, every removed one not found, and the counts right throughout.
func TestConnIndexHighLoad(t *testing.T) {
	const n = 1 << 12
	tab := newConnTable(n, [3]uint64{7, 8, 9})
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[int32]int{} // entry → flow
	var order []int32       // live entries, in insertion order
	next := 0
	insert := func() {
		c := flowConn(next)
		h := tab.hash(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto)
		ci, st := tab.insert(tab.named(c), h, 0)
		if st != insertOK {
			t.Fatalf("insert of flow %d with %d free: status %d", next, tab.nfree, st)
		}
		live[ci] = next
		order = append(order, ci)
		next++
	}
	found := func(k int) (int32, int32) {
		c := flowConn(k)
		o, x := c.orig, c.xlat
		a, da := tab.lookup(o.src, o.dst, o.sport, o.dport, c.proto, tab.hash(o.src, o.dst, o.sport, o.dport, c.proto))
		b, db := tab.lookup(x.dst, x.src, x.dport, x.sport, c.proto, tab.hash(x.dst, x.src, x.dport, x.sport, c.proto))
		if (a >= 0 && da != dirC2S) || (b >= 0 && db != dirS2C) {
			t.Fatalf("flow %d: directions %d, %d", k, da, db)
		}
		return a, b
	}
	removed := map[int]bool{}
	remove := func(ci int32) {
		removed[live[ci]] = true
		tab.remove(ci)
		delete(live, ci)
	}
	verify := func(phase string) {
		t.Helper()
		if tab.count() != len(live) || tab.nfree != n-len(live) {
			t.Fatalf("%s: count %d, nfree %d, model %d", phase, tab.count(), tab.nfree, len(live))
		}
		for ci, k := range live {
			if a, b := found(k); a != ci || b != ci {
				t.Fatalf("%s: flow %d of entry %d found at %d, %d", phase, k, ci, a, b)
			}
		}
		for k := range removed {
			if a, b := found(k); a >= 0 || b >= 0 {
				t.Fatalf("%s: removed flow %d found at %d, %d", phase, k, a, b)
			}
		}
		checkConnIndex(t, &tab)
	}
	compact := func() { // order without the removed entries
		o := order[:0]
		for _, ci := range order {
			if _, ok := live[ci]; ok {
				o = append(o, ci)
			}
		}
		order = o
	}

	for tab.nfree > 0 {
		insert()
	}
	verify("full")
	c := flowConn(next)
	if _, st := tab.insert(tab.named(c), tab.hash(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto), 0); st != insertFull {
		t.Fatalf("insert into a full table: status %d", st)
	}
	for _, i := range rng.Perm(len(order))[:n/2] {
		remove(order[i])
	}
	compact()
	verify("half removed")
	for tab.nfree > 0 {
		insert()
	}
	verify("refilled")
	for _, ci := range order[:3*n/4] { // oldest first
		remove(ci)
	}
	compact()
	verify("drained in order")
	for tab.nfree > 0 {
		insert()
	}
	for k := len(order) - 1; k >= n/4; k-- { // newest first
		remove(order[k])
	}
	compact()
	verify("drained newest first")
	for tab.nfree > 0 {
		insert()
	}
	verify("refilled again")
	for op := 0; op < 8*n; op++ { // churn at full load
		remove(order[rng.IntN(len(order))])
		compact()
		insert()
		if op%1024 == 0 {
			verify("churn")
		}
	}
	verify("churned")
	if tab.index.moves == 0 {
		t.Error("no key was ever displaced at load 0.8")
	}
	t.Logf("%d keys in %d slots (load %.2f), %d displacement moves over %d inserts",
		tab.index.keys, len(tab.index.buckets)*bucketSlots, float64(tab.index.keys)/float64(len(tab.index.buckets)*bucketSlots), tab.index.moves, next)
}

// An index that cannot place a key says so and stays intact, and an insert into it fails with
// insertNoRoom, taking no entry; room made by a removal is used again.
func TestConnIndexNoRoom(t *testing.T) {
	for _, nb := range []int{1, 2} {
		x := newBucketIndex(nb * indexKeysPerBucket)
		if len(x.buckets) != nb {
			t.Fatalf("%d buckets, want %d", len(x.buckets), nb)
		}
		k := 0
		for ; x.place(uint64(k)*0x9e3779b97f4a7c15, uint32(k)); k++ {
			if k > nb*bucketSlots {
				t.Fatalf("%d keys placed in %d slots", k+1, nb*bucketSlots)
			}
		}
		if k != nb*bucketSlots || x.keys != k {
			t.Fatalf("%d buckets: placement failed after %d keys (%d counted), want %d", nb, k, x.keys, nb*bucketSlots)
		}
		for j := 0; j < k; j++ { // every key still there, once
			h := uint64(j) * 0x9e3779b97f4a7c15
			b, tag := x.home(h)
			n := 0
			for _, bb := range []uint32{b, x.alt(b, tag)}[:1+min(nb-1, 1)] {
				for s, tg := range x.buckets[bb].tags {
					if tg&tagBits == tag && x.buckets[bb].refs[s] == uint32(j) {
						n++
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d buckets: key %d found %d times", nb, j, n)
			}
		}
	}

	tab := newConnTable(16, [3]uint64{1, 2, 3})
	tab.index = newBucketIndex(indexKeysPerBucket) // one bucket: room for 5 entries' keys
	var cis []int32
	for k := 0; ; k++ {
		c := flowConn(k)
		ci, st := tab.insert(tab.named(c), tab.hash(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto), 0)
		if st == insertNoRoom {
			if k != bucketSlots/2 || tab.count() != k || tab.nfree != 16-k || tab.index.keys != 2*k {
				t.Fatalf("no room after %d inserts: count %d, nfree %d, %d keys", k, tab.count(), tab.nfree, tab.index.keys)
			}
			break
		}
		if st != insertOK {
			t.Fatalf("insert %d: status %d", k, st)
		}
		cis = append(cis, ci)
	}
	checkConnIndex(t, &tab)
	tab.remove(cis[2])
	c := flowConn(100)
	if _, st := tab.insert(tab.named(c), tab.hash(c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, c.proto), 0); st != insertOK {
		t.Fatalf("insert after a removal: status %d", st)
	}
	checkConnIndex(t, &tab)
}

// The bucket array starts on a cache line, so a bucket is one line.
func TestBucketIndexAligned(t *testing.T) {
	if n := unsafe.Sizeof(indexBucket{}); n != cacheLine {
		t.Fatalf("bucket is %d bytes, want %d", n, cacheLine)
	}
	for _, keys := range []int{1, 8, 100, 1 << 16} {
		x := newBucketIndex(keys)
		if p := uintptr(unsafe.Pointer(&x.buckets[0])); p%cacheLine != 0 {
			t.Fatalf("%d keys: buckets at %#x", keys, p)
		}
	}
}

// lookupBenchConn returns flow k of the lookup benchmarks: a distinct client endpoint per k,
// eight servers.
func lookupBenchConn(k uint32) flow {
	c := flow{
		orig:  tuple{src: addrFrom4(0x0a000000 | k>>4), dst: addrFrom4(0xc000020a), sport: uint16(1024 + k&15), dport: 80},
		proto: ProtoTCP,
	}
	c.xlat = c.orig
	c.xlat.dst, c.xlat.dport = addrFrom4(0xc6336400+k&7), 8080
	return c
}

var lookupBenchTables = map[int]*connTable{}

// lookupTable returns a full table of n (a power of two) entries, built once: entry k holds
// flow k.
func lookupTable(b *testing.B, n int) *connTable {
	if t := lookupBenchTables[n]; t != nil {
		return t
	}
	t := newConnTable(n, [3]uint64{0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0})
	for k := uint32(0); k < uint32(n); k++ {
		c := lookupBenchConn(k)
		o := &c.orig
		if i, st := t.insert(t.named(c), t.hash(o.src, o.dst, o.sport, o.dport, c.proto), 0); st != insertOK || i != int32(k) {
			b.Fatalf("insert %d: entry %d, status %d", k, i, st)
		}
	}
	lookupBenchTables[n] = &t
	return &t
}

// BenchmarkConnLookup1M looks random flows up in a full table of 1 M entries (hash included), by
// their client→server key, their server→client key, and keys that are not there: the cache
// misses of the index and the entry dominate.
func BenchmarkConnLookup1M(b *testing.B) { benchLookup(b, 1<<20) }

// BenchmarkConnLookup1K does the same in a table of 1 K entries, which the caches hold: the cost
// of the search itself.
func BenchmarkConnLookup1K(b *testing.B) { benchLookup(b, 1<<10) }

func benchLookup(b *testing.B, n int) {
	t := lookupTable(b, n)
	for _, kind := range []string{"c2s", "s2c", "miss"} {
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			x := uint64(0x9e3779b97f4a7c15)
			for b.Loop() {
				x ^= x << 13 // xorshift64: random flows, so neither cache nor prefetcher helps
				x ^= x >> 7
				x ^= x << 17
				k := uint32(x) & uint32(n-1)
				c := lookupBenchConn(k)
				src, dst, sport, dport, want, wantDir := c.orig.src, c.orig.dst, c.orig.sport, c.orig.dport, int32(k), dirC2S
				switch kind {
				case "s2c":
					src, dst, sport, dport, wantDir = c.xlat.dst, c.xlat.src, c.xlat.dport, c.xlat.sport, dirS2C
				case "miss":
					dport, want = 81, -1
				}
				if ci, dir := t.lookup(src, dst, sport, dport, ProtoTCP, t.hash(src, dst, sport, dport, ProtoTCP)); ci != want || (ci >= 0 && dir != wantDir) {
					b.Fatalf("flow %d: entry %d dir %d", k, ci, dir)
				}
			}
			b.ReportMetric(float64(t.bytes())/float64(len(t.entries)), "B/conn")
		})
	}
}

// A bucket's tag match finds exactly the slots holding the tag, wherever they are and whether or
// not the key sits in its alternate, and tag 0 finds the empty slots.
func TestBucketMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 20000; n++ {
		var bk indexBucket
		for s := range bk.tags {
			switch rng.IntN(4) {
			case 0: // empty
			case 1:
				bk.tags[s] = 0x0001 | uint16(rng.IntN(2))<<15 // the same tag, at home or not
			default:
				bk.tags[s] = uint16(1 + rng.IntN(tagBits))
				if rng.IntN(2) == 0 {
					bk.tags[s] |= tagInAlt
				}
			}
		}
		for s := range bk.refs {
			bk.refs[s] = rng.Uint32() // what follows the tags in memory must never match
		}
		bk.spill = uint16(rng.Uint32())
		for _, tag := range []uint16{0, 0x0001, bk.tags[rng.IntN(bucketSlots)] & tagBits, uint16(1 + rng.IntN(tagBits))} {
			var want uint32
			for s, tg := range bk.tags {
				if tg&tagBits == tag {
					want |= 1 << s
				}
			}
			if got := bk.match(tag); got != want {
				t.Fatalf("tags %x, match(%#x) = %b, want %b", bk.tags, tag, got, want)
			}
		}
	}
}
