//go:build !amd64

package datapath

// prefetchLines is a no-op where the engine has no prefetch instruction: the staged lookup
// still overlaps its loads through the bucket reads of its second stage.
func prefetchLines(lines *uintptr, n int) {}
