package datapath

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"
)

// The table dumps of show-nat and show-persist are walked a slice per EndBurst (natdump.go,
// persistdump.go). These tests fill the tables through their internal insert, which is what a
// flow's first packet ends in, so that tables larger than a slice are quick to build.

// dumpClient is the client address of the k-th synthetic entry: 10 bits of port, the rest in
// the address, so keys stay distinct for any k below 2^26.
func dumpClient(k int) (netip.Addr, uint16) {
	return netip.AddrFrom4([4]byte{100, byte(k >> 18), byte(k >> 10), 0}).Next(), uint16(1024 + k&1023)
}

// addConn inserts an established half-NAT connection of rule web for synthetic client k and
// returns its slot.
func addConn(tb testing.TB, h *harness, k int) int32 {
	tb.Helper()
	e := h.e
	ca, cp := dumpClient(k)
	rs := e.slotByID[ruleWeb]
	c := conn{client: addrFromNetip(ca), cport: cp, vport: 80, sport: 8080, nport: cp, rule: rs,
		server: e.slots[rs].servers[k%3].slot, sticky: -1, proto: ProtoTCP, state: connEstablished}
	o := e.conns.orig(&c)
	i, st := e.conns.insert(&c, e.conns.hash(o.src, o.dst, o.sport, o.dport, c.proto), h.now)
	if st != insertOK {
		tb.Fatalf("insert conn %d: %v", k, st)
	}
	e.slots[e.slotByID[ruleWeb]].refs++ // as newFlow does, so removeConn's accounting holds
	return i
}

// mappingClient is the masked client address of the k-th synthetic persistence mapping.
func mappingClient(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
}

// addMapping inserts a persistence mapping of rule web for synthetic client k and returns its slot.
func addMapping(tb testing.TB, h *harness, k int) int32 {
	tb.Helper()
	t := &h.e.sticky
	key := addrFromNetip(mappingClient(k))
	slot := h.e.slotByID[ruleWeb]
	i := t.insert(ruleWeb, key, t.hash(ruleWeb, key), h.e.slots[slot].servers[k%3].slot, 60000, h.now)
	if i < 0 {
		tb.Fatalf("persistence table full at %d", k)
	}
	return i
}

// dumpHarness returns a harness with connection and persistence tables of n slots each.
func dumpHarness(tb testing.TB, n int) *harness {
	tb.Helper()
	h := newHarness(tb, n, defaultRules())
	h.learnNeighbours()
	return h
}

type natKey struct {
	client, vip netip.AddrPort
}

// runNATDump drives bursts until the dump answers, checking the per-burst bound, and returns the
// entries and the number of bursts.
func runNATDump(t *testing.T, h *harness, ch <-chan []NATEntry, between func(burst int)) ([]NATEntry, int) {
	t.Helper()
	for b := 1; b <= 1000; b++ {
		h.burst()
		if v, c := h.e.dump.visited, h.e.dump.copied; v > natDumpScan || c > natDumpSlice {
			t.Fatalf("burst %d visited %d slots and copied %d entries, bounds %d and %d", b, v, c, natDumpScan, natDumpSlice)
		}
		select {
		case got := <-ch:
			return got, b
		default:
		}
		if between != nil {
			between(b)
		}
	}
	t.Fatal("dump never answered")
	return nil, 0
}

