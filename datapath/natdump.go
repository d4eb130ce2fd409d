package datapath

import (
	"net/netip"
	"sync/atomic"
	"unsafe"
)

// NATEntry is one tracked connection, with the four endpoints show-nat prints (spec §2.8).
type NATEntry struct {
	Proto    uint8
	Client   netip.AddrPort // client address and port
	VIP      netip.AddrPort // rule VIP and the port the client used
	NATSrc   netip.AddrPort // source the server sees: the client for half-NAT, the proxy for full NAT
	Server   netip.AddrPort // server address and port
	RuleID   uint64
	Created  int64 // worker clock, ns
	LastUsed int64 // worker clock, ns
}

// Table dumps (show-nat, show-persist) are walked in slices, one per EndBurst, so that a dump of
// a full table never stalls the worker: copying 262 144 entries in one burst took 36 ms, during
// which the NIC's rx rings overflowed. A slice visits at most a fixed number of table slots and
// copies at most a fixed number of entries, whichever comes first, into a buffer the requester
// allocated, and remembers where it stopped. Visiting a free slot costs a read of its flags;
// copying an entry costs its conversion and the write of the result, several times more, so
// the two are bounded separately: a sparse table is walked in few bursts and a full one still
// costs no more per burst.
//
// The walk is not a snapshot, and neither was Solaris' kernel walk (ilb_list_nat walked the
// hash buckets between the ioctls of one listing, with traffic going on): an entry created or
// removed while the walk is under way may or may not be listed. Nothing is listed twice: each
// slot is visited once, a NAT entry created after the walk began is skipped (so a connection
// that ends and is reopened in a slot not yet visited is not listed a second time), and the
// persistence walk skips a mapping it has already copied (see persistdump.go).

// natDumpSlice and natDumpScan bound one EndBurst's share of a pending show-nat: entries
// copied, and connection-table slots visited. Measured with BenchmarkNATDumpSliceStall on the
// 2-core development VM (262 144 slots; the buffer prefaulted by the requester), the dearest
// slice costs about 46 µs with every slot in use (1024 copies), 54 µs with one in two (2048
// visits, 1024 copies) and 38 µs with one in four; the 99th percentile, preemptions included,
// 55-75 µs: within the 100 µs a burst may spend on it. 4096 copies cost 180 µs here.
const (
	natDumpSlice = 1024
	natDumpScan  = 2048
)

// natDumpRequest is one pending dump. The requester allocates buf; the worker fills it, a
// slice per EndBurst, and sends it on ch when the walk is done or buf is full.
type natDumpRequest struct {
	buf       []NATEntry // len: entries copied; cap: the most the dump may return
	next      int        // next slot of the connection table to visit
	start     int64      // worker clock when the walk began: later entries are not listed
	started   bool
	cancelled atomic.Bool // the requester gave up: drop the walk at the next slice
	ch        chan []NATEntry
}

type natDump struct {
	req atomic.Pointer[natDumpRequest]
	// visited and copied are the last slice's slots and entries (tests check the bounds).
	visited, copied int
	// turn alternates the two dumps when both are pending, so a burst does one slice at most.
	turn bool
}

// RequestNATDump asks the worker for up to max connection entries (max ≤ 0: all). The worker
// walks its table over its next bursts and answers on the returned channel. ok is false while
// another dump is still pending, as Solaris allows one lister at a time. Safe from any
// goroutine. The buffer for the answer is allocated and touched here, on the caller's side, so
// the worker neither allocates nor takes page faults while copying.
func (e *Engine) RequestNATDump(max int) (entries <-chan []NATEntry, ok bool) {
	if e.dump.req.Load() != nil {
		return nil, false // do not allocate a buffer only to be refused
	}
	n := len(e.conns.entries) // the capacity, fixed in New: the most entries there can be
	if max > 0 && max < n {
		n = max
	}
	r := &natDumpRequest{buf: prefault(make([]NATEntry, 0, n)), ch: make(chan []NATEntry, 1)}
	if !e.dump.req.CompareAndSwap(nil, r) {
		return nil, false
	}
	return r.ch, true
}

// CancelNATDump abandons the dump that answers on ch, if it is still pending: the worker drops
// it at its next EndBurst and a new one may be requested. A control plane that waits for several
// workers calls it when one of them refuses or the wait times out. Safe from any goroutine.
func (e *Engine) CancelNATDump(ch <-chan []NATEntry) {
	if r := e.dump.req.Load(); r != nil && (<-chan []NATEntry)(r.ch) == ch {
		r.cancelled.Store(true)
	}
}

// prefault writes one element per page of s's backing array, so that the pages a fresh large
// allocation leaves untouched are faulted in by the requester rather than by the worker.
func prefault[T any](s []T) []T {
	var zero T
	full := s[:cap(s)]
	step := max(4096/max(int(unsafe.Sizeof(zero)), 1), 1)
	for i := 0; i < len(full); i += step {
		full[i] = zero
	}
	return s
}

// serveDumps does one slice of the pending dumps at the end of a burst. With both pending they
// take turns, so one burst never pays for two slices; a cancelled dump is dropped first, so it
// does not take a turn.
func (e *Engine) serveDumps() {
	e.dump.visited, e.dump.copied, e.pdump.visited, e.pdump.copied = 0, 0, 0, 0
	nr, pr := e.dump.req.Load(), e.pdump.req.Load()
	if nr != nil && nr.cancelled.Load() {
		e.dump.req.Store(nil)
		nr = nil
	}
	if pr != nil && pr.cancelled.Load() {
		e.pdump.req.Store(nil)
		pr = nil
	}
	if nr != nil && pr != nil {
		e.dump.turn = !e.dump.turn
		if e.dump.turn {
			pr = nil
		} else {
			nr = nil
		}
	}
	if nr != nil {
		e.serveNATDump(nr)
	}
	if pr != nil {
		e.servePersistDump(pr)
	}
}

// serveNATDump copies the next slice of the connection table into the pending request r and
// answers it once the walk is done or its buffer is full. It does not allocate.
func (e *Engine) serveNATDump(r *natDumpRequest) {
	if !r.started {
		r.started, r.start = true, e.now
	}
	t := &e.conns
	end := min(r.next+natDumpScan, len(t.entries))
	i, copied := r.next, 0
	for ; i < end && copied < natDumpSlice && len(r.buf) < cap(r.buf); i++ {
		c := &t.entries[i]
		// Entries created after the walk started may sit in a slot it has not reached: leave
		// them out, or a connection that ended and was reopened would be listed twice.
		if c.flags&connInUse == 0 || int32(c.created-msOf(r.start)) > 0 {
			continue
		}
		o, x := t.orig(c), t.xlat(c)
		r.buf = append(r.buf, NATEntry{ // within cap: never allocates
			Proto:    c.proto,
			Client:   netip.AddrPortFrom(o.src.netip(), o.sport),
			VIP:      netip.AddrPortFrom(o.dst.netip(), o.dport),
			NATSrc:   netip.AddrPortFrom(x.src.netip(), x.sport),
			Server:   netip.AddrPortFrom(x.dst.netip(), x.dport),
			RuleID:   e.slots[c.rule].id,
			Created:  msBefore(e.now, c.created),
			LastUsed: msBefore(e.now, c.last),
		})
		copied++
	}
	e.dump.visited, e.dump.copied = i-r.next, copied
	r.next = i
	if r.next < len(t.entries) && len(r.buf) < cap(r.buf) {
		return // more next burst
	}
	r.ch <- r.buf // buffered for one answer: never blocks
	e.dump.req.Store(nil)
}
