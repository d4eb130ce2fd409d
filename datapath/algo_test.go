package datapath

import "github.com/ilbgo/ilb/rules"

// crc32Addr is the algorithms' CRC of an address key, for the reference tests.
func crc32Addr(a addr) uint32 { return rules.CRC32Addr(a.hi, a.lo) }
