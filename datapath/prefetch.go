package datapath

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Staged lookups, as DPDK's l3fwd and VPP's graph nodes do per burst. At a million flows every
// packet's index bucket and entry miss the cache; looked up one packet at a time, those misses
// are paid one after another. PrefetchBurst asks for every bucket of the burst first, then,
// once they arrive, for every entry they point at, so the misses overlap and Process finds the
// lines in cache. A small table stays in cache anyway: there it would only add work.

// BurstMax is the largest burst PrefetchBurst stages (the worker's rx burst).
const BurstMax = 32

// prefetchMinEntries is the table occupancy from which staging pays: 32 Ki entries with their
// index are about 5 MiB, beyond the L2 of the cores this runs on.
const prefetchMinEntries = 1 << 15

// prefetchState is the scratch of one staged burst, part of the engine.
type prefetchState struct {
	hash  [BurstMax]uint64
	ok    [BurstMax]bool
	lines [BurstMax]uintptr
}

// Prefetching reports whether PrefetchBurst would do anything, so a caller can skip building
// its frame list.
func (e *Engine) Prefetching() bool { return e.conns.count() >= e.prefetchMin }

// PrefetchBurst warms the cache for the connection lookups of frames, which Process is about to
// be given in order. It changes nothing the engine decides.
func (e *Engine) PrefetchBurst(frames [][]byte) {
	if !e.Prefetching() {
		return
	}
	pf := &e.pf
	t := &e.conns
	n := min(len(frames), BurstMax)
	k := 0
	for i := 0; i < n; i++ {
		h, ok := t.peekHash(frames[i])
		pf.hash[i], pf.ok[i] = h, ok
		if ok {
			b, _ := t.index.home(h)
			pf.lines[k] = uintptr(unsafe.Pointer(&t.index.buckets[b]))
			k++
		}
	}
	prefetchLines(&pf.lines[0], k)
	k = 0
	for i := 0; i < n; i++ {
		if !pf.ok[i] {
			continue
		}
		b, tag := t.index.home(pf.hash[i])
		bk := &t.index.buckets[b]
		if m := bk.match(tag); m != 0 {
			pf.lines[k] = uintptr(unsafe.Pointer(&t.entries[connRef(bk.refs[bits.TrailingZeros32(m)]).entry()])) // one line
			k++
		} else if bk.spill != 0 { // a key displaced to its alternate bucket: the lookup reads that next
			pf.lines[k] = uintptr(unsafe.Pointer(&t.index.buckets[t.index.alt(b, tag)]))
			k++
		}
	}
	prefetchLines(&pf.lines[0], k)
}

// peekHash returns the connection hash of an untagged IPv4 or IPv6 TCP/UDP frame, as
// handleIP computes it after the whole parse, or false for anything else. It trusts the
// headers only as far as the frame's length: a wrong guess costs a useless prefetch.
func (t *connTable) peekHash(f []byte) (uint64, bool) {
	if len(f) < 14+20+4 {
		return 0, false
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case EtherTypeIPv4:
		l4 := 14 + int(f[14]&0x0f)*4
		proto := f[14+9]
		if l4 < 34 || len(f) < l4+4 || (proto != ProtoTCP && proto != ProtoUDP) {
			return 0, false
		}
		src, dst := addrFrom4(binary.BigEndian.Uint32(f[26:])), addrFrom4(binary.BigEndian.Uint32(f[30:]))
		return t.hash(src, dst, binary.BigEndian.Uint16(f[l4:]), binary.BigEndian.Uint16(f[l4+2:]), proto), true
	case EtherTypeIPv6:
		proto := f[14+6]
		if len(f) < 54+4 || (proto != ProtoTCP && proto != ProtoUDP) {
			return 0, false
		}
		src, dst := addrFrom16(f[22:38]), addrFrom16(f[38:54])
		return t.hash(src, dst, binary.BigEndian.Uint16(f[54:]), binary.BigEndian.Uint16(f[56:]), proto), true
	}
	return 0, false
}
