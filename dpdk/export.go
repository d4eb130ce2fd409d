package dpdk

// This file holds the only //export of the package. Its preamble must not
// contain C definitions (cgo copies it into two translation units), so it
// includes nothing from DPDK.

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
)

// lbLcoreMain is called once per Launch on an EAL lcore thread, through the
// C trampoline lb_lcore_entry; h is a cgo.Handle of a func() int.
//
//export lbLcoreMain
func lbLcoreMain(h C.uintptr_t) C.int {
	// Without the lock the runtime may clone new Ms from this thread, and
	// they would inherit its name and its CPU pinning.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hd := cgo.Handle(h)
	fn := hd.Value().(func() int)
	hd.Delete()
	return C.int(fn())
}
