package datapath

import (
	"net/netip"
	"sync/atomic"
)

// PersistEntry is one persistence mapping, with what show-persist prints (spec §2.9).
type PersistEntry struct {
	RuleID   uint64
	Rule     string     // rule name
	Client   netip.Addr // client source address masked by the rule's pmask
	Server   netip.Addr // server the client's new connections go to
	ProxySrc netip.Addr // full NAT: the proxy-src address the mapping fixes; invalid if none yet
	Conns    int        // connections holding the mapping
	LastUsed int64      // worker clock, ns
}

// persistDumpSlice and persistDumpScan bound one EndBurst's share of a pending show-persist:
// mappings copied, and persistence-table slots visited (see natdump.go). A copy costs more than
// show-nat's, for the check against the mappings already copied. Measured with
// BenchmarkPersistDumpSliceStall on the 2-core development VM (262 144 slots; buffers prefaulted
// by the requester), the dearest slice costs about 35 µs with every slot or one in two in use
// (512 copies) and 22 µs with one in four (1024 visits, 256 copies); the 99th percentile,
// preemptions included, 35-65 µs: within the 100 µs a burst may spend on it. 4096 copies cost
// 320 µs here, 1024 with a scan of 2048 up to 80 µs.
const (
	persistDumpSlice = 512
	persistDumpScan  = 1024
)

// persistDumpRequest is one pending persistence dump; the requester allocates buf and seen.
type persistDumpRequest struct {
	buf []PersistEntry // len: entries copied; cap: the most the dump may return
	// seen indexes buf by the persistence table's hash of each copied mapping's key, so a
	// mapping that expires and is re-created at a slot the walk has not reached yet is not
	// listed twice. Open addressing, at most half full; pos 0 marks an empty slot.
	seen      []dumpSeen
	next      int // next slot of the persistence table to visit
	cancelled atomic.Bool
	ch        chan []PersistEntry
}

type dumpSeen struct {
	hash uint32
	pos  int32 // index in buf + 1
}

type persistDump struct {
	req             atomic.Pointer[persistDumpRequest]
	visited, copied int // the last slice's slots and mappings (tests check the bounds)
}

// RequestPersistDump asks the worker for up to max persistence entries (max ≤ 0: all). The
// worker walks its table over its next bursts and answers on the returned channel. ok is false
// while another dump is still pending, as Solaris allows one lister at a time. Safe from any
// goroutine. The answer's buffers are allocated and touched here, not on the worker.
func (e *Engine) RequestPersistDump(max int) (entries <-chan []PersistEntry, ok bool) {
	if e.pdump.req.Load() != nil {
		return nil, false
	}
	n := len(e.sticky.entries) // the capacity, fixed in New
	if max > 0 && max < n {
		n = max
	}
	r := &persistDumpRequest{
		buf:  prefault(make([]PersistEntry, 0, n)),
		seen: prefault(make([]dumpSeen, ceilPow2(2*n))),
		ch:   make(chan []PersistEntry, 1),
	}
	if !e.pdump.req.CompareAndSwap(nil, r) {
		return nil, false
	}
	return r.ch, true
}

// CancelPersistDump abandons the dump that answers on ch, if it is still pending (see
// CancelNATDump). Safe from any goroutine.
func (e *Engine) CancelPersistDump(ch <-chan []PersistEntry) {
	if r := e.pdump.req.Load(); r != nil && (<-chan []PersistEntry)(r.ch) == ch {
		r.cancelled.Store(true)
	}
}

// servePersistDump copies the next slice of the persistence table into the pending request r and
// answers it once the walk is done or its buffer is full. It does not allocate. Besides the
// slots it visits, a copied mapping costs a scan of its rule's servers, and one whose rule is not
// the previous mapping's a scan of the current rules (for the full-NAT proxy-src addresses):
// mappings of one rule usually come in runs.
func (e *Engine) servePersistDump(r *persistDumpRequest) {
	t := &e.sticky
	end := min(r.next+persistDumpScan, len(t.entries))
	var lastID uint64
	lastSlot, lastRS := int32(-1), (*ruleState)(nil)
	i, copied := r.next, 0
	for ; i < end && copied < persistDumpSlice && len(r.buf) < cap(r.buf); i++ {
		s := &t.entries[i]
		if !s.inUse || s.expired(e.now) {
			continue
		}
		if lastSlot < 0 || s.ruleID != lastID {
			slot, ok := e.slotByID[s.ruleID]
			if !ok {
				continue
			}
			lastID, lastSlot, lastRS = s.ruleID, slot, nil
			for k := range e.rules {
				if e.rules[k].id == s.ruleID {
					lastRS = &e.rules[k]
					break
				}
			}
		}
		client := s.key.netip()
		h := uint32(t.hash(s.ruleID, s.key)) // the table keeps no hashes: 32 bits suffice here
		if r.wasCopied(h, s.ruleID, client) {
			continue
		}
		pe := PersistEntry{RuleID: s.ruleID, Rule: e.slots[lastSlot].name, Client: client, Conns: int(s.refs), LastUsed: s.last}
		for _, sv := range e.slots[lastSlot].servers {
			if sv.slot == s.server {
				pe.Server = sv.addr
				break
			}
		}
		if s.proxy >= 0 && lastRS != nil && int(s.proxy) < len(lastRS.proxies) {
			pe.ProxySrc = lastRS.proxies[s.proxy].addr.netip()
		}
		r.buf = append(r.buf, pe) // within cap: never allocates
		r.remember(h)
		copied++
	}
	e.pdump.visited, e.pdump.copied = i-r.next, copied
	r.next = i
	if r.next < len(t.entries) && len(r.buf) < cap(r.buf) {
		return // more next burst
	}
	r.ch <- r.buf // buffered for one answer: never blocks
	e.pdump.req.Store(nil)
}

// wasCopied reports whether the mapping (rule, client), whose key hashes to h, is in buf already.
func (r *persistDumpRequest) wasCopied(h uint32, rule uint64, client netip.Addr) bool {
	m := uint32(len(r.seen) - 1)
	for j := h & m; r.seen[j].pos != 0; j = (j + 1) & m {
		if x := &r.seen[j]; x.hash == h {
			if pe := &r.buf[x.pos-1]; pe.RuleID == rule && pe.Client == client {
				return true
			}
		}
	}
	return false
}

// remember records that the last entry of buf has key hash h. seen has twice buf's capacity,
// so it never fills.
func (r *persistDumpRequest) remember(h uint32) {
	m := uint32(len(r.seen) - 1)
	j := h & m
	for r.seen[j].pos != 0 {
		j = (j + 1) & m
	}
	r.seen[j] = dumpSeen{hash: h, pos: int32(len(r.buf))}
}
