package dpdk

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import "unsafe"

// RingFlags are rte_ring creation flags.
type RingFlags uint32

// Ring flags. A ring between exactly one producer and one consumer thread
// should use RingSP|RingSC: no atomic compare-and-swap on either side.
const (
	RingSP        RingFlags = 1 // single producer (RING_F_SP_ENQ)
	RingSC        RingFlags = 2 // single consumer (RING_F_SC_DEQ)
	RingExactSize RingFlags = 4 // capacity is exactly size, not size-1 rounded to 2^k (RING_F_EXACT_SZ)
)

// Compile-time checks against the DPDK headers (a non-zero index fails).
var (
	_ = [1]struct{}{}[RingSP-C.RING_F_SP_ENQ]
	_ = [1]struct{}{}[RingSC-C.RING_F_SC_DEQ]
	_ = [1]struct{}{}[RingExactSize-C.RING_F_EXACT_SZ]
)

// Ring is an rte_ring of mbuf pointers, for handing packets between
// threads. Only C pointers go through it, never Go pointers.
type Ring struct {
	c    *C.struct_rte_ring
	name string
}

// NewRing creates a ring; without RingExactSize, size must be a power of
// two and the ring holds size-1 entries. Names are process-wide.
func NewRing(name string, size uint32, socket int, flags RingFlags) (*Ring, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var rc C.int
	r := C.lb_ring_create(cname, C.uint32_t(size), C.int(socket), C.uint32_t(flags), &rc)
	if r == nil {
		return nil, wrap(Errno(-rc), "ring %q", name)
	}
	return &Ring{c: r, name: name}, nil
}

// Name returns the ring's name (rte_ring_lookup finds it by this name).
func (r *Ring) Name() string { return r.name }

// Free destroys the ring; mbufs still in it are not freed.
func (r *Ring) Free() {
	if r.c != nil {
		C.lb_ring_free(r.c)
		r.c = nil
	}
}

// Enqueue adds as many of ms as fit and returns how many it added; the
// caller keeps ownership of the rest. One cgo call per MaxBurst mbufs;
// pointers cross by value, so ms may live on the caller's stack.
func (r *Ring) Enqueue(ms []*Mbuf) int {
	done := 0
	for done < len(ms) {
		var b C.struct_lb_burst
		n := min(len(ms)-done, MaxBurst)
		for i, m := range ms[done : done+n] {
			b.m[i] = (*C.struct_rte_mbuf)(unsafe.Pointer(m))
		}
		b.n = C.uint32_t(n)
		k := int(C.lb_ring_enq(r.c, b))
		done += k
		if k < n {
			break
		}
	}
	return done
}

// Dequeue fills ms with up to len(ms) mbufs and returns how many.
func (r *Ring) Dequeue(ms []*Mbuf) int {
	done := 0
	for done < len(ms) {
		n := min(len(ms)-done, MaxBurst)
		b := C.lb_ring_deq(r.c, C.uint32_t(n))
		for i := range int(b.n) {
			ms[done+i] = (*Mbuf)(unsafe.Pointer(b.m[i]))
		}
		done += int(b.n)
		if int(b.n) < n {
			break
		}
	}
	return done
}

// Count returns the number of entries in the ring.
func (r *Ring) Count() int { return int(C.lb_ring_count(r.c)) }

// NewRingPort creates an ethdev port named name over rings (the net_ring PMD): its rx queue i
// receives what is enqueued on rx[i], its tx queue i enqueues on tx[i]. Give the rings
// RingSP|RingSC and one producer and one consumer thread each, and the port is a set of
// lockless single-producer, single-consumer channels that IO.Run drives like any port (the
// mbufs keep the in-port of the device that received them). Set it up with Port.Setup before
// use and release it with RemoveRingPort.
func NewRingPort(name string, rx, tx []*Ring, socket int) (Port, error) {
	if len(rx) == 0 || len(tx) == 0 {
		return 0, wrap(Errno(C.EINVAL), "ring port %q: no rings", name)
	}
	crx := make([]*C.struct_rte_ring, len(rx))
	ctx := make([]*C.struct_rte_ring, len(tx))
	for i, r := range rx {
		crx[i] = r.c
	}
	for i, r := range tx {
		ctx[i] = r.c
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	rc := C.lb_ring_port(cname, &crx[0], C.uint(len(crx)), &ctx[0], C.uint(len(ctx)), C.int(socket))
	if rc < 0 {
		return 0, wrap(Errno(-rc), "ring port %q", name)
	}
	return Port(rc), nil
}

// RemoveRingPort takes a ring port, stopped and closed, off the vdev bus so that its name can
// be used again.
func RemoveRingPort(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return wrap(errno(C.lb_vdev_uninit(cname)), "removing %q", name)
}
