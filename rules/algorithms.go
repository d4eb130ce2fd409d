// Load-balancing algorithms (spec §6.6): the one place that defines them.
//
// Adding an algorithm: this file is the only one a newcomer touches (plus its case in
// algorithms_test.go, which checks every entry anyway). Give it an Algo code below — Solaris'
// wire code where Solaris has one — and one AlgoSpec entry in the algorithms table:
//
//   - Name and Alias: the lbalg values ilbadm create-rule accepts (case-insensitively) and
//     show-rule and export-config print (Name); compat reads them from here.
//   - Validate: checks a rule using the algorithm needs beyond the common ones (nil: none);
//     configuration changes run it, with ValidateAlgo refusing a code not in the table.
//   - Build: the per-rule table, compiled once into the snapshot off the workers (a Maglev
//     ring, say); nil when Pick needs only the usable-server lists every rule gets.
//   - Pick: the selection the packet engine runs for a new flow. It reads the compiled
//     AlgoTable and the Flow, must not allocate or lock, and returns a server index or -1.
//
// The engine dispatches through the entry's Pick; a code with no entry is refused by
// validation and, should a snapshot carry one anyway, counted and dropped by the engine
// (never silently balanced some other way).

package rules

import "strings"

// Algo is a load-balancing algorithm; the values are Solaris' wire codes.
type Algo uint8

const (
	AlgoRoundRobin Algo = 1
	AlgoHashIP     Algo = 2
	AlgoHashIPPort Algo = 3
	AlgoHashIPVIP  Algo = 4
)

// AlgoSpec is one algorithm's entry in the registry.
type AlgoSpec struct {
	Code        Algo
	Name, Alias string                    // lbalg value and its short form (A/ilbadm_subr.c algo_types)
	Validate    func(r *Rule) error       // extra configuration checks; nil = none
	Build       func(r *SnapRule) []int32 // compile-time table (AlgoTable.Table); nil = none
	Pick        func(t *AlgoTable, f *Flow, cursor int) int
}

// algorithms is the registry, in Solaris' order (show and usage texts list them so).
var algorithms = [...]AlgoSpec{
	{Code: AlgoRoundRobin, Name: "roundrobin", Alias: "rr", Pick: pickRoundRobin},
	{Code: AlgoHashIP, Name: "hash-ip", Alias: "hip", Pick: pickHashIP},
	{Code: AlgoHashIPPort, Name: "hash-ip-port", Alias: "hipp", Pick: pickHashIPPort},
	{Code: AlgoHashIPVIP, Name: "hash-ip-vip", Alias: "hipv", Pick: pickHashIPVIP},
}

// Algorithms returns the registry's entries in order.
func Algorithms() []AlgoSpec { return algorithms[:] }

// LookupAlgo returns the entry of code a, or nil if no algorithm has that code.
func LookupAlgo(a Algo) *AlgoSpec {
	for i := range algorithms {
		if algorithms[i].Code == a {
			return &algorithms[i]
		}
	}
	return nil
}

// ParseAlgo matches an lbalg value: an algorithm's name or alias, case-insensitively.
func ParseAlgo(s string) (Algo, bool) {
	for i := range algorithms {
		if a := &algorithms[i]; strings.EqualFold(s, a.Name) || strings.EqualFold(s, a.Alias) {
			return a.Code, true
		}
	}
	return 0, false
}

// String returns the algorithm's lbalg name, "" for a code with no entry.
func (a Algo) String() string {
	if s := LookupAlgo(a); s != nil {
		return s.Name
	}
	return ""
}

// ValidateAlgo refuses a rule whose algorithm code has no entry (EINVAL, as the kernel does)
// and runs the entry's own checks.
func ValidateAlgo(r *Rule) error {
	s := LookupAlgo(r.Algo)
	if s == nil {
		return fail(CodeEINVAL)
	}
	if s.Validate != nil {
		return s.Validate(r)
	}
	return nil
}