// A dump of a table several slices large lists every live entry exactly once, visiting and
// copying no more than a slice's worth per burst, and no sooner than the bounds allow.
func TestNATDumpSlicedListsEveryEntryOnce(t *testing.T) {
	const slots = 4 * natDumpScan
	h := dumpHarness(t, slots)
	var idx []int32
	for k := range slots - 100 {
		idx = append(idx, addConn(t, h, k))
	}
	want := map[natKey]bool{}
	for n, i := range idx {
		if n%7 == 3 { // holes all over the table
			h.e.removeConn(i)
			continue
		}
		c := &h.e.conns.entries[i]
		want[natKey{netip.AddrPortFrom(c.client.netip(), c.cport), netip.AddrPortFrom(vip, 80)}] = true
	}
	ch, ok := h.e.RequestNATDump(0)
	if !ok {
		t.Fatal("request refused")
	}
	got, bursts := runNATDump(t, h, ch, nil)
	if least := max(slots/natDumpScan, (len(want)+natDumpSlice-1)/natDumpSlice); bursts < least || bursts > least+slots/natDumpScan {
		t.Errorf("answered after %d bursts; the bounds need %d", bursts, least)
	}
	seen := map[natKey]bool{}
	for _, ne := range got {
		k := natKey{ne.Client, ne.VIP}
		if seen[k] {
			t.Fatalf("%v listed twice", k)
		}
		seen[k] = true
		if !want[k] {
			t.Fatalf("%v listed, not in the table", k)
		}
		if ne.RuleID != ruleWeb || ne.Proto != ProtoTCP || ne.Server.Port() != 8080 {
			t.Fatalf("entry %+v", ne)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d entries, the table holds %d", len(seen), len(want))
	}
}

// max is honoured: the dump answers as soon as it holds max entries, at the first slice here.
func TestNATDumpMax(t *testing.T) {
	h := dumpHarness(t, 4*natDumpScan)
	for k := range 3 * natDumpScan {
		addConn(t, h, k)
	}
	ch, _ := h.e.RequestNATDump(100)
	got, bursts := runNATDump(t, h, ch, nil)
	if len(got) != 100 || bursts != 1 {
		t.Fatalf("%d entries after %d bursts, want 100 after 1", len(got), bursts)
	}
	if cap(got) != 100 {
		t.Fatalf("buffer of %d for max 100: sized from max, not the table", cap(got))
	}
	if h.e.dump.visited != 100 {
		t.Fatalf("the full slice visited %d slots, want to stop at the 100th entry", h.e.dump.visited)
	}
}

// One lister at a time: a second request while a walk is under way is refused, also between
// slices; once answered (or cancelled) a new one is accepted.
func TestNATDumpInProgress(t *testing.T) {
	h := dumpHarness(t, 2*natDumpSlice)
	for k := range 2 * natDumpSlice {
		addConn(t, h, k)
	}
	ch, ok := h.e.RequestNATDump(0)
	if !ok {
		t.Fatal("first request refused")
	}
	h.burst() // first slice: the walk is half way
	if _, ok := h.e.RequestNATDump(0); ok {
		t.Fatal("request accepted while a walk was under way")
	}
	got, _ := runNATDump(t, h, ch, nil)
	if len(got) != 2*natDumpSlice {
		t.Fatalf("%d entries, want %d", len(got), 2*natDumpSlice)
	}
	ch, ok = h.e.RequestNATDump(0)
	if !ok {
		t.Fatal("request refused after the previous one was answered")
	}
	h.burst()
	h.e.CancelNATDump(ch)
	if _, ok := h.e.RequestNATDump(0); ok {
		t.Fatal("cancel takes effect at the next burst, not at once")
	}
	h.burst()
	select {
	case <-ch:
		t.Fatal("a cancelled dump answered")
	default:
	}
	if _, ok := h.e.RequestNATDump(0); !ok {
		t.Fatal("request refused after the previous one was cancelled")
	}
}

// Connections that end and start during the walk do not crash it and are never listed twice:
// here a connection the walk has listed ends and is reopened by the same client, and the free
// list puts it in a slot the walk has not reached yet.
func TestNATDumpRemovedMidWalk(t *testing.T) {
	const slots = 4 * natDumpSlice
	h := dumpHarness(t, slots)
	idx := make([]int32, slots)
	for k := range slots {
		idx[k] = addConn(t, h, k)
	}
	ch, _ := h.e.RequestNATDump(0)
	reopened := -1
	got, _ := runNATDump(t, h, ch, func(b int) {
		h.advance(time.Millisecond)
		if b != 1 {
			return
		}
		// The first slice listed slots [0, natDumpSlice). End one listed and one unlisted
		// connection, then reopen the listed one: the LIFO free list puts it in the unlisted slot.
		listed, unlisted := 5, slots-5
		h.e.removeConn(idx[listed])
		h.e.removeConn(idx[unlisted])
		if i := addConn(t, h, listed); i != idx[unlisted] {
			t.Fatalf("reopened connection in slot %d, want %d", i, idx[unlisted])
		}
		reopened = listed
	})
	seen := map[natKey]int{}
	for _, ne := range got {
		seen[natKey{ne.Client, ne.VIP}]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%v listed %d times", k, n)
		}
	}
	ca, cp := dumpClient(reopened)
	if seen[natKey{netip.AddrPortFrom(ca, cp), netip.AddrPortFrom(vip, 80)}] != 1 {
		t.Fatal("the connection listed before it was reopened is missing")
	}
	if len(seen) != slots-1 {
		t.Fatalf("%d entries listed, want %d: all but the one that ended unlisted", len(seen), slots-1)
	}
}

