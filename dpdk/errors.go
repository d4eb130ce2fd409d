package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Errno is a DPDK error number (an errno value or an RTE-specific code).
type Errno int

// Error returns the rte_strerror text.
func (e Errno) Error() string {
	var buf [128]byte
	C.lb_strerror(C.int(e), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i])
		}
	}
	return string(buf[:])
}

// Is makes errors.Is(err, syscall.EEXIST) and friends work.
func (e Errno) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && int(t) == int(e)
}

// errno turns a negative C return code into an error; rc >= 0 is success.
func errno(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return Errno(-rc)
}

// wrap prefixes a non-nil error with the operation that failed.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("dpdk: "+format+": %w", append(args, err)...)
}
