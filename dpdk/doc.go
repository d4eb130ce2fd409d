// Package dpdk is the project's own small cgo binding to DPDK 22.11: EAL,
// lcores, mbuf pools, ethdev ports, rings and a batched rx/tx data path.
// It is the only package of the project that uses cgo.
//
// # Rules
//
// No Go pointers into C. C never keeps a Go pointer: lcore functions are
// passed as cgo.Handle values, burst arrays and the per-worker I/O block
// (IO) live in C memory, and small mbuf batches cross cgo by value. Only C
// pointers (mbufs) and integers are ever stored in C memory.
//
// One cgo call per burst, never per packet. A crossing costs 25–40 ns; at
// burst 32 that is about 1 ns per packet. IO.Run does the whole I/O of a
// worker iteration (tx of every queued list, free of the drop list, rx of
// the next burst) in one call. Everything per packet — Mbuf.Data, Room,
// SetLen, Prepend, Adj, IO.Rx, IO.Tx, IO.Drop — is pure Go on C memory, with
// field offsets computed by the C compiler (never from cgo's rendering of
// struct rte_mbuf, whose unions and bitfields it cannot express).
//
// The data path does not allocate: IO.Run, IO.Rx/Tx/Drop, the Mbuf
// accessors, Mempool.AllocBulk, FreeMbufs and Ring.Enqueue/Dequeue are
// 0 allocs/op.
//
// Views are borrowed. A slice returned by Mbuf.Data or Mbuf.Room aliases the
// packet buffer; it is valid only until the mbuf is handed to IO.Tx,
// IO.Drop, FreeMbufs or a Ring, and must not be kept across bursts.
// Each received mbuf must be given to exactly one of IO.Tx, IO.Drop,
// FreeMbufs or a ring, or be kept by the caller, which then owns it.
//
// # Threads
//
// EAL is initialised once per process (Init); the calling goroutine is
// locked to its OS thread for good, because that thread becomes the main
// lcore and EAL pins it. Worker lcores run Go through Launch (an EAL thread
// enters Go once, locks itself and runs the function). A polling Go lcore
// holds a P for ever, so GOMAXPROCS must exceed the number of polling
// lcores. An rx or tx queue must only ever be used by one thread.
//
// rte_errno and rte_lcore_id are thread-local; every C helper returns the
// error itself, so errors are never read in a second call.
package dpdk
