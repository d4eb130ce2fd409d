package datapath

// prefetchLines asks the CPU to bring the cache lines at lines[:n] in (PREFETCHT0), without
// waiting for them: one call per burst stage, the only assembly of the engine.
//
//go:noescape
func prefetchLines(lines *uintptr, n int)
