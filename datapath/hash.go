package datapath

// Hash algorithms (spec §6.6, Solaris K/ilb_alg_hash.c). The key is hashed with the CRC-32 that
// Solaris' CRC32 macro computes: polynomial 0x04c11db7 processed most significant bit first,
// initial value all ones, no final complement (the CRC-32/MPEG-2 parameters), over the key's
// bytes in network order. The table is computed once at start-up, so hashing a key is a few
// table lookups and allocates nothing.

// crcTable is the byte-at-a-time table of the MSB-first CRC-32 with polynomial 0x04c11db7.
var crcTable = makeCRCTable()

func makeCRCTable() (t [256]uint32) {
	for i := range t {
		c := uint32(i) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04c11db7
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}

// crc32Word feeds the 4 bytes of w (big-endian) into crc.
func crc32Word(crc, w uint32) uint32 {
	crc = crc<<8 ^ crcTable[byte(crc>>24)^byte(w>>24)]
	crc = crc<<8 ^ crcTable[byte(crc>>24)^byte(w>>16)]
	crc = crc<<8 ^ crcTable[byte(crc>>24)^byte(w>>8)]
	return crc<<8 ^ crcTable[byte(crc>>24)^byte(w)]
}

// crc32Addr returns the CRC of an address key: the 4 bytes of an IPv4 address, all 16 bytes of
// an IPv6 address.
func crc32Addr(a addr) uint32 {
	crc := ^uint32(0)
	if a.is4() {
		return crc32Word(crc, a.v4())
	}
	crc = crc32Word(crc, uint32(a.hi>>32))
	crc = crc32Word(crc, uint32(a.hi))
	crc = crc32Word(crc, uint32(a.lo>>32))
	return crc32Word(crc, uint32(a.lo))
}

// hashKey returns the CRC of the algorithm's key for a packet:
//
//	hash-ip       source address
//	hash-ip-port  source address ^ (sport<<16) ^ sport, the port folded into the low 32 bits
//	hash-ip-vip   source address ^ destination address
//
// Solaris hashes only the low 32 bits of an IPv6 address (s6_addr32[3]), so clients differing
// only in their upper 96 bits — every /64 that uses the same interface identifier, e.g. ::1 —
// land on the same server. This engine hashes the whole IPv6 address instead; IPv4 keys are
// hashed exactly as Solaris does.
func hashKey(algo uint8, src, dst addr, sport uint16) uint32 {
	k := src
	switch algo {
	case algoHashIPPort:
		k.lo ^= uint64(uint32(sport)<<16 | uint32(sport))
	case algoHashIPVIP:
		k.lo ^= dst.lo
		k.hi ^= dst.hi
		if src.is4() {
			k.lo |= v4Mapped // keep the key an IPv4 key: the mapped prefix cancelled itself
		}
	}
	return crc32Addr(k)
}

// Algorithm codes as uint8, so hash.go needs no conversion on the packet path.
const (
	algoHashIP     = 2
	algoHashIPPort = 3
	algoHashIPVIP  = 4
)

// pickHash returns server hash mod N over all of the rule's servers, enabled or not, in group
// order; if that one is not usable, hash mod M over the usable ones (Solaris' re-hash), so
// disabling a server remaps only its own clients.
func pickHash(rs *ruleState, p *Parsed) int {
	n := len(rs.servers)
	if n == 0 {
		return -1
	}
	h := hashKey(uint8(rs.algo), p.src, p.dst, p.SrcPort)
	if i := int(h % uint32(n)); rs.servers[i].usable {
		return i
	}
	if m := len(rs.usable); m > 0 {
		return int(rs.usable[h%uint32(m)])
	}
	return -1
}
