package rules

import (
	"net/netip"
	"time"
)

// Protocol numbers as carried in the IP header.
const (
	ProtoTCP uint8 = 6
	ProtoUDP uint8 = 17
)

// Algo is a load-balancing algorithm; the values are Solaris' wire codes.
type Algo uint8

const (
	AlgoRoundRobin Algo = 1
	AlgoHashIP     Algo = 2
	AlgoHashIPPort Algo = 3
	AlgoHashIPVIP  Algo = 4
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
}

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
