package datapath

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// PortConfig describes one NIC port the engine sends and receives on.
type PortConfig struct {
	MAC   [6]byte
	Addrs []netip.Prefix // interface addresses with prefix, IPv4 and IPv6
	// Gateway is the optional IPv4 default gateway reachable through this port. An IPv6 address
	// here is taken as Gateway6 (when that is unset), for callers that keep one gateway field.
	Gateway netip.Addr
	// Gateway6 is the optional IPv6 default gateway reachable through this port: a global
	// address on one of the port's prefixes or a link-local address of the port's link.
	Gateway6 netip.Addr
}

// Config configures an Engine.
type Config struct {
	Ports        []PortConfig // index = port number used in Process/Result
	ConnCapacity int          // connection entries (rounded up to a power of two); 0 = DefaultConnCapacity
	Snapshot     *atomic.Pointer[rules.Snapshot]
	// NeighbourCapacity is the ARP/NDP cache size (rounded up to a power of two); 0 = DefaultNeighbourCapacity.
	NeighbourCapacity int
	// StickyCapacity is the persistence table size (rounded up to a power of two); 0 = the
	// connection capacity.
	StickyCapacity int
	// WorkerIndex and WorkerCount place this engine among the workers sharing the full-NAT
	// source ports: it allocates only ports p with p % WorkerCount == WorkerIndex, so the worker
	// owning a full-NAT flow's return traffic follows from its destination port (FullNATPortOwner).
	// WorkerCount 0 means 1.
	WorkerIndex, WorkerCount int
	// HalfOpenTimeout is the idle timeout of connection entries that have not completed their
	// handshake (TCP) or seen a reply (UDP), and of entries after a RST; 0 = DefaultHalfOpenTimeout.
	HalfOpenTimeout time.Duration
	// NoEvict refuses a new connection when the table is full, instead of evicting the least
	// recently active half-open entry (established entries are never evicted).
	NoEvict bool
	// SteerPrefix4 and SteerPrefix6 are the prefix lengths of a client address that decide
	// which worker owns its flows (owner.go); 0 = the whole address. Every worker must be
	// given the same values.
	SteerPrefix4, SteerPrefix6 int
	// Handoff makes Process answer ActionHandoff for an IP packet another worker owns
	// (owner.go), which the caller gives to that worker's ProcessHandedOff. Off, the engine
	// handles whatever it is given (one worker, or a test of one worker's share).
	Handoff bool
}

// Defaults for zero Config fields.
const (
	DefaultConnCapacity      = 1 << 16
	DefaultNeighbourCapacity = 1 << 12
	maxConnCapacity          = 1 << 28
)

// Action tells the worker what to do with a frame.
type Action uint8

const (
	ActionDrop    Action = iota // free the frame
	ActionForward               // transmit frame[:Len] on Result.Port
	ActionPass                  // not for the load balancer: hand to the host (exception path)
	ActionHeld                  // the engine keeps a copy until its next hop resolves: free the frame
	ActionHandoff               // another worker owns the frame: hand it, unchanged, to worker Result.Port
)

// Result tells the worker what to do with the frame it passed to Process.
type Result struct {
	Action Action
	Port   uint16 // out port for ActionForward; owning worker for ActionHandoff
	// Len is the frame length after processing. It may exceed the length handed in (a neighbor
	// advertisement answering a solicitation without options), never cap(frame).
	Len int
}

