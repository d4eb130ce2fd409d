package datapath

import (
	"net/netip"
	"sync/atomic"
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

// natDumpRequest is one pending dump: the worker fills it at its next EndBurst.
type natDumpRequest struct {
	max int
	ch  chan []NATEntry
}

type natDump struct {
	req atomic.Pointer[natDumpRequest]
}

// RequestNATDump asks the worker for up to max connection entries (max ≤ 0: all). The worker
// answers on the returned channel at its next EndBurst. ok is false while another dump is still
// pending, as Solaris allows one lister at a time. Safe from any goroutine.
func (e *Engine) RequestNATDump(max int) (entries <-chan []NATEntry, ok bool) {
	r := &natDumpRequest{max: max, ch: make(chan []NATEntry, 1)}
	if !e.dump.req.CompareAndSwap(nil, r) {
		return nil, false
	}
	return r.ch, true
}

// serveNATDump answers a pending dump request. Control work on the worker: it allocates, and it
// walks the whole table once, so it is meant for occasional administrative use.
func (e *Engine) serveNATDump() {
	r := e.dump.req.Load()
	if r == nil {
		return
	}
	t := &e.conns
	n := t.count()
	if r.max > 0 && r.max < n {
		n = r.max
	}
	out := make([]NATEntry, 0, n)
	for i := range t.entries {
		if len(out) == n {
			break
		}
		c := &t.entries[i]
		if c.flags&connInUse == 0 {
			continue
		}
		out = append(out, NATEntry{
			Proto:    c.proto,
			Client:   netip.AddrPortFrom(c.orig.src.netip(), c.orig.sport),
			VIP:      netip.AddrPortFrom(c.orig.dst.netip(), c.orig.dport),
			NATSrc:   netip.AddrPortFrom(c.xlat.src.netip(), c.xlat.sport),
			Server:   netip.AddrPortFrom(c.xlat.dst.netip(), c.xlat.dport),
			RuleID:   e.slots[t.meta[i].ruleSlot].id,
			Created:  t.meta[i].created,
			LastUsed: c.last,
		})
	}
	r.ch <- out
	e.dump.req.Store(nil)
}
