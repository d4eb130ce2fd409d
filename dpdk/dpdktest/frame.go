package dpdktest

import "encoding/binary"

// UDP4 builds an Ethernet/IPv4/UDP frame with a valid IPv4 header checksum
// and no UDP checksum, padded to the 60-byte Ethernet minimum. Use
// documentation addresses (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24).
func UDP4(dst, src [6]byte, srcIP, dstIP [4]byte, sport, dport uint16, payload []byte) []byte {
	const ethLen, ipLen, udpLen = 14, 20, 8
	n := ethLen + ipLen + udpLen + len(payload)
	f := make([]byte, max(n, 60))
	copy(f[0:6], dst[:])
	copy(f[6:12], src[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)

	ip := f[ethLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen+udpLen+len(payload)))
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	copy(ip[12:16], srcIP[:])
	copy(ip[16:20], dstIP[:])
	binary.BigEndian.PutUint16(ip[10:], IPv4Checksum(ip[:ipLen]))

	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen+len(payload)))
	copy(udp[udpLen:], payload)
	return f
}

// IPv4Checksum returns the Internet checksum of an IPv4 header whose
// checksum field is zero.
func IPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
