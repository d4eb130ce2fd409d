package datapath

import (
	"math/bits"
	"unsafe"
)

// A bucketised cuckoo index in the style of DPDK's rte_hash and VPP's bihash, shared by the
// connection and persistence tables: a power-of-two array of 64-byte buckets, each one cache line
// of (tag, ref) slots. A key has two candidate buckets, its home (from the low bits of its hash)
// and an alternate derived from the home and the key's 16-bit tag alone (partial-key cuckoo), so
// a key can be moved between them without reading its entry. A lookup reads the home bucket and,
// only when the key is not there, the alternate; tags are compared first, the entry only on a
// tag match. Insertion fills the home bucket first, then the alternate, then makes room by a
// bounded breadth-first search for a chain of moves (cuckoo displacement). Removal clears one
// slot: no tombstones, nothing for later lookups to step over. Each bucket counts the keys of
// its own that sit in their alternate, so a key that is not at home is known absent when that
// count is 0: a miss (every new flow) reads one bucket, not two.

// bucketSlots is the number of slots in a bucket: 10 × (2-byte tag + 4-byte ref) + 4 bytes of
// padding fill one 64-byte cache line.
const bucketSlots = 10

// indexKeysPerBucket sizes an index: at most 8 keys per 10-slot bucket when its table is full
// (load ≤ 0.8), far below the ~0.98 a two-choice cuckoo of 10-slot buckets can reach, so a
// displacement search practically always finds a short chain.
const indexKeysPerBucket = 8

// cacheLine is the alignment of the bucket array, so that every bucket is one line.
const cacheLine = 64

// cuckooQueueLen bounds a displacement search (buckets visited): it stays bounded in time even
// when it fails, and then the insert fails cleanly.
const cuckooQueueLen = 128

// indexBucket is one cache line of slots.
type indexBucket struct {
	// tags holds each key's 15-bit tag (never 0), with tagInAlt set when the key sits in its
	// alternate bucket; 0 marks an empty slot.
	tags  [bucketSlots]uint16
	refs  [bucketSlots]uint32 // what the table stores for the key; meaningless in an empty slot
	spill uint16              // keys whose home is this bucket that sit in their alternate
	_     [2]byte             // to 64 bytes
}

// tagInAlt marks a stored tag whose key is in its alternate bucket; the tag proper is the
// other 15 bits.
const (
	tagInAlt = 0x8000
	tagBits  = 0x7fff
)

// cuckooNode is a bucket reached by a displacement search: the key in slot of the parent node's
// bucket can move here. The two candidate buckets of the key being placed have parent -1.
type cuckooNode struct {
	bucket uint32
	parent int32
	slot   uint8
}

// bucketIndex is the index: buckets, and the displacement search's queue, allocated once.
type bucketIndex struct {
	buckets []indexBucket // cache-line aligned, a power of two long
	mask    uint32        // len(buckets) - 1
	keys    int           // keys placed
	moves   uint64        // keys moved by displacement, for tests and benchmarks
	queue   []cuckooNode
}

// newBucketIndex returns an index with room for keys keys at indexKeysPerBucket per bucket.
func newBucketIndex(keys int) bucketIndex {
	n := ceilPow2(max((keys+indexKeysPerBucket-1)/indexKeysPerBucket, 1))
	return bucketIndex{buckets: alignedBuckets(n), mask: uint32(n - 1), queue: make([]cuckooNode, cuckooQueueLen)}
}

// alignedBuckets allocates n buckets starting on a cache line. The heap guarantees no alignment
// beyond 8 bytes, so the array is carved from a byte allocation one line longer (pointer-free,
// never moved, kept alive by the slice's interior pointer).
func alignedBuckets(n int) []indexBucket {
	raw := make([]byte, n*int(unsafe.Sizeof(indexBucket{}))+cacheLine)
	p := unsafe.Pointer(&raw[0])
	return unsafe.Slice((*indexBucket)(unsafe.Add(p, (cacheLine-uintptr(p)%cacheLine)%cacheLine)), n)
}

// bytes returns the index's allocated memory, the alignment slack included.
func (x *bucketIndex) bytes() int {
	return len(x.buckets)*int(unsafe.Sizeof(indexBucket{})) + cacheLine + len(x.queue)*int(unsafe.Sizeof(cuckooNode{}))
}

// home returns a key's home bucket and its tag, from independent bits of its 64-bit hash.
func (x *bucketIndex) home(h uint64) (uint32, uint16) {
	tag := uint16(h>>48) & tagBits
	if tag == 0 {
		tag = 1 // 0 marks empty slots
	}
	return uint32(h) & x.mask, tag
}

// alt returns the other candidate bucket of a key with this tag in bucket b. It is symmetric
// (alt(alt(b)) = b) and, with two buckets or more, never b itself.
func (x *bucketIndex) alt(b uint32, tag uint16) uint32 {
	m := uint32(tag&tagBits) * 0x9e3779b1 // spread the tag over the bucket number's bits
	d := (m ^ m>>16) & x.mask
	if d == 0 {
		d = 1 & x.mask
	}
	return b ^ d
}

// Lane arithmetic for matching a bucket's tags four at a time (SWAR): one compare per word
// instead of a branch per slot, whose outcome a lookup at random flows cannot predict.
const (
	lanes16 = 0x0001000100010001
	low15   = 0x7fff7fff7fff7fff
)

// zeroLanes returns the high bit of every 16-bit lane of v that is zero (exact: no borrow
// between lanes).
func zeroLanes(v uint64) uint64 { return ^((v&low15 + low15) | v | low15) }

