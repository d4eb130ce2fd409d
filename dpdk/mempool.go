package dpdk

/*
#include <errno.h>
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// SocketAny asks for memory on any NUMA socket.
const SocketAny = -1

// DefaultDataRoom is RTE_MBUF_DEFAULT_BUF_SIZE: 2048 bytes of data plus
// the headroom.
const DefaultDataRoom = 2176

// Headroom is the space reserved before the data of a fresh mbuf
// (RTE_PKTMBUF_HEADROOM), available to Mbuf.Prepend.
const Headroom = 128

// Compile-time checks that the constants above match the DPDK headers.
var (
	_ [DefaultDataRoom - C.RTE_MBUF_DEFAULT_BUF_SIZE]struct{}
	_ [C.RTE_MBUF_DEFAULT_BUF_SIZE - DefaultDataRoom]struct{}
	_ [Headroom - C.RTE_PKTMBUF_HEADROOM]struct{}
	_ [C.RTE_PKTMBUF_HEADROOM - Headroom]struct{}
)

// Mempool is a pool of packet mbufs (rte_pktmbuf_pool_create).
type Mempool struct {
	c    *C.struct_rte_mempool
	name string
}

// NewPktPool creates a pool of n mbufs with a per-lcore cache of cache
// entries and dataRoom bytes of buffer each (headroom included; 0 means
// DefaultDataRoom), on NUMA socket (SocketAny = any). n is best 2^k-1 and
// cache at most 512 and n/1.5. Names are process-wide and must be unique.
func NewPktPool(name string, n, cache uint32, dataRoom uint16, socket int) (*Mempool, error) {
	if dataRoom == 0 {
		dataRoom = DefaultDataRoom
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var rc C.int
	mp := C.lb_pool_create(cname, C.uint32_t(n), C.uint32_t(cache), C.uint16_t(dataRoom), C.int(socket), &rc)
	if mp == nil {
		return nil, wrap(Errno(-rc), "mempool %q", name)
	}
	return &Mempool{c: mp, name: name}, nil
}

// Free destroys the pool. Every mbuf must have been returned and no port
// queue may still use it.
func (p *Mempool) Free() {
	if p.c != nil {
		C.lb_pool_free(p.c)
		p.c = nil
	}
}

// Name returns the pool's name.
func (p *Mempool) Name() string { return p.name }

// Avail returns the number of free mbufs, lcore caches included. It walks
// the caches, so it is for tests and counters, not the data path.
func (p *Mempool) Avail() int { return int(C.lb_pool_avail(p.c)) }

// InUse returns the number of mbufs handed out.
func (p *Mempool) InUse() int { return int(C.lb_pool_in_use(p.c)) }

// ErrPoolEmpty reports that a pool could not satisfy an allocation.
var ErrPoolEmpty = errors.New("dpdk: mempool exhausted")

// AllocBulk fills dst with fresh mbufs (rte_pktmbuf_alloc_bulk), all or
// none; they are reset (data length 0, Headroom bytes of headroom). It makes
// one cgo call per MaxBurst mbufs and the pointers cross by value, so dst
// may be a small array on the caller's stack: it neither escapes nor is it
// kept by C.
func (p *Mempool) AllocBulk(dst []*Mbuf) error {
	for done := 0; done < len(dst); {
		n := min(len(dst)-done, MaxBurst)
		b := C.lb_alloc_burst(p.c, C.uint32_t(n))
		if b.rc != 0 {
			FreeMbufs(dst[:done])
			clear(dst[:done])
			// The ring driver says ENOBUFS, the API doc ENOENT.
			if b.rc == -C.ENOENT || b.rc == -C.ENOBUFS {
				return ErrPoolEmpty
			}
			return wrap(Errno(-b.rc), "alloc from %q", p.name)
		}
		for i := range n {
			dst[done+i] = (*Mbuf)(unsafe.Pointer(b.m[i]))
		}
		done += n
	}
	return nil
}

// FreeMbufs returns ms to their pools (rte_pktmbuf_free_bulk): one cgo call
// per MaxBurst mbufs, pointers crossing by value. nil entries are skipped.
func FreeMbufs(ms []*Mbuf) {
	for len(ms) > 0 {
		var b C.struct_lb_burst
		n := min(len(ms), MaxBurst)
		for i, m := range ms[:n] {
			b.m[i] = (*C.struct_rte_mbuf)(unsafe.Pointer(m))
		}
		b.n = C.uint32_t(n)
		C.lb_free_burst(b)
		ms = ms[n:]
	}
}
