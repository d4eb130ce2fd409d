package datapath

import "encoding/binary"

// TCP is a view of a TCP header (RFC 9293).
type TCP []byte

// TCP header layout.
const (
	tcpSrcPort  = 0  // source port
	tcpDstPort  = 2  // destination port
	tcpSeq      = 4  // sequence number
	tcpAck      = 8  // acknowledgment number
	tcpDataOff  = 12 // data offset in 32-bit words (high nibble)
	tcpFlags    = 13 // control bits
	tcpWindow   = 14 // receive window
	tcpChecksum = 16 // checksum over pseudo-header, header and data
	tcpUrgent   = 18 // urgent pointer

	// TCPMinSize is the size of a header without options.
	TCPMinSize = 20
)

// TCP control bits.
const (
	TCPFin uint8 = 0x01
	TCPSyn uint8 = 0x02
	TCPRst uint8 = 0x04
	TCPPsh uint8 = 0x08
	TCPAck uint8 = 0x10
)

// SrcPort returns the source port.
func (b TCP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[tcpSrcPort:]) }

// DstPort returns the destination port.
func (b TCP) DstPort() uint16 { return binary.BigEndian.Uint16(b[tcpDstPort:]) }

// Seq returns the sequence number.
func (b TCP) Seq() uint32 { return binary.BigEndian.Uint32(b[tcpSeq:]) }

// Ack returns the acknowledgment number.
func (b TCP) Ack() uint32 { return binary.BigEndian.Uint32(b[tcpAck:]) }

// HeaderLen returns the header length in bytes, from the data offset.
func (b TCP) HeaderLen() int { return int(b[tcpDataOff]>>4) * 4 }

// Flags returns the control bits.
func (b TCP) Flags() uint8 { return b[tcpFlags] }

// Checksum returns the checksum field.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[tcpChecksum:]) }

// SetChecksum sets the checksum field.
func (b TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], c) }

// UDP is a view of a UDP header (RFC 768).
type UDP []byte

// UDP header layout.
const (
	udpSrcPort  = 0 // source port
	udpDstPort  = 2 // destination port
	udpLength   = 4 // length of header and data
	udpChecksum = 6 // checksum, 0 = none (IPv4 only)

	// UDPSize is the size of the header.
	UDPSize = 8
)

// SrcPort returns the source port.
func (b UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// DstPort returns the destination port.
func (b UDP) DstPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// Length returns the length field.
func (b UDP) Length() int { return int(binary.BigEndian.Uint16(b[udpLength:])) }

// Checksum returns the checksum field.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// SetChecksum sets the checksum field.
func (b UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], c) }

// Ports sit at the same offsets in TCP and UDP, so rewriting code can treat both alike.
const (
	l4SrcPort = 0 // source port in TCP and UDP
	l4DstPort = 2 // destination port in TCP and UDP
)

// l4ChecksumOffset returns where the checksum field sits for proto.
func l4ChecksumOffset(proto uint8) int {
	if proto == ProtoTCP {
		return tcpChecksum
	}
	return udpChecksum
}