// Engine is the packet engine of one worker. All methods except Stats, RequestNATDump and
// RequestPersistDump must be called from that worker's goroutine.
type Engine struct {
	now    int64
	nowMs  uint32 // now in the ms ticks connection entries record
	pkt    Parsed
	ports  []port
	snapP  *atomic.Pointer[rules.Snapshot]
	snap   *rules.Snapshot
	rules  []ruleState // by rule index of snap
	conns  connTable
	neigh  neighTable
	arpq   arpQueue
	ctr    counters
	dump   natDump
	pdump  persistDump
	slots  []ruleSlot // by rule slot
	routes routes
	vips   vipIndex      // the snapshot's rules by (VIP, protocol)
	pf     prefetchState // PrefetchBurst's scratch
	// prefetchMin is the occupancy from which PrefetchBurst stages lookups (prefetchMinEntries).
	prefetchMin int
	known       map[addr]knownAddr // VIPs, proxy-src addresses and servers of the current snapshot
	srv         []serverRun        // by server slot: drain deadline, index in the current rule
	sticky      stickyTable
	nat         natPorts
	heldq       holdQueue
	holdNH      addr // the next hop of the route that just failed to resolve, for hold
	evict       bool // evict half-open entries when the connection table is full

	worker, workers int    // this engine's index among the workers, and their number
	steer4          uint32 // steering prefix masks (owner.go)
	steer6          addr
	handedOff       bool // the frame in Process came from another worker: it is ours
	handoff         bool // Config.Handoff with more than one worker
	// steerKnown is every VIP, proxy-src and server address any snapshot has had (never
	// forgotten): ownership must keep following connections of deleted rules, removed servers
	// and proxies while they drain, and every worker must decide it alike.
	steerKnown map[addr]uint8

	nDraining int // server slots with a drain deadline: skips the check on the fast path when 0

	slotByID        map[uint64]int32
	freeSlots       []int32
	freeServerSlots []int32
	serverSlots     map[serverKey]int32 // server slot of each server of each rule slot
	serverPool      []serverState       // backing of every ruleState.servers, sized by the snapshot
	proxyPool       []natProxy          // backing of every ruleState.proxies
	knownList       []rules.KnownAddr   // the snapshot list known was built from
	layoutChanged   bool                // slots changed since publishLayout: Stats needs a new layout
	flow            rules.Flow          // the new flow an algorithm looks at
	reclaimPending  bool
	neighScan       uint32
	neighPacer      pacer
	connPacer       pacer
	stickyPacer     pacer
	started         bool
}

