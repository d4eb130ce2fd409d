package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"time"
)

// Launch runs fn on the worker lcore (model A: rte_eal_remote_launch of a C
// trampoline that enters Go once). fn runs on the lcore's own pinned thread,
// locked to it, and normally loops until a stop flag is set; its return
// value is reported by Wait. A panic in fn crashes the process.
func Launch(lcore uint, fn func() int) error {
	h := cgo.NewHandle(fn)
	if rc := C.lb_launch(C.uint(lcore), C.uintptr_t(h)); rc < 0 {
		h.Delete()
		return wrap(Errno(-rc), "launch on lcore %d", lcore)
	}
	return nil
}

// waitPoll is how often Wait checks an lcore. EAL's own wait spins on the
// CPU; sleeping in Go instead leaves the main lcore's CPU to the control
// plane while workers run.
const waitPoll = 200 * time.Microsecond

// Wait waits for the function launched on lcore to return and returns its
// result (rte_eal_wait_lcore); it returns 0 at once if nothing runs there.
func Wait(lcore uint) int {
	for C.lb_lcore_running(C.uint(lcore)) != 0 {
		time.Sleep(waitPoll)
	}
	return int(C.lb_wait_lcore(C.uint(lcore)))
}

// WaitAll waits for every worker lcore to finish (rte_eal_mp_wait_lcore).
func WaitAll() {
	for _, l := range WorkerLcores() {
		for C.lb_lcore_running(C.uint(l)) != 0 {
			time.Sleep(waitPoll)
		}
	}
	C.lb_wait_all()
}

// RegisterThread locks the calling goroutine to its thread and registers
// the thread with EAL (model B, rte_thread_register), returning the lcore id
// it was given. Pair it with UnregisterThread on the same goroutine.
func RegisterThread() (uint, error) {
	runtime.LockOSThread()
	rc := C.lb_thread_register()
	if rc < 0 {
		runtime.UnlockOSThread()
		return 0, wrap(Errno(-rc), "rte_thread_register")
	}
	return uint(rc), nil
}

// UnregisterThread releases the lcore id of the calling thread and unlocks
// the goroutine.
func UnregisterThread() {
	C.lb_thread_unregister()
	runtime.UnlockOSThread()
}
