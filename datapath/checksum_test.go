package datapath

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := csumFold(checksumSum(b, 0)); got != 0xddf2 {
		t.Fatalf("sum %#x, want 0xddf2", got)
	}
	if got := Checksum(b); got != ^uint16(0xddf2) {
		t.Fatalf("checksum %#x", got)
	}
	if got := Checksum([]byte{0x01}); got != ^uint16(0x0100) {
		t.Fatalf("odd length: %#x", got)
	}
}

// Incremental updates must agree exactly with a recomputation from scratch (RFC 1624 eqn. 3).
func TestIncrementalUpdateMatchesRecompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20000; iter++ {
		b := make([]byte, 4+2*rng.IntN(30)) // word 0 holds the checksum
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if iter%7 == 0 { // all-zero data: the checksum is 0xffff
			clear(b)
		}
		binary.BigEndian.PutUint16(b, 0)
		binary.BigEndian.PutUint16(b, uint16(^refSum(b)))
		hc := binary.BigEndian.Uint16(b)
		w := 1 + rng.IntN(len(b)/2-1)
		old := binary.BigEndian.Uint16(b[2*w:])
		nw := uint16(rng.Uint32())
		if iter%5 == 0 {
			nw = ^old
		}
		binary.BigEndian.PutUint16(b[2*w:], nw)
		got := csumUpdate(hc, csumDelta16(old, nw))
		binary.BigEndian.PutUint16(b, 0)
		want := uint16(^refSum(b))
		if got != want {
			t.Fatalf("iter %d: incremental %#x, recomputed %#x", iter, got, want)
		}
	}
}

func TestAddressDeltaV4(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 10000; iter++ {
		var hdr [20]byte
		for i := range hdr {
			hdr[i] = byte(rng.Uint32())
		}
		hdr[10], hdr[11] = 0, 0
		binary.BigEndian.PutUint16(hdr[10:], uint16(^refSum(hdr[:])))
		if !ipv4HeaderValid(hdr[:]) {
			t.Fatal("freshly summed header does not verify")
		}
		oldSrc, oldDst := binary.BigEndian.Uint32(hdr[12:]), binary.BigEndian.Uint32(hdr[16:])
		newSrc, newDst := rng.Uint32(), rng.Uint32()
		d := csumAdd(csumDeltaAddr(addrFrom4(oldSrc), addrFrom4(newSrc)), csumDeltaAddr(addrFrom4(oldDst), addrFrom4(newDst)))
		binary.BigEndian.PutUint32(hdr[12:], newSrc)
		binary.BigEndian.PutUint32(hdr[16:], newDst)
		binary.BigEndian.PutUint16(hdr[10:], csumUpdate(binary.BigEndian.Uint16(hdr[10:]), d))
		if !ipv4HeaderValid(hdr[:]) {
			t.Fatalf("iter %d: header invalid after incremental address update", iter)
		}
		// Undoing applies the complement.
		binary.BigEndian.PutUint32(hdr[12:], oldSrc)
		binary.BigEndian.PutUint32(hdr[16:], oldDst)
		binary.BigEndian.PutUint16(hdr[10:], csumUpdate(binary.BigEndian.Uint16(hdr[10:]), ^d))
		if !ipv4HeaderValid(hdr[:]) {
			t.Fatalf("iter %d: header invalid after undo", iter)
		}
	}
}

func TestIPv4HeaderValidRejects(t *testing.T) {
	b := client(1, TCPSyn).build(t)
	h := b[EthernetHeaderSize : EthernetHeaderSize+20]
	if !ipv4HeaderValid(h) {
		t.Fatal("valid header rejected")
	}
	for i := range h {
		c := append([]byte(nil), h...)
		c[i] ^= 0x10
		if ipv4HeaderValid(c) {
			t.Fatalf("flipped bit in byte %d accepted", i)
		}
	}
}
