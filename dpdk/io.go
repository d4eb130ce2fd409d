package dpdk

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// MaxBurst is the rx burst size of IO.Run: large enough to amortise the cgo
// crossing (about 1 ns per packet), small enough to stay in cache.
const MaxBurst = 32

// TxListCap is the capacity of one per-port tx list of an IO. It is twice
// MaxBurst so that a whole burst plus locally originated frames fit.
const TxListCap = 64

// Compile-time checks that the Go constants match shim.h.
var (
	_ [MaxBurst - C.LB_MAX_BURST]struct{}
	_ [C.LB_MAX_BURST - MaxBurst]struct{}
	_ [TxListCap - C.LB_TX_MAX]struct{}
	_ [C.LB_TX_MAX - TxListCap]struct{}
)

// IO is a per-worker I/O block in C memory: the rx array of the last burst,
// one tx list per port and a drop list. Its methods are not safe for
// concurrent use; each worker owns one.
type IO struct {
	c  *C.struct_lb_io
	tx []C.struct_lb_txlist // view of c.tx, in C memory
}

// NewIO allocates an I/O block with tx lists for ports 0..nports-1: the tx
// list index is the Port id, so pass the highest port id + 1 (CountPorts()
// when ids are dense). Create it on the worker that uses it, so that its
// memory is on the worker's NUMA socket.
func NewIO(nports int) *IO {
	if nports < 1 || nports > MaxPorts {
		panic("dpdk: NewIO: nports out of range")
	}
	c := C.lb_io_new(C.uint16_t(nports))
	if c == nil {
		panic("dpdk: NewIO: out of DPDK memory (is EAL initialised?)")
	}
	return &IO{c: c, tx: unsafe.Slice(c.tx, nports)}
}

// Free releases the block and frees the mbufs still queued on its tx and
// drop lists. Mbufs received by the last Run belong to the caller.
func (io *IO) Free() {
	if io.c != nil {
		C.lb_io_free(io.c)
		io.c, io.tx = nil, nil
	}
}

// Run transmits every queued tx list on queue txq of its port (freeing and
// counting what the port did not take), frees the drop list, then receives
// up to MaxBurst packets from (rxPort, rxq). It returns the number received
// and is exactly one cgo call.
func (io *IO) Run(rxPort Port, rxq, txq uint16) int {
	return int(C.lb_io_run(io.c, C.uint16_t(rxPort), C.uint16_t(rxq), C.uint16_t(txq)))
}

// Send transmits every queued tx list on queue txq and frees the drop list, like Run without
// the receive (one cgo call).
func (io *IO) Send(txq uint16) { C.lb_io_send(io.c, C.uint16_t(txq)) }

// N returns the number of packets received by the last Run.
func (io *IO) N() int { return int(io.c.nrx) }

// Rx returns the i-th mbuf received by the last Run, or nil if i is out of
// range.
func (io *IO) Rx(i int) *Mbuf {
	if uint(i) >= uint(io.c.nrx) {
		return nil
	}
	return (*Mbuf)(unsafe.Pointer(io.c.rx[i]))
}

// Received returns the mbufs of the last Run as a slice over C memory,
// valid until the next Run.
func (io *IO) Received() []*Mbuf {
	return unsafe.Slice((**Mbuf)(unsafe.Pointer(&io.c.rx[0])), io.c.nrx)
}

// Tx queues m for transmission on port (an index equal to the Port id) at
// the next Run. It returns false if the port's list is full or the index is
// out of range; the caller still owns m then and normally drops it.
func (io *IO) Tx(port int, m *Mbuf) bool {
	if uint(port) >= uint(len(io.tx)) {
		return false
	}
	l := &io.tx[port]
	n := l.n
	if n >= TxListCap {
		return false
	}
	putMbuf(&l.pkts[n], m)
	l.n = n + 1
	return true
}

// putMbuf stores m in a slot of a C array as a plain word: C memory is never scanned by the
// garbage collector, so the write barrier Go emits for a pointer store would be wasted.
func putMbuf(slot **C.struct_rte_mbuf, m *Mbuf) {
	*(*uintptr)(unsafe.Pointer(slot)) = uintptr(unsafe.Pointer(m))
}

// Pending returns the number of mbufs queued for port.
func (io *IO) Pending(port int) int {
	if uint(port) >= uint(len(io.tx)) {
		return 0
	}
	return int(io.tx[port].n)
}

// Drop queues m to be freed at the next Run. When the list is full it is
// flushed first with one extra cgo call.
func (io *IO) Drop(m *Mbuf) {
	c := io.c
	if n := c.ndrop; n < C.LB_DROP_MAX {
		putMbuf(&c.drop[n], m)
		c.ndrop = n + 1
		return
	}
	C.lb_free_bulk(&c.drop[0], C.uint(c.ndrop))
	putMbuf(&c.drop[0], m)
	c.ndrop = 1
}

// TxDropped returns how many packets the ports refused (and Run freed)
// since the block was created.
func (io *IO) TxDropped() uint64 { return uint64(io.c.tx_dropped) }