// New validates cfg and allocates every table the engine will use.
func New(cfg Config) (*Engine, error) {
	if cfg.Snapshot == nil {
		return nil, errors.New("datapath: Config.Snapshot is nil")
	}
	if len(cfg.Ports) == 0 || len(cfg.Ports) > math.MaxUint16 {
		return nil, fmt.Errorf("datapath: need 1..%d ports, got %d", math.MaxUint16, len(cfg.Ports))
	}
	connCap := cfg.ConnCapacity
	if connCap == 0 {
		connCap = DefaultConnCapacity
	}
	if connCap < 0 || connCap > maxConnCapacity {
		return nil, fmt.Errorf("datapath: ConnCapacity %d out of range 1..%d", connCap, maxConnCapacity)
	}
	neighCap := cfg.NeighbourCapacity
	if neighCap == 0 {
		neighCap = DefaultNeighbourCapacity
	}
	if neighCap < 0 || neighCap > maxConnCapacity {
		return nil, fmt.Errorf("datapath: NeighbourCapacity %d out of range", neighCap)
	}
	stickyCap := cfg.StickyCapacity
	if stickyCap == 0 {
		stickyCap = connCap
	}
	if stickyCap < 0 || stickyCap > maxConnCapacity {
		return nil, fmt.Errorf("datapath: StickyCapacity %d out of range", stickyCap)
	}
	wc := cfg.WorkerCount
	if wc == 0 {
		wc = 1
	}
	if wc < 1 || wc > natPortCount || cfg.WorkerIndex < 0 || cfg.WorkerIndex >= wc {
		return nil, fmt.Errorf("datapath: worker %d of %d: need 0 <= WorkerIndex < WorkerCount <= %d",
			cfg.WorkerIndex, cfg.WorkerCount, natPortCount)
	}
	e := &Engine{snapP: cfg.Snapshot, slotByID: make(map[uint64]int32)}
	for i, pc := range cfg.Ports {
		if err := e.addPort(i, pc); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(e.routes.connected, func(a, b int) bool {
		return e.routes.connected[a].bits > e.routes.connected[b].bits
	})
	sort.SliceStable(e.routes.connected6, func(a, b int) bool {
		return e.routes.connected6[a].bits > e.routes.connected6[b].bits
	})
	var seed [4]uint64
	var rb [32]byte
	_, _ = rand.Read(rb[:]) // crypto/rand.Read never fails on supported platforms
	for i := range seed {
		seed[i] = binary.LittleEndian.Uint64(rb[8*i:])
	}
	e.conns = newConnTable(connCap, [3]uint64(seed[:3]))
	if cfg.HalfOpenTimeout < 0 || cfg.HalfOpenTimeout > time.Duration(math.MaxUint32)*time.Millisecond {
		return nil, fmt.Errorf("datapath: HalfOpenTimeout %v out of range", cfg.HalfOpenTimeout)
	}
	if cfg.HalfOpenTimeout > 0 {
		e.conns.halfOpenMs = uint32(min(max(cfg.HalfOpenTimeout.Milliseconds(), 1), maxConnTimeoutMs))
	}
	e.evict = !cfg.NoEvict
	e.prefetchMin = prefetchMinEntries
	e.heldq = newHoldQueue()
	e.sticky = newStickyTable(stickyCap, seed[3])
	e.nat = newNATPorts(cfg.WorkerIndex, wc)
	e.worker, e.workers = cfg.WorkerIndex, wc
	e.handoff = cfg.Handoff && wc > 1
	if cfg.SteerPrefix4 < 0 || cfg.SteerPrefix4 > 32 || cfg.SteerPrefix6 < 0 || cfg.SteerPrefix6 > 128 {
		return nil, fmt.Errorf("datapath: steering prefixes /%d and /%d out of range", cfg.SteerPrefix4, cfg.SteerPrefix6)
	}
	e.steer4, e.steer6 = ^uint32(0), prefixMask(false, 128)
	if b := cfg.SteerPrefix4; b > 0 {
		e.steer4 = ^uint32(0) << (32 - b)
	}
	if b := cfg.SteerPrefix6; b > 0 {
		e.steer6 = prefixMask(false, b)
	}
	e.neigh = newNeighTable(neighCap)
	e.arpq = newARPQueue(2 * len(e.neigh.slots))
	e.ctr.initPorts(len(e.ports))
	e.ctr.pub.Store(&published{})
	e.ctr.interval = publishInterval
	return e, nil
}

// addPort validates port i's configuration and records its addresses and routes.
func (e *Engine) addPort(i int, pc PortConfig) error {
	if !isUnicastMAC(pc.MAC) {
		return fmt.Errorf("datapath: port %d: MAC %x is not a unicast address", i, pc.MAC)
	}
	pt := port{mac: pc.MAC, ll6: linkLocalFromMAC(pc.MAC), sampleIn: 1}
	for _, pfx := range pc.Addrs {
		if !pfx.IsValid() {
			return fmt.Errorf("datapath: port %d: invalid address %v", i, pfx)
		}
		pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits())
		if pfx.Addr().Is4() {
			a := v4Of(pfx.Addr())
			pt.addrs = append(pt.addrs, a)
			mask := uint32(0)
			if pfx.Bits() > 0 {
				mask = ^uint32(0) << (32 - pfx.Bits())
			}
			e.routes.connected = append(e.routes.connected,
				connectedNet{net: a & mask, mask: mask, bits: pfx.Bits(), port: uint16(i), src: a})
			continue
		}
		a := addrFromNetip(pfx.Addr())
		if a.isMulticast6() || a.isZero() {
			return fmt.Errorf("datapath: port %d: address %v is not a unicast address", i, pfx)
		}
		pt.addrs6 = append(pt.addrs6, a)
		if a.isLinkLocal6() {
			continue // the link itself is connected already; a link-local prefix adds no route
		}
		mask := prefixMask(false, pfx.Bits())
		e.routes.connected6 = append(e.routes.connected6,
			connectedNet6{net: a.and(mask), mask: mask, bits: pfx.Bits(), port: uint16(i), src: a})
	}
	gw, gw6 := pc.Gateway, pc.Gateway6
	if gw.IsValid() && gw.Unmap().Is6() && !gw6.IsValid() {
		gw, gw6 = netip.Addr{}, gw
	}
	if gw.IsValid() {
		gw = gw.Unmap()
		if !gw.Is4() {
			return fmt.Errorf("datapath: port %d: gateway %v is not IPv4 (set Gateway6)", i, pc.Gateway)
		}
		if !e.routes.hasGateway { // the first port with a gateway carries the default route
			e.routes.hasGateway, e.routes.gateway, e.routes.gatewayPort = true, v4Of(gw), uint16(i)
		}
	}
	if gw6.IsValid() {
		if !gw6.Is6() || gw6.Is4In6() || gw6.IsMulticast() || gw6.IsUnspecified() {
			return fmt.Errorf("datapath: port %d: Gateway6 %v is not an IPv6 unicast address", i, gw6)
		}
		if !e.routes.hasGateway6 {
			e.routes.hasGateway6, e.routes.gateway6, e.routes.gateway6Port = true, addrFromNetip(gw6.WithZone("")), uint16(i)
		}
	}
	e.ports = append(e.ports, pt)
	return nil
}

