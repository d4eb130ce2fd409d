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