// match returns a mask of bk's slots whose tag is tag (bit s for slot s), wherever the keys'
// homes are; tag 0 gives the empty slots.
func (bk *indexBucket) match(tag uint16) uint32 {
	t := &bk.tags
	b := uint64(tag) * lanes16
	w0 := (uint64(t[0]) | uint64(t[1])<<16 | uint64(t[2])<<32 | uint64(t[3])<<48) & low15
	w1 := (uint64(t[4]) | uint64(t[5])<<16 | uint64(t[6])<<32 | uint64(t[7])<<48) & low15
	w2 := (uint64(t[8]) | uint64(t[9])<<16) & low15
	return gatherLanes(zeroLanes(w0^b)) | gatherLanes(zeroLanes(w1^b))<<4 | gatherLanes(zeroLanes((w2^b)|0xffffffff<<32))<<8
}

// gatherLanes packs the high bits of z's four lanes (bits 15, 31, 47, 63) into bits 0–3: moved
// to bits 0, 16, 32, 48, one multiply adds them into bits 48–51 without carries.
func gatherLanes(z uint64) uint32 {
	return uint32((z >> 15 & lanes16) * (1<<48 | 2<<32 | 4<<16 | 8) >> 48)
}

// freeSlot returns the first empty slot of bucket b, or -1.
func (x *bucketIndex) freeSlot(b uint32) int {
	if m := x.buckets[b].match(0); m != 0 {
		return bits.TrailingZeros32(m)
	}
	return -1
}

// place adds the key with hash h and reference ref. It reports false, leaving the index as it
// was, when no displacement chain within the search bound makes room.
func (x *bucketIndex) place(h uint64, ref uint32) bool {
	b1, tag := x.home(h)
	b := b1
	s := x.freeSlot(b1)
	if s < 0 {
		b = x.alt(b1, tag)
		if s = x.freeSlot(b); s < 0 {
			if b, s = x.makeRoom(b1, tag); s < 0 {
				return false
			}
		}
	}
	if b != b1 {
		tag |= tagInAlt
		x.buckets[b1].spill++
	}
	x.buckets[b].tags[s], x.buckets[b].refs[s] = tag, ref
	x.keys++
	return true
}

// makeRoom frees a slot in one of the two (full) candidate buckets of a key with home b1 and
// this tag by a breadth-first search for the shortest chain of keys that can each move to their
// other bucket, the last one into an empty slot, and returns that bucket and slot, or -1.
func (x *bucketIndex) makeRoom(b1 uint32, tag uint16) (uint32, int) {
	q := x.queue
	q[0] = cuckooNode{bucket: b1, parent: -1}
	n := 1
	if b2 := x.alt(b1, tag); b2 != b1 {
		q[1] = cuckooNode{bucket: b2, parent: -1}
		n = 2
	}
	for head := 0; head < n; head++ {
		nd := q[head]
		bk := &x.buckets[nd.bucket]
		for s, t := range bk.tags { // every slot is in use: the node's bucket is full
			a := x.alt(nd.bucket, t)
			if a == nd.bucket || x.onPath(int32(head), a) {
				continue
			}
			if f := x.freeSlot(a); f >= 0 {
				return x.shift(cuckooNode{bucket: a, parent: int32(head), slot: uint8(s)}, f)
			}
			if n < len(q) {
				q[n] = cuckooNode{bucket: a, parent: int32(head), slot: uint8(s)}
				n++
			}
		}
	}
	return 0, -1
}

// onPath reports whether bucket b is on the chain from node i back to its root: a chain must not
// visit a bucket twice, or a later move would take a key an earlier one put there.
func (x *bucketIndex) onPath(i int32, b uint32) bool {
	for ; i >= 0; i = x.queue[i].parent {
		if x.queue[i].bucket == b {
			return true
		}
	}
	return false
}

// shift carries out the chain ending at node nd, whose bucket has slot free empty: each key moves
// into the slot its successor vacated, from the end back to the root, whose vacated slot it
// returns.
func (x *bucketIndex) shift(nd cuckooNode, free int) (uint32, int) {
	for nd.parent >= 0 {
		from := &x.buckets[x.queue[nd.parent].bucket]
		to := &x.buckets[nd.bucket]
		t := from.tags[nd.slot]
		if t&tagInAlt == 0 { // leaves its home for its alternate
			from.spill++
		} else { // goes back home
			to.spill--
		}
		to.tags[free], to.refs[free] = t^tagInAlt, from.refs[nd.slot]
		from.tags[nd.slot] = 0
		free = int(nd.slot)
		nd = x.queue[nd.parent]
		x.moves++
	}
	return nd.bucket, free
}

// unplace removes the key with hash h and reference ref; a key not there is ignored.
func (x *bucketIndex) unplace(h uint64, ref uint32) {
	b1, tag := x.home(h)
	if !x.take(b1, tag, ref) && x.buckets[b1].spill != 0 {
		x.take(x.alt(b1, tag), tag, ref)
	}
}

// take clears the slot of bucket b holding (tag, ref), if there is one.
func (x *bucketIndex) take(b uint32, tag uint16, ref uint32) bool {
	bk := &x.buckets[b]
	for m := bk.match(tag); m != 0; m &= m - 1 {
		if s := bits.TrailingZeros32(m); bk.refs[s] == ref {
			if bk.tags[s]&tagInAlt != 0 {
				x.buckets[x.alt(b, tag)].spill--
			}
			bk.tags[s], bk.refs[s] = 0, 0
			x.keys--
			return true
		}
	}
	return false
}