// A burst does at most one slice of one dump: with both dumps pending they take turns, and the
// worker allocates nothing while walking.
func TestDumpsShareTheBurstAndDoNotAllocate(t *testing.T) {
	const slots = 4 * natDumpSlice
	h := dumpHarness(t, slots)
	for k := range slots {
		addConn(t, h, k)
		addMapping(t, h, k)
	}
	nch, _ := h.e.RequestNATDump(0)
	pch, _ := h.e.RequestPersistDump(0)
	var nat []NATEntry
	var pers []PersistEntry
	b := 0
	burst := func() {
		b++
		h.burst()
		if v, p := h.e.dump.visited, h.e.pdump.visited; v != 0 && p != 0 {
			t.Fatalf("burst %d visited %d connection and %d persistence slots: two slices", b, v, p)
		}
		select {
		case nat = <-nch:
		case pers = <-pch:
		default:
		}
	}
	for nat == nil || pers == nil {
		if b > 100 {
			t.Fatal("dumps never answered")
		}
		if a := testing.AllocsPerRun(1, burst); a != 0 {
			t.Fatalf("bursts %d-%d allocated %v times", b-1, b, a)
		}
	}
	// Full tables: each slice copies its bound, and no burst does two.
	if want := slots/natDumpSlice + slots/persistDumpSlice; b != want {
		t.Errorf("both dumps took %d bursts, want %d: one slice per burst", b, want)
	}
	if len(nat) != slots || len(pers) != slots {
		t.Fatalf("%d connections and %d mappings listed, want %d each", len(nat), len(pers), slots)
	}
}

type persistKey struct {
	rule   uint64
	client netip.Addr
}

func runPersistDump(t *testing.T, h *harness, ch <-chan []PersistEntry, between func(burst int)) ([]PersistEntry, int) {
	t.Helper()
	for b := 1; b <= 1000; b++ {
		h.burst()
		if v, c := h.e.pdump.visited, h.e.pdump.copied; v > persistDumpScan || c > persistDumpSlice {
			t.Fatalf("burst %d visited %d slots and copied %d mappings, bounds %d and %d", b, v, c, persistDumpScan, persistDumpSlice)
		}
		select {
		case got := <-ch:
			return got, b
		default:
		}
		if between != nil {
			between(b)
		}
	}
	t.Fatal("dump never answered")
	return nil, 0
}

// The persistence dump: every live mapping once over a table of four slices, max honoured, a
// second lister refused, and a mapping that expires after being listed and is re-created in a
// slot not yet visited listed once.
func TestPersistDumpSliced(t *testing.T) {
	const slots = 4 * persistDumpScan
	h := dumpHarness(t, slots)
	idx := make([]int32, slots)
	for k := range slots {
		idx[k] = addMapping(t, h, k)
	}
	want := map[persistKey]netip.Addr{}
	for k := range slots {
		if k%5 == 0 {
			h.e.sticky.remove(idx[k])
			continue
		}
		want[persistKey{ruleWeb, mappingClient(k)}] = serverAddr[k%3]
	}
	ch, _ := h.e.RequestPersistDump(0)
	if _, ok := h.e.RequestPersistDump(0); ok {
		t.Fatal("second lister accepted")
	}
	got, bursts := runPersistDump(t, h, ch, nil)
	if least := max(slots/persistDumpScan, (len(want)+persistDumpSlice-1)/persistDumpSlice); bursts < least || bursts > least+slots/persistDumpScan {
		t.Errorf("answered after %d bursts; the bounds need %d", bursts, least)
	}
	seen := map[persistKey]bool{}
	for _, pe := range got {
		k := persistKey{pe.RuleID, pe.Client}
		if seen[k] {
			t.Fatalf("%v listed twice", k)
		}
		seen[k] = true
		if s, ok := want[k]; !ok || pe.Server != s || pe.Rule != "web" {
			t.Fatalf("listed %+v; the table maps %v to %v", pe, k, s)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d mappings, the table holds %d", len(seen), len(want))
	}

	ch, _ = h.e.RequestPersistDump(10)
	if got, bursts := runPersistDump(t, h, ch, nil); len(got) != 10 || bursts != 1 {
		t.Fatalf("max 10: %d mappings after %d bursts", len(got), bursts)
	}

	// Re-creation mid-walk: after the first slice, drop a listed mapping and an unlisted one,
	// then re-create the listed one: it lands in the unlisted slot.
	for k := 0; k < slots; k += 5 {
		idx[k] = addMapping(t, h, k)
	}
	ch, _ = h.e.RequestPersistDump(0)
	got, _ = runPersistDump(t, h, ch, func(b int) {
		if b != 1 {
			return
		}
		listed, unlisted := 1, slots-2 // not multiples of 5: in their first slots still
		if idx[listed] >= persistDumpSlice || idx[unlisted] < persistDumpScan {
			t.Fatalf("mappings in slots %d and %d: not listed and unlisted", idx[listed], idx[unlisted])
		}
		h.e.sticky.remove(idx[listed])
		h.e.sticky.remove(idx[unlisted])
		h.advance(time.Millisecond)
		if i := addMapping(t, h, listed); i != idx[unlisted] {
			t.Fatalf("re-created mapping in slot %d, want %d", i, idx[unlisted])
		}
	})
	keys := make([]persistKey, 0, len(got))
	for _, pe := range got {
		keys = append(keys, persistKey{pe.RuleID, pe.Client})
	}
	slices.SortFunc(keys, func(a, b persistKey) int { return a.client.Compare(b.client) })
	if len(slices.Compact(keys)) != len(got) {
		t.Fatal("a mapping listed twice")
	}
	if len(got) != slots-1 {
		t.Fatalf("%d mappings listed, want %d: all but the one dropped unlisted", len(got), slots-1)
	}
}

// benchDumpStall fills a table of 262 144 entries, all in use, then walks it with the
// worker's slices, timing the part of each burst the dump takes (serveDumps, as EndBurst calls
// it; the rest of EndBurst is not timed). It reports
//
//   - max-µs/burst: the cost of the dearest slice. Each slice position's time is taken as its
//     least over the iterations, so that what the dump costs is not confused with the times
//     the operating system or the runtime preempted the goroutine (this is a shared 2-core VM);
//   - p99-µs/burst and µs/burst: over every slice of every iteration, preemptions included;
//   - raw-max-µs/burst: the longest single slice observed, preemptions included.
//
// A garbage collection is completed before each dump: the requester's buffer is a large
// allocation, and the pauses of the collection it triggers would stop the worker whether or not
// a dump were running.
func benchDumpStall(b *testing.B, request func(h *harness) func() bool) {
	// Full, a slot in two and a slot in four in use: the first bound reached is the copies',
	// then both at once (NAT), then the visits' (persistence).
	for _, every := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("1in%d", every), func(b *testing.B) { benchDumpStallEvery(b, every, request) })
	}
}

