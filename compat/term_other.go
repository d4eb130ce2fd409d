//go:build !linux

package compat

// TerminalRows returns 0 (not a terminal) where the window size is not queried.
func TerminalRows(fd uintptr) int { return 0 }
