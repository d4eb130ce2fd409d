package dpdktest

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lrte_net_ring -lrte_bus_vdev
#include <errno.h>
#include <stdlib.h>
#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>

// ring_port makes an ethdev port over two existing rings, found by name
// (package dpdk created them and keeps its C pointers to itself).
static int ring_port(const char *name, const char *rxname, const char *txname)
{
	struct rte_ring *rx = rte_ring_lookup(rxname), *tx = rte_ring_lookup(txname);
	int rc;

	if (rx == NULL || tx == NULL)
		return -ENOENT;
	rc = rte_eth_from_rings(name, &rx, 1, &tx, 1, SOCKET_ID_ANY);
	return rc < 0 ? -rte_errno : rc;
}

// ring_port_remove takes the device off the vdev bus, so that its name can
// be used again; closing the port alone leaves it registered.
static int ring_port_remove(const char *name)
{
	return rte_vdev_uninit(name);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ilbgo/ilb/dpdk"
)

// Ring is one direction of a ring port. The test injects frames into the
// rx ring (the port receives them) and collects what the port transmitted
// from the tx ring. Its methods may be called from any goroutine, also
// while a worker polls the port.
type Ring struct {
	*dpdk.Ring
}

// DefaultRingSize is the ring size used by RingPort.
const DefaultRingSize = 1024

// RingPort creates a port named name (rte_eth_from_rings, one rx and one tx
// queue) over two fresh rings of DefaultRingSize and returns it with its rx
// ring (frames to receive) and tx ring (frames it sent). It panics on
// failure. Set the port up with Port.Setup (any pool; the ring PMD takes
// its mbufs from the ring) before use, and release it with CloseRingPort.
func RingPort(name string) (dpdk.Port, *Ring, *Ring) {
	p, rx, tx, err := NewRingPort(name, DefaultRingSize)
	if err != nil {
		panic(err)
	}
	return p, rx, tx
}

// NewRingPort is RingPort with a ring size (a power of two; the rings hold
// size-1 entries, so a small tx ring makes the port refuse packets).
func NewRingPort(name string, size uint32) (dpdk.Port, *Ring, *Ring, error) {
	rx, err := dpdk.NewRing(name+"_rx", size, dpdk.SocketAny, 0)
	if err != nil {
		return 0, nil, nil, err
	}
	tx, err := dpdk.NewRing(name+"_tx", size, dpdk.SocketAny, 0)
	if err != nil {
		rx.Free()
		return 0, nil, nil, err
	}
	cname, crx, ctx := C.CString(name), C.CString(rx.Name()), C.CString(tx.Name())
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(crx))
	defer C.free(unsafe.Pointer(ctx))
	rc := C.ring_port(cname, crx, ctx)
	if rc < 0 {
		rx.Free()
		tx.Free()
		return 0, nil, nil, fmt.Errorf("dpdktest: rte_eth_from_rings %q: %w", name, dpdk.Errno(-rc))
	}
	return dpdk.Port(rc), &Ring{rx}, &Ring{tx}, nil
}

// CloseRingPort stops and closes a port made by RingPort, removes its
// device (so the name can be reused) and frees its rings with any mbufs left
// in them.
func CloseRingPort(p dpdk.Port, rx, tx *Ring) error {
	name := p.Name()
	err := errors.Join(p.Stop(), p.Close())
	if name != "" {
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		if rc := C.ring_port_remove(cname); rc < 0 {
			err = errors.Join(err, fmt.Errorf("dpdktest: remove %q: %w", name, dpdk.Errno(-rc)))
		}
	}
	rx.Free()
	tx.Free()
	return err
}

// Inject copies each frame into a fresh mbuf from pool and enqueues it, in
// order. On error nothing of the failing part stays allocated.
func (r *Ring) Inject(pool *dpdk.Mempool, frames ...[]byte) error {
	for len(frames) > 0 {
		var ms [dpdk.MaxBurst]*dpdk.Mbuf
		n := min(len(frames), len(ms))
		if err := pool.AllocBulk(ms[:n]); err != nil {
			return fmt.Errorf("dpdktest: inject: %w", err)
		}
		for i, f := range frames[:n] {
			room := ms[i].Room()
			if len(f) > cap(room) {
				dpdk.FreeMbufs(ms[:n])
				return fmt.Errorf("dpdktest: inject: frame of %d bytes exceeds the mbuf room (%d)", len(f), cap(room))
			}
			copy(room[:len(f)], f)
			ms[i].SetLen(len(f))
		}
		if k := r.Enqueue(ms[:n]); k < n {
			dpdk.FreeMbufs(ms[k:n])
			return fmt.Errorf("dpdktest: inject: ring %s full (%d of %d enqueued)", r.Name(), k, n)
		}
		frames = frames[n:]
	}
	return nil
}

// Collect dequeues every mbuf in the ring, copies out its bytes and frees
// it. It returns the frames in order (nil if there were none).
func (r *Ring) Collect() [][]byte {
	var out [][]byte
	for {
		var ms [dpdk.MaxBurst]*dpdk.Mbuf
		n := r.Dequeue(ms[:])
		for _, m := range ms[:n] {
			out = append(out, append([]byte(nil), m.Data()...))
		}
		dpdk.FreeMbufs(ms[:n])
		if n < len(ms) {
			return out
		}
	}
}

// Free drains the ring (freeing the mbufs) and destroys it. Close the port
// first.
func (r *Ring) Free() {
	r.Collect()
	r.Ring.Free()
}
