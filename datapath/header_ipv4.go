package datapath

import "encoding/binary"

// IPv4 is a view of an IPv4 header (RFC 791), options included.
type IPv4 []byte

// IPv4 header layout.
const (
	ipv4VersIHL    = 0  // version (high nibble) and header length in 32-bit words (low nibble)
	ipv4TOS        = 1  // DSCP and ECN
	ipv4TotalLen   = 2  // length of header and payload
	ipv4ID         = 4  // identification
	ipv4FlagsFrag  = 6  // flags (3 bits) and fragment offset (13 bits)
	ipv4TTL        = 8  // time to live
	ipv4Protocol   = 9  // upper-layer protocol
	ipv4Checksum   = 10 // header checksum
	ipv4SrcAddr    = 12 // source address
	ipv4DstAddr    = 16 // destination address
	ipv4TTLProto   = ipv4TTL
	ipv4MoreFrags  = 0x2000 // MF flag within the flags/fragment word
	ipv4FragOffset = 0x1fff // fragment offset mask within the flags/fragment word

	// IPv4MinSize is the size of a header without options.
	IPv4MinSize = 20
)

// IP protocol numbers the engine looks at.
const (
	ProtoICMP uint8 = 1
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
)

// Version returns the IP version nibble.
func (b IPv4) Version() uint8 { return b[ipv4VersIHL] >> 4 }

// HeaderLen returns the header length in bytes, from IHL.
func (b IPv4) HeaderLen() int { return int(b[ipv4VersIHL]&0x0f) * 4 }

// TotalLen returns the total length field.
func (b IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(b[ipv4TotalLen:])) }

// IsFragment reports whether the packet is a fragment (MF set or non-zero offset).
func (b IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&(ipv4MoreFrags|ipv4FragOffset) != 0
}

// TTL returns the time to live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// Protocol returns the upper-layer protocol number.
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// Checksum returns the header checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// SetChecksum sets the header checksum field.
func (b IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], c) }

// Src returns the source address as a big-endian uint32.
func (b IPv4) Src() uint32 { return binary.BigEndian.Uint32(b[ipv4SrcAddr:]) }

// Dst returns the destination address as a big-endian uint32.
func (b IPv4) Dst() uint32 { return binary.BigEndian.Uint32(b[ipv4DstAddr:]) }

// SetSrc sets the source address (checksum not updated).
func (b IPv4) SetSrc(a uint32) { binary.BigEndian.PutUint32(b[ipv4SrcAddr:], a) }

// SetDst sets the destination address (checksum not updated).
func (b IPv4) SetDst(a uint32) { binary.BigEndian.PutUint32(b[ipv4DstAddr:], a) }

// TTLProtoWord returns the 16-bit header word holding TTL and protocol, as the checksum sees it.
func (b IPv4) TTLProtoWord() uint16 { return binary.BigEndian.Uint16(b[ipv4TTLProto:]) }

// SetTTL sets the time to live (checksum not updated).
func (b IPv4) SetTTL(t uint8) { b[ipv4TTL] = t }
