package datapath

import "encoding/binary"

// Ethernet is a view of an Ethernet II header at the start of a frame.
type Ethernet []byte

// Ethernet header layout.
const (
	ethDst  = 0  // destination MAC
	ethSrc  = 6  // source MAC
	ethType = 12 // EtherType or TPID of an 802.1Q tag

	// EthernetHeaderSize is the size of an untagged Ethernet header.
	EthernetHeaderSize = 14
	// MinFrameSize is the minimum Ethernet frame size without FCS; originated frames are padded to it.
	MinFrameSize = 60
)

// EtherTypes the engine understands.
const (
	EtherTypeIPv4 uint16 = 0x0800
	EtherTypeARP  uint16 = 0x0806
	EtherTypeVLAN uint16 = 0x8100 // 802.1Q tag
	EtherTypeIPv6 uint16 = 0x86dd
)

// Dst returns the destination MAC.
func (b Ethernet) Dst() [6]byte { return [6]byte(b[ethDst : ethDst+6]) }

// Src returns the source MAC.
func (b Ethernet) Src() [6]byte { return [6]byte(b[ethSrc : ethSrc+6]) }

// Type returns the EtherType field (a TPID if the frame is tagged).
func (b Ethernet) Type() uint16 { return binary.BigEndian.Uint16(b[ethType:]) }

// SetDst sets the destination MAC.
func (b Ethernet) SetDst(m [6]byte) { copy(b[ethDst:ethDst+6], m[:]) }

// SetSrc sets the source MAC.
func (b Ethernet) SetSrc(m [6]byte) { copy(b[ethSrc:ethSrc+6], m[:]) }

// SetType sets the EtherType field.
func (b Ethernet) SetType(t uint16) { binary.BigEndian.PutUint16(b[ethType:], t) }

// DstIsGroup reports whether the destination is a multicast or broadcast MAC (I/G bit set).
func (b Ethernet) DstIsGroup() bool { return b[ethDst]&1 != 0 }

// VLAN is a view of an 802.1Q tag body: the 4 bytes after the TPID, i.e. TCI and inner EtherType.
type VLAN []byte

// 802.1Q tag layout, relative to the end of the outer EtherType field.
const (
	vlanTCI  = 0 // priority, DEI, VLAN ID
	vlanType = 2 // inner EtherType

	// VLANTagSize is the number of bytes a tag adds to the Ethernet header.
	VLANTagSize = 4
)

// ID returns the 12-bit VLAN identifier.
func (b VLAN) ID() uint16 { return binary.BigEndian.Uint16(b[vlanTCI:]) & 0x0fff }

// Type returns the inner EtherType.
func (b VLAN) Type() uint16 { return binary.BigEndian.Uint16(b[vlanType:]) }

// isUnicastMAC reports whether m is a usable unicast neighbour address.
func isUnicastMAC(m [6]byte) bool { return m[0]&1 == 0 && m != [6]byte{} }

// broadcastMAC is ff:ff:ff:ff:ff:ff.
var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
