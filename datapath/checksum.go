package datapath

import "encoding/binary"

// Internet checksum helpers (RFC 1071) and incremental updates (RFC 1624).
//
// The fast path never sums a whole packet: a rewrite computes a delta, the ones' complement sum
// of ~old + new over the changed 16-bit words, and applies it as HC' = ~(~HC + delta)
// (RFC 1624 eqn. 3), which stays correct where the older HC - ~m - m' form produced -0.

// csumAdd returns a + b in 16-bit ones' complement arithmetic (end-around carry).
func csumAdd(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}

// csumFold folds a 32-bit accumulator of 16-bit words to 16 bits with end-around carry.
func csumFold(s uint32) uint16 {
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// csumUpdate applies delta (a ones' complement sum of ~old + new words) to checksum hc.
func csumUpdate(hc, delta uint16) uint16 { return ^csumAdd(^hc, delta) }

// csumDelta16 returns the delta for replacing the word old with new.
func csumDelta16(old, new uint16) uint16 { return csumAdd(^old, new) }

// words64 returns the sum of the four 16-bit words of x, unfolded (at most 0x3fffc).
func words64(x uint64) uint32 {
	return uint32(x>>48) + uint32(x>>32&0xffff) + uint32(x>>16&0xffff) + uint32(x&0xffff)
}

// csumDeltaAddr returns the delta for replacing address old with new. For v4-mapped addresses
// the equal upper words contribute ~w + w = -0, which leaves any sum unchanged, so the same
// delta serves the IPv4 header, the IPv4 pseudo-header and the IPv6 pseudo-header.
func csumDeltaAddr(old, new addr) uint16 {
	s := words64(^old.hi) + words64(^old.lo) + words64(new.hi) + words64(new.lo)
	return csumFold(s)
}

// checksumSum returns the unfolded ones' complement sum of b's 16-bit big-endian words added to
// initial; an odd trailing byte is padded with zero. Not for the forwarding fast path: it serves
// messages the engine verifies or builds whole (ICMP errors, NDP), the sampled transport
// checksums, and tests. It adds 32-bit words, eight bytes a load: congruent to the 16-bit sum
// modulo 0xffff (2^16 ≡ 1), so the folded result is the same.
func checksumSum(b []byte, initial uint32) uint32 {
	s := uint64(initial)
	for ; len(b) >= 8; b = b[8:] {
		x := binary.BigEndian.Uint64(b)
		s += x>>32 + x&0xffffffff // fewer than 2^31 loads fit in 64 bits
	}
	if len(b) >= 4 {
		s += uint64(binary.BigEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	s = s&0xffffffff + s>>32 // < 2^33
	s = s&0xffffffff + s>>32 // < 2^32
	return uint32(s)
}

// Checksum returns the Internet checksum of b (RFC 1071), i.e. the complement of its sum.
func Checksum(b []byte) uint16 { return ^csumFold(checksumSum(b, 0)) }

// ipv4HeaderValid reports whether an IPv4 header's checksum verifies: the sum over the header,
// checksum field included, must be -0 (0xffff). len(h) is a multiple of 4 (IHL words), so it
// sums 32-bit words as ipv4Sum20 does, which folds to the same result with half the additions.
func ipv4HeaderValid(h []byte) bool {
	if len(h) < IPv4MinSize {
		return false // not a header; Decode never asks
	}
	s := ipv4Sum20((*[IPv4MinSize]byte)(h))
	for h = h[IPv4MinSize:]; len(h) >= 4; h = h[4:] {
		s += uint64(binary.LittleEndian.Uint32(h))
	}
	return sumIsNegZero(s)
}

// ipv4Header20Valid is ipv4HeaderValid for a header without options, the common case: five
// loads and a fold, no loop, small enough to inline into Decode.
func ipv4Header20Valid(h *[IPv4MinSize]byte) bool { return sumIsNegZero(ipv4Sum20(h)) }

// ipv4Sum20 returns the unfolded sum of the first 20 header bytes as five 32-bit words in
// native (little-endian) order: a ones' complement sum is byte-order independent (RFC 1071
// §2(B)) and its -0, 0xffff, reads the same both ways, so no byte swaps are needed.
func ipv4Sum20(h *[IPv4MinSize]byte) uint64 {
	return uint64(binary.LittleEndian.Uint32(h[0:])) + uint64(binary.LittleEndian.Uint32(h[4:])) +
		uint64(binary.LittleEndian.Uint32(h[8:])) + uint64(binary.LittleEndian.Uint32(h[12:])) +
		uint64(binary.LittleEndian.Uint32(h[16:]))
}

// sumIsNegZero reports whether an unfolded sum of 32-bit words (fewer than 2^32 of them) folds
// to -0: it is then a non-zero multiple of 0xffff, which the folds leave as 0xffff exactly.
func sumIsNegZero(s uint64) bool {
	s = s&0xffffffff + s>>32 // < 2^33
	s = s&0xffff + s>>16     // < 2^17 + 2^16
	s = s&0xffff + s>>16     // <= 0x10001
	s = s&0xffff + s>>16     // <= 0xffff
	return s == 0xffff
}

// pseudoSum6 returns the unfolded sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses,
// upper-layer length and next header.
func pseudoSum6(src, dst addr, length int, proto uint8) uint32 {
	return words64(src.hi) + words64(src.lo) + words64(dst.hi) + words64(dst.lo) +
		uint32(length>>16) + uint32(length&0xffff) + uint32(proto)
}

// icmpChecksumValid reports whether the ICMP or ICMPv6 message of a parsed packet verifies.
func icmpChecksumValid(frame []byte, p *Parsed) bool {
	msg := frame[p.L4Off:p.L3End]
	var init uint32
	if p.isV6() {
		init = pseudoSum6(p.src, p.dst, len(msg), ProtoICMPv6)
	}
	return csumFold(checksumSum(msg, init)) == 0xffff
}

// setICMPChecksum computes the checksum of an ICMP (v6: ICMPv6 between src and dst) message
// from scratch and stores it.
func setICMPChecksum(msg []byte, v6 bool, src, dst addr) {
	ICMP(msg).SetChecksum(0)
	var init uint32
	if v6 {
		init = pseudoSum6(src, dst, len(msg), ProtoICMPv6)
	}
	ICMP(msg).SetChecksum(^csumFold(checksumSum(msg, init)))
}
