package datapath

import "encoding/binary"

// IPv6 is a view of an IPv6 fixed header (RFC 8200). Extension headers follow it and are walked
// by the parser, not by this view.
type IPv6 []byte

// IPv6 fixed header layout.
const (
	ipv6VersTCFlow = 0  // version (4 bits), traffic class (8), flow label (20)
	ipv6PayloadLen = 4  // length of everything after the fixed header
	ipv6NextHeader = 6  // first extension header or upper-layer protocol
	ipv6HopLimit   = 7  // hop limit; not covered by any checksum
	ipv6SrcAddr    = 8  // source address
	ipv6DstAddr    = 24 // destination address

	// IPv6HeaderSize is the size of the fixed header.
	IPv6HeaderSize = 40
)

// IPv6 next-header values the parser treats specially.
const (
	ProtoICMPv6 uint8 = 58

	ipv6HopByHop uint8 = 0   // hop-by-hop options: skipped
	ipv6Routing  uint8 = 43  // routing header: changes the pseudo-header destination, not balanced
	ipv6Fragment uint8 = 44  // fragment header: never balanced (spec §6.5)
	ipv6DestOpts uint8 = 60  // destination options: skipped
	ipv6Mobility uint8 = 135 // mobility header
	ipv6HIP      uint8 = 139 // host identity protocol
	ipv6Shim6    uint8 = 140 // shim6
	ipv6Exp1     uint8 = 253 // experimentation (RFC 3692)
	ipv6Exp2     uint8 = 254
	ipv6FragSize       = 8 // size of a fragment header

	// maxIPv6ExtHeaders bounds the skipped headers a packet may carry, so a crafted chain of
	// empty options headers costs the parser a fixed amount of work.
	maxIPv6ExtHeaders = 4
)

// Version returns the IP version nibble.
func (b IPv6) Version() uint8 { return b[ipv6VersTCFlow] >> 4 }

// PayloadLen returns the payload length field.
func (b IPv6) PayloadLen() int { return int(binary.BigEndian.Uint16(b[ipv6PayloadLen:])) }

// NextHeader returns the next header field of the fixed header.
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// SetHopLimit sets the hop limit.
func (b IPv6) SetHopLimit(h uint8) { b[ipv6HopLimit] = h }

// Src returns the source address.
func (b IPv6) Src() addr { return addrFrom16(b[ipv6SrcAddr:]) }

// Dst returns the destination address.
func (b IPv6) Dst() addr { return addrFrom16(b[ipv6DstAddr:]) }

// SetSrc sets the source address.
func (b IPv6) SetSrc(a addr) { a.put16(b[ipv6SrcAddr:]) }

// SetDst sets the destination address.
func (b IPv6) SetDst(a addr) { a.put16(b[ipv6DstAddr:]) }

// SetFixed writes version 6, traffic class and flow label 0, the payload length, next header
// and hop limit: everything but the addresses.
func (b IPv6) SetFixed(payloadLen int, next, hopLimit uint8) {
	binary.BigEndian.PutUint32(b[ipv6VersTCFlow:], 6<<28)
	binary.BigEndian.PutUint16(b[ipv6PayloadLen:], uint16(payloadLen))
	b[ipv6NextHeader] = next
	b[ipv6HopLimit] = hopLimit
}

// isUnbalanceableExt reports whether nh is an extension header the engine does not walk: the
// packet cannot be rewritten safely (a routing header changes whose address the transport
// checksum covers), so a packet carrying one toward a VIP is dropped.
func isUnbalanceableExt(nh uint8) bool {
	switch nh {
	case ipv6Routing, ipv6Mobility, ipv6HIP, ipv6Shim6, ipv6Exp1, ipv6Exp2:
		return true
	}
	return false
}