// BeginBurst starts a burst at time now (monotonic ns from the worker) and picks up a newly
// published configuration snapshot.
func (e *Engine) BeginBurst(now int64) {
	e.now, e.nowMs = now, msOf(now)
	if s := e.snapP.Load(); s != e.snap || !e.started {
		e.started = true
		e.applySnapshot(s)
	}
}

// EndBurst publishes the burst's counters and does a slice of periodic work: connection and
// persistence expiry, neighbour refresh, slot reclamation, pending table dumps.
func (e *Engine) EndBurst() {
	e.expireHalfOpen()
	e.expireHeld()
	e.sweepConns()
	e.sweepSticky()
	e.maintainNeighbours()
	if e.reclaimPending {
		e.ctr.publish()
		e.reclaimRuleSlots()
		e.publishLayout()
	}
	e.ctr.g[gConnEntries] = uint64(e.conns.count())
	e.ctr.g[gHalfOpenEntries] = uint64(e.conns.hoCount)
	e.ctr.maybePublish(e.now)
	e.serveDumps()
}

// Process handles one received frame in place and says what to do with it. frame has the data
// length; its capacity may be larger (a reply may use it). Process never panics and never
// allocates.
func (e *Engine) Process(frame []byte, inPort uint16) Result {
	if !e.handedOff { // the worker that received it counted it
		e.ctr.g[gRxPackets]++
		e.ctr.g[gRxBytes] += uint64(len(frame))
	}
	if int(inPort) >= len(e.ports) {
		return e.drop(gUnknownPort, frame)
	}
	p := &e.pkt
	if st := p.Decode(frame); st != ParseOK {
		return e.malformed(st, frame)
	}
	if p.Tagged {
		// The ports are untagged: a tag would be carried onto another segment, into another
		// VLAN, which no switch in the path expects.
		e.ctr.ports[inPort][pVLANDropped]++
		return e.drop(gVLANDropped, frame)
	}
	switch p.EtherType {
	case EtherTypeIPv4, EtherTypeIPv6:
		if e.handoff && !e.handedOff && Ethernet(frame).Dst() == e.ports[inPort].mac {
			if o := e.ownerOf(frame, p); o != e.worker {
				e.ctr.g[gHandoffOut]++
				return Result{Action: ActionHandoff, Port: uint16(o), Len: len(frame)}
			}
		}
		return e.handleIP(frame, p, inPort)
	case EtherTypeARP:
		return e.handleARP(frame, p, inPort)
	}
	return e.pass(gUnsupported, frame)
}

// handleIP classifies an IPv4 or IPv6 packet: neighbour discovery, existing connection, new
// flow to a rule, ICMP for a VIP, or the host (spec §6.2).
func (e *Engine) handleIP(frame []byte, p *Parsed, in uint16) Result {
	v6 := p.isV6()
	if Ethernet(frame).Dst() != e.ports[in].mac {
		if !Ethernet(frame).DstIsGroup() {
			return e.drop(gNotForUs, frame)
		}
		if v6 && p.Proto == ProtoICMPv6 && isNDPType(p.ICMPType) {
			return e.handleNDP(frame, p, in) // solicitations arrive at solicited-node multicast
		}
		return e.pass(gUnmatched, frame) // broadcast/multicast: never balanced
	}
	icmp := ProtoICMP
	if v6 {
		icmp = ProtoICMPv6
		if p.Proto == ProtoICMPv6 && isNDPType(p.ICMPType) {
			return e.handleNDP(frame, p, in)
		}
		if p.dst.isLinkLocal6() || p.src.isLinkLocal6() || p.dst.isMulticast6() {
			return e.passOther(p, frame) // link-local traffic is never load-balanced (spec §6.1)
		}
	}
	if p.Fragment || p.ExtOther {
		return e.unbalanceable(frame, p)
	}
	switch p.Proto {
	case ProtoTCP, ProtoUDP:
		if pt := &e.ports[in]; pt.sampleIn <= 1 {
			pt.sampleIn = checksumSampleEvery
			e.sampleChecksum(frame, p, in)
		} else {
			pt.sampleIn--
		}
	case icmp:
		return e.handleICMP(frame, p, in)
	default:
		return e.passOther(p, frame)
	}
	h := e.conns.hash(p.src, p.dst, p.SrcPort, p.DstPort, p.Proto)
	if ci, dir := e.conns.lookup(p.src, p.dst, p.SrcPort, p.DstPort, p.Proto, h); ci >= 0 {
		if !e.connDead(ci) {
			return e.forwardConn(frame, p, ci, dir)
		}
		e.removeConn(ci) // lazy expiry; the packet is handled as if the entry never existed
	}
	if ri := e.lookupRule(p.dst, p.Proto, p.DstPort); ri >= 0 {
		if e.rules[ri].topo != rules.TopoDSR {
			e.glean(p.src, in, Ethernet(frame).Src())
		}
		return e.newFlow(frame, p, ri, h)
	}
	// Cisco IOS SLB and ILB alike let traffic no rule covers go on: to a VIP port without a
	// rule, or from a real server outside any connection (its own traffic, or a late packet).
	k := e.known[p.dst]
	if k.flags&knownVIP != 0 {
		return e.pass(gVIPPortUnmatched, frame)
	}
	if e.known[p.src].flags&knownServer != 0 && !e.isLocalAddr(p.dst) {
		return e.pass(gServerUnmatched, frame)
	}
	return e.passOther(p, frame)
}

