package datapath

import "github.com/ilbgo/ilb/rules"

// vipIndex finds the rules of a (VIP, protocol) for every packet that opens a flow (and for
// every DSR packet): an open-addressing table built once per snapshot, probed with one
// multiply, where the snapshot's Go map would hash a 17-byte key each time.
type vipIndex struct {
	slots []vipSlot // a power of two, at most half full
	rules []int32   // rule indexes of every slot's VIP, in the snapshot's order
	mask  uint32
}

// vipSlot is one (VIP, protocol) and its run of rules.
type vipSlot struct {
	vip      addr
	first, n int32 // vipIndex.rules[first:first+n]; n 0 marks an empty slot
	proto    uint8
	_        [7]byte
}

// vipHash spreads an address and protocol over the slots.
func vipHash(a addr, proto uint8) uint32 {
	h := (a.hi ^ a.lo*0x9e3779b97f4a7c15 ^ uint64(proto)) * 0xbf58476d1ce4e5b9
	return uint32(h >> 32)
}

// build indexes s's rules, reusing the arrays when they are large enough.
func (x *vipIndex) build(s *rules.Snapshot) {
	n := 8
	nRules := 0
	if s != nil {
		n = ceilPow2(max(2*len(s.ByVIP), 8))
		nRules = len(s.Rules)
	}
	x.slots = resize(x.slots, n)
	clear(x.slots)
	x.rules = resize(x.rules, nRules)[:0]
	x.mask = uint32(n - 1)
	if s == nil {
		return
	}
	for k, ix := range s.ByVIP {
		a := addrFrom16(k.Addr[:])
		i := vipHash(a, k.Proto) & x.mask
		for x.slots[i].n != 0 {
			i = (i + 1) & x.mask
		}
		x.slots[i] = vipSlot{vip: a, proto: k.Proto, first: int32(len(x.rules)), n: int32(len(ix))}
		for _, r := range ix {
			x.rules = append(x.rules, int32(r))
		}
	}
}

// find returns the rule indexes of (a, proto), or none.
func (x *vipIndex) find(a addr, proto uint8) []int32 {
	for i := vipHash(a, proto) & x.mask; ; i = (i + 1) & x.mask {
		sl := &x.slots[i]
		if sl.n == 0 {
			return nil
		}
		if sl.vip == a && sl.proto == proto {
			return x.rules[sl.first : sl.first+sl.n]
		}
	}
}
