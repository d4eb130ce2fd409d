package compat

import "math"

// Atoi is atoi(3C) as ilbadm uses it for counts and intervals: leading blanks and a sign,
// then digits; anything else ends the number, and no digits at all read as 0. Values
// beyond int32 saturate (C's result is undefined there).
func Atoi(s string) int {
	v, _ := cStrtol(s)
	return int(max(min(v, math.MaxInt32), math.MinInt32))
}
