package datapath

import "encoding/binary"

// ARP is a view of an ARP packet for IPv4 over Ethernet (RFC 826).
type ARP []byte

// ARP layout for hardware type Ethernet and protocol IPv4.
const (
	arpHType     = 0  // hardware type, 1 = Ethernet
	arpPType     = 2  // protocol type, 0x0800 = IPv4
	arpHLen      = 4  // hardware address length, 6
	arpPLen      = 5  // protocol address length, 4
	arpOp        = 6  // operation
	arpSenderHW  = 8  // sender MAC
	arpSenderIP  = 14 // sender IPv4 address
	arpTargetHW  = 18 // target MAC
	arpTargetIP  = 24 // target IPv4 address
	arpEthIPSize = 28 // size of an Ethernet/IPv4 ARP packet

	// ARPSize is the size of an Ethernet/IPv4 ARP packet.
	ARPSize = arpEthIPSize
)

// ARP operations.
const (
	ARPRequest uint16 = 1
	ARPReply   uint16 = 2
)

// IsEthernetIPv4 reports whether the packet maps IPv4 addresses to Ethernet MACs, the only kind handled.
func (b ARP) IsEthernetIPv4() bool {
	return binary.BigEndian.Uint16(b[arpHType:]) == 1 && binary.BigEndian.Uint16(b[arpPType:]) == EtherTypeIPv4 &&
		b[arpHLen] == 6 && b[arpPLen] == 4
}

// Op returns the operation.
func (b ARP) Op() uint16 { return binary.BigEndian.Uint16(b[arpOp:]) }

// SenderHW returns the sender MAC.
func (b ARP) SenderHW() [6]byte { return [6]byte(b[arpSenderHW : arpSenderHW+6]) }

// SenderIP returns the sender IPv4 address as a big-endian uint32.
func (b ARP) SenderIP() uint32 { return binary.BigEndian.Uint32(b[arpSenderIP:]) }

// TargetHW returns the target MAC.
func (b ARP) TargetHW() [6]byte { return [6]byte(b[arpTargetHW : arpTargetHW+6]) }

// TargetIP returns the target IPv4 address as a big-endian uint32.
func (b ARP) TargetIP() uint32 { return binary.BigEndian.Uint32(b[arpTargetIP:]) }

// SetEthernetIPv4 writes the fixed header fields for Ethernet/IPv4 and the operation.
func (b ARP) SetEthernetIPv4(op uint16) {
	binary.BigEndian.PutUint16(b[arpHType:], 1)
	binary.BigEndian.PutUint16(b[arpPType:], EtherTypeIPv4)
	b[arpHLen] = 6
	b[arpPLen] = 4
	binary.BigEndian.PutUint16(b[arpOp:], op)
}

// SetOp sets the operation.
func (b ARP) SetOp(op uint16) { binary.BigEndian.PutUint16(b[arpOp:], op) }

// SetSender sets the sender MAC and IPv4 address.
func (b ARP) SetSender(mac [6]byte, ip uint32) {
	copy(b[arpSenderHW:arpSenderHW+6], mac[:])
	binary.BigEndian.PutUint32(b[arpSenderIP:], ip)
}

// SetTarget sets the target MAC and IPv4 address.
func (b ARP) SetTarget(mac [6]byte, ip uint32) {
	copy(b[arpTargetHW:arpTargetHW+6], mac[:])
	binary.BigEndian.PutUint32(b[arpTargetIP:], ip)
}
