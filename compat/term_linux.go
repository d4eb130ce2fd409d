package compat

import (
	"syscall"
	"unsafe"
)

// TerminalRows returns the height of the terminal on file descriptor fd (stdout: 1),
// or 0 when fd is not a terminal, which NewOfmt turns into 24 (ofmt_update_winsize).
func TerminalRows(fd uintptr) int {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if e != 0 || ws.Row == 0 || ws.Col == 0 {
		return 0
	}
	return int(ws.Row)
}
