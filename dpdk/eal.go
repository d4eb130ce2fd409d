package dpdk

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// initCalled is set by the first Init, successful or not: EAL refuses a
// second rte_eal_init in the same process either way.
var initCalled atomic.Bool

// Init initialises the EAL with args, where args[0] is a program name such
// as "ilbd". It may be called once per process. On success the calling
// goroutine stays locked to its OS thread, which EAL made the main lcore and
// pinned to its CPU; call it from main or from a goroutine that lives as long
// as DPDK is used.
func Init(args []string) error {
	if len(args) == 0 {
		return errors.New("dpdk: Init needs at least a program name")
	}
	if !initCalled.CompareAndSwap(false, true) {
		return errors.New("dpdk: EAL already initialised (Init may be called once per process)")
	}
	// argv lives in C memory and is never freed: EAL permutes it (getopt)
	// and may keep pointers to the strings.
	argv := unsafe.Slice((**C.char)(C.calloc(C.size_t(len(args)+1), C.size_t(unsafe.Sizeof((*C.char)(nil))))), len(args)+1)
	for i, a := range args {
		argv[i] = C.CString(a)
	}
	// Lock before rte_eal_init: this thread becomes the main lcore, and
	// locking first starts Go's template thread while the process affinity
	// is still unpinned, so threads the runtime creates later are not
	// confined to the main lcore's CPU.
	runtime.LockOSThread()
	if rc := C.lb_eal_init(C.int(len(args)), &argv[0]); rc < 0 {
		runtime.UnlockOSThread()
		return wrap(Errno(-rc), "rte_eal_init")
	}
	return nil
}

// Cleanup releases EAL resources (rte_eal_cleanup). Stop the lcores
// (WaitAll) and ports first. EAL cannot be initialised again afterwards.
func Cleanup() error {
	return wrap(errno(C.lb_eal_cleanup()), "rte_eal_cleanup")
}

// MainLcore returns the id of the main lcore.
func MainLcore() uint { return uint(C.lb_main_lcore()) }

// WorkerLcores returns the enabled lcores except the main one, in order.
func WorkerLcores() []uint {
	var buf [C.RTE_MAX_LCORE]C.uint
	n := int(C.lb_worker_lcores(&buf[0], C.int(len(buf))))
	ids := make([]uint, 0, n)
	for _, id := range buf[:min(n, len(buf))] {
		ids = append(ids, uint(id))
	}
	return ids
}

// LcoreAny is what LcoreID returns on a thread that is not an EAL lcore.
const LcoreAny = uint(^uint32(0))

var _ [1]struct{} = [uint32(LcoreAny) - C.LCORE_ID_ANY + 1]struct{}{}

// LcoreID returns the lcore id of the calling thread (rte_lcore_id), or
// LcoreAny. It is meaningful only on a goroutine locked to its thread, such
// as a function run by Launch.
func LcoreID() uint { return uint(C.lb_lcore_id()) }

// SocketOf returns the NUMA socket of an lcore.
func SocketOf(lcore uint) int { return int(C.lb_lcore_socket(C.uint(lcore))) }