func benchDumpStallEvery(b *testing.B, every int, request func(h *harness) func() bool) {
	const slots = 1 << 18
	h := dumpHarness(b, slots)
	conns, maps := make([]int32, slots), make([]int32, slots)
	for k := range slots {
		conns[k], maps[k] = addConn(b, h, k), addMapping(b, h, k)
	}
	for k := range slots { // after filling, so the holes are spread over the tables
		if k%every != 0 {
			h.e.removeConn(conns[k])
			h.e.sticky.remove(maps[k])
		}
	}
	per := make([]time.Duration, 0, 1<<16)
	var least []time.Duration // by slice position
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		done := request(h)
		runtime.GC()
		b.StartTimer()
		for pos := 0; !done(); pos++ {
			h.e.BeginBurst(h.now)
			t0 := time.Now()
			h.e.serveDumps()
			d := time.Since(t0)
			if len(per) < cap(per) {
				per = append(per, d)
			}
			if pos == len(least) {
				b.StopTimer()
				least = append(least, d)
				b.StartTimer()
			}
			least[pos] = min(least[pos], d)
		}
	}
	b.StopTimer()
	var total time.Duration
	for _, d := range per {
		total += d
	}
	slices.Sort(per)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(slices.Max(least)), "max-µs/burst")
	b.ReportMetric(us(per[len(per)*99/100]), "p99-µs/burst")
	b.ReportMetric(us(total)/float64(len(per)), "µs/burst")
	b.ReportMetric(us(per[len(per)-1]), "raw-max-µs/burst")
	b.ReportMetric(float64(len(least)), "bursts/dump")
	if slices.Max(least) > 100*time.Microsecond {
		b.Errorf("the dearest slice costs %v, more than the 100 µs a burst may spend on a dump", slices.Max(least))
	}
}

func BenchmarkNATDumpSliceStall(b *testing.B) {
	benchDumpStall(b, func(h *harness) func() bool {
		ch, ok := h.e.RequestNATDump(0)
		if !ok {
			b.Fatal("refused")
		}
		return func() bool {
			select {
			case got := <-ch:
				if len(got) == 0 || (1<<18)%len(got) != 0 {
					b.Fatalf("%d entries", len(got))
				}
				return true
			default:
				return false
			}
		}
	})
}

func BenchmarkPersistDumpSliceStall(b *testing.B) {
	benchDumpStall(b, func(h *harness) func() bool {
		ch, ok := h.e.RequestPersistDump(0)
		if !ok {
			b.Fatal("refused")
		}
		return func() bool {
			select {
			case got := <-ch:
				if len(got) == 0 || (1<<18)%len(got) != 0 {
					b.Fatalf("%d entries", len(got))
				}
				return true
			default:
				return false
			}
		}
	})
}