// unbalanceable handles fragments and IPv6 packets with extension headers the engine does not
// walk: dropped when addressed to a VIP or proxy-src (Solaris drops every fragment to a VIP,
// spec §6.5), otherwise not ours to judge.
func (e *Engine) unbalanceable(frame []byte, p *Parsed) Result {
	if e.known[p.dst].flags&(knownVIP|knownProxy) == 0 {
		return e.passOther(p, frame)
	}
	if p.Fragment {
		e.count(gFragIn)
		return e.drop(gFragDropped, frame)
	}
	return e.drop(gIPv6ExtDropped, frame)
}

// lookupRule returns the index of the rule of the current snapshot covering a destination
// address, protocol and port, or -1.
func (e *Engine) lookupRule(dst addr, proto uint8, port uint16) int {
	s := e.snap
	if s == nil {
		return -1
	}
	for _, i := range e.vips.find(dst, proto) {
		r := &s.Rules[i]
		if r.MinPort == 0 || (port >= r.MinPort && port <= r.MaxPort) {
			return int(i)
		}
	}
	return -1
}

// passOther passes a packet the load balancer does not handle, counting whether it was
// addressed to the host itself or to someone else.
func (e *Engine) passOther(p *Parsed, frame []byte) Result {
	if e.isLocalAddr(p.dst) {
		return e.pass(gLocal, frame)
	}
	if p.Proto != ProtoTCP && p.Proto != ProtoUDP {
		return e.pass(gUnsupported, frame)
	}
	return e.pass(gUnmatched, frame)
}

// malformed counts a frame Decode rejected and drops it.
func (e *Engine) malformed(st ParseStatus, frame []byte) Result {
	k := gMalformedEthernet
	switch st {
	case ParseShortARP:
		k = gMalformedARP
	case ParseBadIPv4:
		k = gMalformedIPv4
	case ParseBadIPv4Checksum:
		k = gBadIPv4Checksum
	case ParseBadL4:
		k = gMalformedL4
	case ParseBadIPv6:
		k = gMalformedIPv6
	}
	e.count(gMalformed)
	return e.drop(k, frame)
}

// count bumps global counter k.
func (e *Engine) count(k int) { e.ctr.g[k]++ }

// drop counts reason k (unless it is gDropped itself) and the drop.
func (e *Engine) drop(k int, frame []byte) Result {
	if k != gDropped {
		e.ctr.g[k]++
	}
	e.ctr.g[gDropped]++
	return Result{Action: ActionDrop, Len: len(frame)}
}

// pass counts reason k and the pass.
func (e *Engine) pass(k int, frame []byte) Result {
	e.ctr.g[k]++
	e.ctr.g[gPassed]++
	return Result{Action: ActionPass, Len: len(frame)}
}

// send counts a frame the engine transmits on out.
func (e *Engine) send(out uint16, frame []byte) Result {
	e.ctr.g[gTxPackets]++
	e.ctr.g[gTxBytes] += uint64(len(frame))
	return Result{Action: ActionForward, Port: out, Len: len(frame)}
}

// sent counts a load-balanced packet of ipLen bytes for server slot s and transmits it.
func (e *Engine) sent(out uint16, frame []byte, s int32, ipLen int) Result {
	e.ctr.g[gForwarded]++
	e.ctr.serverAdd(s, ipLen)
	return e.send(out, frame)
}
