package datapath

import "encoding/binary"

// ICMP is a view of an ICMPv4 (RFC 792) or ICMPv6 (RFC 4443) message: both share the first
// four bytes (type, code, checksum) and keep a 4-byte field before the body.
type ICMP []byte

// ICMP layout common to both versions.
const (
	icmpType     = 0 // message type
	icmpCode     = 1 // code
	icmpChecksum = 2 // checksum (ICMPv6: over a pseudo-header too)
	icmpRest     = 4 // identifier/sequence, MTU, NDP flags, unused
	icmpBody     = 8 // quoted packet of error messages, NDP target address

	// ICMPHeaderSize is the size of the header the parser requires of every ICMP message.
	ICMPHeaderSize = 8
)

// ICMPv4 types and codes the engine handles (spec §6.8).
const (
	ICMPv4EchoReply      uint8 = 0
	ICMPv4DestUnreach    uint8 = 3
	ICMPv4EchoRequest    uint8 = 8
	ICMPv4FragNeededCode uint8 = 4 // Destination Unreachable: fragmentation needed and DF set
)

// ICMPv6 types the engine handles.
const (
	ICMPv6PacketTooBig  uint8 = 2
	ICMPv6EchoRequest   uint8 = 128
	ICMPv6EchoReply     uint8 = 129
	ICMPv6RouterSolicit uint8 = 133
	ICMPv6RouterAdvert  uint8 = 134
	ICMPv6NeighSolicit  uint8 = 135
	ICMPv6NeighAdvert   uint8 = 136
	ICMPv6Redirect      uint8 = 137
)

// Type returns the message type.
func (b ICMP) Type() uint8 { return b[icmpType] }

// Code returns the code.
func (b ICMP) Code() uint8 { return b[icmpCode] }

// Checksum returns the checksum field.
func (b ICMP) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// SetChecksum sets the checksum field.
func (b ICMP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], c) }

// TypeCodeWord returns type and code as the 16-bit word the checksum sees.
func (b ICMP) TypeCodeWord() uint16 { return binary.BigEndian.Uint16(b[icmpType:]) }

// SetType sets the message type (checksum not updated).
func (b ICMP) SetType(t uint8) { b[icmpType] = t }

// Body returns what follows the 8-byte header: the quoted packet of an error message.
func (b ICMP) Body() []byte { return b[icmpBody:] }

// NDP message layout (RFC 4861 §4.3, §4.4): Neighbor Solicitation and Advertisement share it.
const (
	ndpFlags       = 4  // NA: R, S, O bits in the first byte after the checksum
	ndpTarget      = 8  // target address
	ndpOptions     = 24 // first option
	ndpMinSize     = 24 // message without options
	ndpOptLLASize  = 8  // a link-layer address option for Ethernet: type, length 1 (×8), MAC
	ndpOptSrcLLA   = 1  // source link-layer address option
	ndpOptTgtLLA   = 2  // target link-layer address option
	ndpHopLimit    = 255
	ndpFlagRouter  = 0x80
	ndpFlagSolicit = 0x40
	ndpFlagOverr   = 0x20

	// ndpFrameSize is the size of an untagged NS or NA frame carrying one link-layer option.
	ndpFrameSize = EthernetHeaderSize + IPv6HeaderSize + ndpMinSize + ndpOptLLASize
)

// NDP is a view of a Neighbor Solicitation or Advertisement message.
type NDP []byte

// Target returns the target address.
func (b NDP) Target() addr { return addrFrom16(b[ndpTarget:]) }

// Flags returns the NA flag byte.
func (b NDP) Flags() uint8 { return b[ndpFlags] }

// LinkAddr returns the MAC of the first link-layer address option of type opt, and whether the
// options are well-formed (RFC 4861 §7.1: every option has a non-zero length and fits).
func (b NDP) LinkAddr(opt uint8) (mac [6]byte, found, valid bool) {
	o := b[ndpOptions:]
	for len(o) > 0 {
		if len(o) < 2 {
			return mac, found, false
		}
		n := int(o[1]) * 8
		if n == 0 || n > len(o) {
			return mac, found, false
		}
		if o[0] == opt && !found && n >= ndpOptLLASize {
			mac, found = [6]byte(o[2:8]), true
		}
		o = o[n:]
	}
	return mac, found, true
}

// SetAdvert writes an NA body: flags, target and a target link-layer address option.
func (b NDP) SetAdvert(flags uint8, target addr, mac [6]byte) {
	b[icmpType], b[icmpCode] = ICMPv6NeighAdvert, 0
	binary.BigEndian.PutUint32(b[ndpFlags:], uint32(flags)<<24)
	target.put16(b[ndpTarget:])
	b[ndpOptions], b[ndpOptions+1] = ndpOptTgtLLA, 1
	copy(b[ndpOptions+2:ndpOptions+8], mac[:])
}

// SetSolicit writes an NS body: target and a source link-layer address option.
func (b NDP) SetSolicit(target addr, mac [6]byte) {
	b[icmpType], b[icmpCode] = ICMPv6NeighSolicit, 0
	binary.BigEndian.PutUint32(b[ndpFlags:], 0)
	target.put16(b[ndpTarget:])
	b[ndpOptions], b[ndpOptions+1] = ndpOptSrcLLA, 1
	copy(b[ndpOptions+2:ndpOptions+8], mac[:])
}
