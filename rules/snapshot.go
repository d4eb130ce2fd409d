package rules

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"time"
)

// Protocol numbers as carried in the IP header.
const (
	ProtoTCP uint8 = 6
	ProtoUDP uint8 = 17
)

// Topo is a rule's topology; the values are Solaris' wire codes.
type Topo uint8

const (
	TopoDSR     Topo = 1
	TopoNAT     Topo = 2 // full NAT
	TopoHalfNAT Topo = 3
)

// Kernel defaults that Solaris substitutes for a timer configured as 0.
const (
	DefaultNATTimeoutTCP  = 120 * time.Second
	DefaultNATTimeoutUDP  = 60 * time.Second
	DefaultPersistTimeout = 60 * time.Second
)

// VIPKey identifies the rules that may match a packet: destination address and protocol.
// Addr is the 16-byte form (IPv4 as v4-mapped) so the key is comparable and allocation-free.
type VIPKey struct {
	Addr  [16]byte
	Proto uint8
}

// KeyOf returns the lookup key for a destination address and protocol.
func KeyOf(addr netip.Addr, proto uint8) VIPKey {
	return VIPKey{Addr: addr.As16(), Proto: proto}
}

// Snapshot is the immutable, compiled configuration that data-plane workers read.
// It is published with one atomic pointer swap and never modified afterwards.
type Snapshot struct {
	// Generation increases with every published snapshot.
	Generation uint64
	// Rules in creation order. A rule's index in this slice is only valid within this snapshot;
	// SnapRule.ID is stable across snapshots.
	Rules []SnapRule
	// ByVIP maps (VIP, protocol) to the indexes in Rules of every rule on that VIP and protocol,
	// enabled or not, ordered by MinPort. Rules on one VIP never have overlapping port ranges.
	ByVIP map[VIPKey][]int

	// Known lists every VIP, proxy-src and server address of the snapshot once, with what it is.
	Known []KnownAddr
	// NumServers and NumProxies are the totals over Rules of len(Servers) and len(ProxySrc),
	// so the engine can size its per-rule state once.
	NumServers, NumProxies int
}

// KnownAddr says what an address is to a snapshot.
type KnownAddr struct {
	Addr  [16]byte // 16-byte form, IPv4 as v4-mapped
	Flags uint8    // Known* bits
	Rule  int32    // KnownVIP: index of the first rule on the VIP (its counters take ICMP)
}

// KnownAddr flags.
const (
	KnownVIP    uint8 = 1 << iota // VIP of a rule, enabled or not: answered in ARP/NDP
	KnownProxy                    // full-NAT proxy-src address: answered in ARP/NDP
	KnownServer                   // back-end server of a rule
)

// SnapRule is one load-balancing rule as the data plane sees it.
type SnapRule struct {
	ID      uint64 // unique per rule instance for the life of the daemon
	Name    string
	Enabled bool
	VIP     netip.Addr
	Proto   uint8
	// MinPort..MaxPort is the destination port range; 0..0 means every port (1-65535).
	MinPort, MaxPort uint16
	Algo             Algo
	Topo             Topo
	// ProxySrc lists the full-NAT source addresses (at most 10); empty for other topologies.
	ProxySrc []netip.Addr
	// PMaskBits is the persistence prefix length; 0 means the rule is not sticky.
	PMaskBits int
	// Effective timers (defaults already substituted). ConnDrain 0 means wait for a graceful close.
	ConnDrain, NATTimeout, PersistTimeout time.Duration
	// Servers of the rule's server group, in the group's order (ascending address).
	Servers []SnapServer

	// Compiled by NewSnapshot: what the engine only indexes.
	Algorithm *AlgoSpec // registry entry of Algo; nil for a code with none (the engine drops)
	Table     AlgoTable // what Algorithm.Pick chooses from
	// TimeoutMs is the connection idle timeout (NATTimeout, or the protocol's default), and
	// StickyMs the persist-timeout (PersistTimeout, or the default), in the engine's unit.
	TimeoutMs, StickyMs uint32
}

// SnapServer is one back-end server of a rule.
type SnapServer struct {
	ID   string // e.g. "_sg1.0"
	Addr netip.Addr
	// MinPort..MaxPort is the server's port range; 0..0 means the rule's port is kept unchanged.
	MinPort, MaxPort uint16
	// Enabled is false when the administrator disabled the server or a health check failed;
	// the algorithm skips disabled servers but established connections keep working.
	Enabled bool
}

// Lookup returns the index of the rule for a destination address, protocol and port,
// or -1 if no rule covers them. It does not allocate.
func (s *Snapshot) Lookup(addr netip.Addr, proto uint8, port uint16) int {
	if s == nil {
		return -1
	}
	for _, i := range s.ByVIP[KeyOf(addr, proto)] {
		r := &s.Rules[i]
		if r.MinPort == 0 || (port >= r.MinPort && port <= r.MaxPort) {
			return i
		}
	}
	return -1
}

// HasVIP reports whether addr is the VIP of any rule (enabled or not) of any protocol.
func (s *Snapshot) HasVIP(addr netip.Addr) bool {
	if s == nil {
		return false
	}
	a := addr.As16()
	return len(s.ByVIP[VIPKey{a, ProtoTCP}]) > 0 || len(s.ByVIP[VIPKey{a, ProtoUDP}]) > 0
}

