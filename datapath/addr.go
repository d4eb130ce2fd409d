package datapath

import (
	"encoding/binary"
	"net/netip"
)

// addr is an IP address in 16-byte form split into two words, IPv4 as v4-mapped.
// Unlike netip.Addr it holds no pointer, so tables of addrs are never scanned by the
// garbage collector, and comparing two is two integer compares.
type addr struct{ hi, lo uint64 }

// v4Mapped is the high half of the low word of a v4-mapped address (::ffff:0:0/96).
const v4Mapped = 0xffff << 32

// addrFrom4 returns the v4-mapped form of an IPv4 address given as a big-endian uint32.
func addrFrom4(v uint32) addr { return addr{0, v4Mapped | uint64(v)} }

// addrFromNetip converts a netip.Addr (IPv4 or IPv6; zone dropped).
func addrFromNetip(a netip.Addr) addr {
	b := a.As16()
	return addr{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// is4 reports whether a is a v4-mapped IPv4 address.
func (a addr) is4() bool { return a.hi == 0 && a.lo>>32 == 0xffff }

// v4 returns the IPv4 address as a big-endian uint32; meaningful only if is4.
func (a addr) v4() uint32 { return uint32(a.lo) }

// netip converts back for the control path (stats, dumps).
func (a addr) netip() netip.Addr {
	if a.is4() {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a.v4())
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b)
}

// v4Of returns the big-endian uint32 form of an IPv4 netip.Addr.
func v4Of(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// addrFrom16 reads a 16-byte IPv6 address from the start of b.
func addrFrom16(b []byte) addr {
	_ = b[15]
	return addr{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
}

// put16 writes a as 16 bytes at the start of b.
func (a addr) put16(b []byte) {
	_ = b[15]
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:16], a.lo)
}

// isZero reports whether a is the IPv6 unspecified address ::.
func (a addr) isZero() bool { return a.hi|a.lo == 0 }

// isLinkLocal6 reports whether a is an IPv6 link-local unicast address (fe80::/10).
func (a addr) isLinkLocal6() bool { return a.hi>>54 == 0xfe80>>6 }

// isMulticast6 reports whether a is an IPv6 multicast address (ff00::/8).
func (a addr) isMulticast6() bool { return a.hi>>56 == 0xff }

// and returns a masked by m.
func (a addr) and(m addr) addr { return addr{a.hi & m.hi, a.lo & m.lo} }

// prefixMask returns the mask of a prefix of bits bits for a's family. For IPv4 the v4-mapped
// upper 96 bits are kept, so a masked IPv4 address is still a v4-mapped IPv4 address.
func prefixMask(v4 bool, bits int) addr {
	if v4 {
		bits = 96 + min(max(bits, 0), 32)
	}
	bits = min(max(bits, 0), 128)
	var m addr
	switch {
	case bits >= 64:
		m.hi = ^uint64(0)
		if bits > 64 {
			m.lo = ^uint64(0) << (128 - bits)
		}
	case bits > 0:
		m.hi = ^uint64(0) << (64 - bits)
	}
	return m
}

// solicitedNode returns the solicited-node multicast address of a (RFC 4291 §2.7.1).
func solicitedNode(a addr) addr {
	return addr{0xff02 << 48, 0x1ff000000 | a.lo&0xffffff}
}

// multicastMAC returns the Ethernet address an IPv6 multicast group maps to (RFC 2464 §7).
func multicastMAC(a addr) [6]byte {
	return [6]byte{0x33, 0x33, byte(a.lo >> 24), byte(a.lo >> 16), byte(a.lo >> 8), byte(a.lo)}
}

// linkLocalFromMAC returns the EUI-64 link-local address of an interface with MAC m
// (RFC 4291 appendix A): fe80::, then the MAC with the universal/local bit flipped and
// ff:fe inserted in the middle.
func linkLocalFromMAC(m [6]byte) addr {
	return addr{0xfe80 << 48, uint64(m[0]^0x02)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 |
		0xfffe<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])}
}

// allNodes is ff02::1.
var allNodes = addr{0xff02 << 48, 1}
