package datapath

import "math/bits"

// Persistence (spec §6.7): a per-engine sticky table mapping (rule, client address masked by
// the rule's pmask) to a server and, for full NAT, the proxy-src address. Like the connection
// table it is fixed-size, pointer-free and preallocated, with a bucketised cuckoo index beside
// the entries so connections can refer to an entry by number while the index reshuffles.
//
// An entry is held by the connections created through it and lives on persist-timeout after the
// last one ends; for DSR, which has no connections, persist-timeout after its last packet.

// stickyEntry is one persistence mapping (48 bytes).
type stickyEntry struct {
	key       addr   // client address masked by pmask
	ruleID    uint64 // SnapRule.ID: rule instances never share entries
	last      int64  // last use: creation, a hit, the end of a holding connection
	timeoutMs uint32 // persist-timeout
	refs      int32  // connections holding the entry
	server    int32  // server slot
	serverGen uint32 // the slot's generation when chosen (serverRun.gen)
	proxy     int8   // full NAT: index of the proxy-src address in the rule; -1 not chosen yet
	inUse     bool
}

// expired reports whether no connection holds e and it has been unused for its timeout.
func (s *stickyEntry) expired(now int64) bool {
	return s.refs <= 0 && now-s.last > int64(s.timeoutMs)*1e6
}

// stickyTable holds the entries, their index and their free list.
type stickyTable struct {
	entries []stickyEntry
	index   bucketIndex // one key per entry, ref = entry number: at most 0.8 full
	free    []uint32
	nfree   int
	seed    uint64
	sweep   uint32
}

func newStickyTable(capacity int, seed uint64) stickyTable {
	n := ceilPow2(max(capacity, 1))
	t := stickyTable{
		entries: make([]stickyEntry, n),
		index:   newBucketIndex(n),
		free:    make([]uint32, n),
		nfree:   n,
		seed:    seed,
	}
	for i := range t.free {
		t.free[i] = uint32(n - 1 - i)
	}
	return t
}

// count returns the number of live entries.
func (t *stickyTable) count() int { return len(t.entries) - t.nfree }

// hash mixes a key with the table's seed (wyhash folding, as the connection table does).
func (t *stickyTable) hash(rule uint64, k addr) uint64 {
	hi, lo := bits.Mul64(k.lo^t.seed, k.hi^rule*0x9e3779b97f4a7c15^0xa0761d6478bd642f)
	return hi ^ lo
}

// lookup returns the entry of (rule, k) or -1: its home bucket, then its alternate.
func (t *stickyTable) lookup(rule uint64, k addr, h uint64) int32 {
	b, tag := t.index.home(h)
	if i := t.scan(b, tag, rule, k); i >= 0 {
		return i
	}
	if b2 := t.index.alt(b, tag); b2 != b && t.index.buckets[b].spill != 0 { // else the key is not in its alternate
		return t.scan(b2, tag, rule, k)
	}
	return -1
}

// scan looks for (rule, k) in bucket b: tags first, the entry only where the tag matches.
func (t *stickyTable) scan(b uint32, tag uint16, rule uint64, k addr) int32 {
	bk := &t.index.buckets[b]
	for m := bk.match(tag); m != 0; m &= m - 1 {
		r := bk.refs[bits.TrailingZeros32(m)]
		if e := &t.entries[r]; e.key == k && e.ruleID == rule {
			return int32(r)
		}
	}
	return -1
}

// insert adds an entry for (rule, k) hashing to h and returns its number, or -1 when full (or,
// practically never, when the index finds no room for the key).
func (t *stickyTable) insert(rule uint64, k addr, h uint64, server int32, timeoutMs uint32, now int64) int32 {
	if t.nfree == 0 {
		return -1
	}
	i := t.free[t.nfree-1]
	if !t.index.place(h, i) {
		return -1
	}
	t.nfree--
	t.entries[i] = stickyEntry{key: k, ruleID: rule, last: now, timeoutMs: timeoutMs, server: server, proxy: -1, inUse: true}
	return int32(i)
}

// remove frees entry i, rehashing its key as insert hashed it.
func (t *stickyTable) remove(i int32) {
	s := &t.entries[i]
	t.index.unplace(t.hash(s.ruleID, s.key), uint32(i))
	s.inUse = false
	t.free[t.nfree] = uint32(i)
	t.nfree++
}

// release drops a connection's hold on entry i; its persist-timeout runs from now.
func (t *stickyTable) release(i int32, now int64) {
	s := &t.entries[i]
	s.refs--
	s.last = now
}

// chooseServer outcomes.
const (
	chooseOK          = iota // the algorithm chose: round robin moves on once the server is used
	chooseHit                // a persistence entry chose: the algorithm did not run
	chooseNoServer           // no usable server: pkt_dropped
	chooseNoMemory           // persistence table full: nomem_pkt_dropped
	chooseUnknownAlgo        // the rule's algorithm code has no registry entry: pkt_dropped
)

// chooseServer returns the server index for a new flow (or a DSR packet) of rule rs. For a
// sticky rule it also returns the persistence entry, which the caller makes the new connection
// hold, and the entry's fixed proxy-src index (-1: not chosen yet). An entry whose server is no
// longer usable is pointed at the algorithm's new choice (spec §6.7).
func (e *Engine) chooseServer(rs *ruleState, p *Parsed) (si int, st int32, proxy int, status int) {
	if rs.pick == nil {
		return -1, -1, -1, chooseUnknownAlgo
	}
	if !rs.sticky {
		if si = e.pickServer(rs, p); si < 0 {
			return -1, -1, -1, chooseNoServer
		}
		return si, -1, -1, chooseOK
	}
	t := &e.sticky
	key := p.src.and(rs.pmask)
	h := t.hash(rs.id, key)
	if st = t.lookup(rs.id, key, h); st >= 0 {
		s := &t.entries[st]
		if s.expired(e.now) {
			t.remove(st)
		} else {
			if run := &e.srv[s.server]; run.active && run.rule == rs.slot && run.gen == s.serverGen && int(run.idx) < len(rs.servers) {
				s.last = e.now
				return int(run.idx), st, int(s.proxy), chooseHit
			}
			if si = e.pickServer(rs, p); si < 0 {
				return -1, -1, -1, chooseNoServer
			}
			s.server, s.proxy, s.last = rs.servers[si].slot, -1, e.now
			s.serverGen = e.srv[s.server].gen
			return si, st, -1, chooseOK
		}
	}
	if si = e.pickServer(rs, p); si < 0 {
		return -1, -1, -1, chooseNoServer
	}
	if st = t.insert(rs.id, key, h, rs.servers[si].slot, rs.stickyMs, e.now); st < 0 {
		return -1, -1, -1, chooseNoMemory
	}
	t.entries[st].serverGen = e.srv[rs.servers[si].slot].gen
	return si, st, -1, chooseOK
}

// The sticky sweep visits the whole table every stickySweepPeriod.
const (
	stickySweepPeriod = int64(10e9)
	stickySweepLimit  = 1024
)

// sweepSticky removes expired entries among those that came due for a visit.
func (e *Engine) sweepSticky() {
	t := &e.sticky
	k := e.stickyPacer.due(e.now, len(t.entries), stickySweepPeriod, stickySweepLimit)
	if t.nfree == len(t.entries) {
		return
	}
	m := uint32(len(t.entries) - 1)
	for ; k > 0; k-- {
		i := t.sweep
		t.sweep = (t.sweep + 1) & m
		if s := &t.entries[i]; s.inUse && s.expired(e.now) {
			t.remove(int32(i))
		}
	}
}