// ServerPort maps a rule destination port to the server's port (Solaris' range shifting and
// port collapsing): same-size ranges shift, a single server port collapses, no port keeps it.
func (r *SnapRule) ServerPort(s *SnapServer, dport uint16) uint16 {
	switch {
	case s.MinPort == 0:
		return dport
	case s.MaxPort > s.MinPort && r.MinPort != 0:
		return dport - r.MinPort + s.MinPort
	default:
		return s.MinPort
	}
}

// NewSnapshot compiles rules (in creation order) into a snapshot: the lookup index, each rule's
// algorithm entry and table, its timeouts in milliseconds, its proxy-src addresses of the VIP's
// family, and the known-address list. It takes a copy of the slice; its cost is linear in
// rules plus servers.
func NewSnapshot(gen uint64, rs []SnapRule) *Snapshot {
	s := &Snapshot{Generation: gen, Rules: slices.Clone(rs), ByVIP: make(map[VIPKey][]int, len(rs))}
	n := 0
	for i := range s.Rules {
		n += len(s.Rules[i].Servers)
	}
	s.NumServers = n
	s.Known = make([]KnownAddr, 0, n+2*len(rs))
	known := newAddrIndex(n + 2*len(rs))
	mark := func(a netip.Addr, flag uint8, rule int) {
		ka := known.entry(&s.Known, a.Unmap().As16())
		if flag == KnownVIP && ka.Flags&KnownVIP == 0 {
			ka.Rule = int32(rule)
		}
		ka.Flags |= flag
	}
	usable := make([]bool, n) // one backing array for every rule's table
	idx := make([]int32, 0, n)
	for i := range s.Rules {
		r := &s.Rules[i]
		v4 := r.VIP.Unmap().Is4()
		r.Algorithm = LookupAlgo(r.Algo)
		t := AlgoTable{Usable: usable[:len(r.Servers):len(r.Servers)]}
		usable = usable[len(r.Servers):]
		start := len(idx)
		for j := range r.Servers {
			sv := &r.Servers[j]
			// A server of the other family cannot be written into this rule's packets; the
			// configuration refuses one, the algorithm just never picks it.
			if sv.Enabled && sv.Addr.Unmap().Is4() == v4 {
				t.Usable[j] = true
				idx = append(idx, int32(j))
			}
			mark(sv.Addr, KnownServer, i)
		}
		t.UsableIdx = idx[start:len(idx):len(idx)]
		r.Table = t
		if r.Algorithm != nil && r.Algorithm.Build != nil {
			r.Table.Table = r.Algorithm.Build(r)
		}
		r.TimeoutMs = millis(connTimeout(r))
		pt := r.PersistTimeout
		if pt <= 0 {
			pt = DefaultPersistTimeout
		}
		r.StickyMs = millis(pt)
		if r.Topo == TopoNAT {
			r.ProxySrc = slices.DeleteFunc(slices.Clone(r.ProxySrc), func(a netip.Addr) bool { return a.Unmap().Is4() != v4 })
			for _, a := range r.ProxySrc {
				mark(a, KnownProxy, i)
			}
			s.NumProxies += len(r.ProxySrc)
		} else {
			r.ProxySrc = nil
		}
		mark(r.VIP, KnownVIP, i)
		key := KeyOf(r.VIP, r.Proto)
		s.ByVIP[key] = append(s.ByVIP[key], i)
	}
	for _, ix := range s.ByVIP {
		slices.SortStableFunc(ix, func(a, b int) int { return cmp.Compare(s.Rules[a].MinPort, s.Rules[b].MinPort) })
	}
	return s
}

// connTimeout is the idle timeout of a rule's connections: the configured one, or the kernel
// default of its protocol.
func connTimeout(r *SnapRule) time.Duration {
	switch {
	case r.NATTimeout > 0:
		return r.NATTimeout
	case r.Proto == ProtoUDP:
		return DefaultNATTimeoutUDP
	}
	return DefaultNATTimeoutTCP
}

func millis(d time.Duration) uint32 { return uint32(min(d.Milliseconds(), math.MaxUint32)) }

// addrIndex finds an address's entry in a Known list under construction: open addressing over
// entry numbers, small enough to stay in cache where a map of 16-byte keys would not.
type addrIndex struct {
	slots []int32 // entry number + 1; 0 = empty
	mask  uint64
}

func newAddrIndex(n int) addrIndex {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return addrIndex{slots: make([]int32, size), mask: uint64(size - 1)}
}

// entry returns the entry of address k in *list, appending a new one (Rule -1) if k has none.
func (x *addrIndex) entry(list *[]KnownAddr, k [16]byte) *KnownAddr {
	hi := uint64(k[0])<<56 | uint64(k[1])<<48 | uint64(k[2])<<40 | uint64(k[3])<<32 |
		uint64(k[4])<<24 | uint64(k[5])<<16 | uint64(k[6])<<8 | uint64(k[7])
	lo := uint64(k[8])<<56 | uint64(k[9])<<48 | uint64(k[10])<<40 | uint64(k[11])<<32 |
		uint64(k[12])<<24 | uint64(k[13])<<16 | uint64(k[14])<<8 | uint64(k[15])
	h := (hi*0x9e3779b97f4a7c15 ^ lo) * 0xbf58476d1ce4e5b9
	for i := (h ^ h>>29) & x.mask; ; i = (i + 1) & x.mask {
		switch e := x.slots[i]; {
		case e == 0:
			*list = append(*list, KnownAddr{Addr: k, Rule: -1})
			x.slots[i] = int32(len(*list))
			return &(*list)[len(*list)-1]
		case (*list)[e-1].Addr == k:
			return &(*list)[e-1]
		}
	}
}