// AlgoTable is what a rule's algorithm picks from, compiled once into the snapshot.
type AlgoTable struct {
	// Usable is, by server index, whether the algorithm may choose the server: enabled (by the
	// administrator and its health check) and of the VIP's family.
	Usable []bool
	// UsableIdx lists the usable servers' indexes in group order.
	UsableIdx []int32
	// Table is the algorithm's own table (AlgoSpec.Build), nil if it has none.
	Table []int32
}

// Flow is what an algorithm sees of a new flow: its addresses in 16-byte form (IPv4 as
// v4-mapped) as big-endian high and low words, and its source port.
type Flow struct {
	SrcHi, SrcLo, DstHi, DstLo uint64
	SrcPort                    uint16
}

// pickRoundRobin returns the first usable server at or after cursor (wrapping), or -1. The
// engine moves the cursor past the server once the packet is on its way.
func pickRoundRobin(t *AlgoTable, _ *Flow, cursor int) int {
	n := len(t.Usable)
	i := cursor
	for range n {
		if i >= n {
			i = 0
		}
		if t.Usable[i] {
			return i
		}
		i++
	}
	return -1
}

// The hash algorithms (Solaris K/ilb_alg_hash.c) differ only in their key:
//
//	hash-ip       source address
//	hash-ip-port  source address ^ (sport<<16) ^ sport, the port folded into the low 32 bits
//	hash-ip-vip   source address ^ destination address
//
// Solaris hashes only the low 32 bits of an IPv6 address (s6_addr32[3]), so clients differing
// only in their upper 96 bits land on the same server; this engine hashes the whole IPv6
// address instead. IPv4 keys are hashed exactly as Solaris does.

func pickHashIP(t *AlgoTable, f *Flow, _ int) int {
	return pickHash(t, CRC32Addr(f.SrcHi, f.SrcLo))
}

func pickHashIPPort(t *AlgoTable, f *Flow, _ int) int {
	p := uint64(uint32(f.SrcPort)<<16 | uint32(f.SrcPort))
	return pickHash(t, CRC32Addr(f.SrcHi, f.SrcLo^p))
}

func pickHashIPVIP(t *AlgoTable, f *Flow, _ int) int {
	hi, lo := f.SrcHi^f.DstHi, f.SrcLo^f.DstLo
	if isV4Mapped(f.SrcHi, f.SrcLo) {
		lo |= 0xffff << 32 // keep the key an IPv4 key: the mapped prefix cancelled itself
	}
	return pickHash(t, CRC32Addr(hi, lo))
}

// pickHash returns h mod N over all of the rule's servers, usable or not, in group order; if
// that one is not usable, h mod M over the usable ones (Solaris' re-hash), so disabling a
// server remaps only its own clients.
func pickHash(t *AlgoTable, h uint32) int {
	n := len(t.Usable)
	if n == 0 {
		return -1
	}
	if i := int(h % uint32(n)); t.Usable[i] {
		return i
	}
	if m := len(t.UsableIdx); m > 0 {
		return int(t.UsableIdx[h%uint32(m)])
	}
	return -1
}

func isV4Mapped(hi, lo uint64) bool { return hi == 0 && lo>>32 == 0xffff }

// CRC32Addr is the CRC-32 that Solaris' CRC32 macro computes (polynomial 0x04c11db7 processed
// most significant bit first, initial value all ones, no final complement: CRC-32/MPEG-2) over
// an address key in network order: the 4 bytes of an IPv4 (v4-mapped) address, all 16 bytes
// otherwise. The table is computed at start-up, so a key costs a few table lookups.
func CRC32Addr(hi, lo uint64) uint32 {
	crc := ^uint32(0)
	if isV4Mapped(hi, lo) {
		return crc32Word(crc, uint32(lo))
	}
	crc = crc32Word(crc, uint32(hi>>32))
	crc = crc32Word(crc, uint32(hi))
	crc = crc32Word(crc, uint32(lo>>32))
	return crc32Word(crc, uint32(lo))
}

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
