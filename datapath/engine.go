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

	"github.com/ilbgo/ilb/rules"
)

// PortConfig describes one NIC port the engine sends and receives on.
type PortConfig struct {
	MAC     [6]byte
	Addrs   []netip.Prefix // interface addresses with prefix (IPv4 for now)
	Gateway netip.Addr     // optional default gateway reachable through this port
}

// Config configures an Engine.
type Config struct {
	Ports        []PortConfig // index = port number used in Process/Result
	ConnCapacity int          // connection entries (rounded up to a power of two); 0 = DefaultConnCapacity
	Snapshot     *atomic.Pointer[rules.Snapshot]
	// NeighbourCapacity is the ARP cache size (rounded up to a power of two); 0 = DefaultNeighbourCapacity.
	NeighbourCapacity int
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
)

// Result tells the worker what to do with the frame it passed to Process.
type Result struct {
	Action Action
	Port   uint16 // out port for ActionForward
	Len    int    // frame length after rewrite
}

// Engine is the packet engine of one worker. All methods except Stats and RequestNATDump must be
// called from that worker's goroutine.
type Engine struct {
	now    int64
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
	slots  []ruleSlot // by rule slot
	routes routes

	slotByID        map[uint64]int32
	freeSlots       []int32
	freeServerSlots []int32
	reclaimPending  bool
	neighScan       uint32
	neighPacer      pacer
	connPacer       pacer
	started         bool
}

// routes is the static IPv4 routing the engine derives from its ports.
type routes struct {
	connected   []connectedNet // longest prefix first
	hasGateway  bool
	gateway     uint32
	gatewayPort uint16
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
	e := &Engine{snapP: cfg.Snapshot, slotByID: make(map[uint64]int32)}
	for i, pc := range cfg.Ports {
		if !isUnicastMAC(pc.MAC) {
			return nil, fmt.Errorf("datapath: port %d: MAC %x is not a unicast address", i, pc.MAC)
		}
		pt := port{mac: pc.MAC}
		for _, pfx := range pc.Addrs {
			if !pfx.IsValid() || !pfx.Addr().Is4() {
				return nil, fmt.Errorf("datapath: port %d: address %v: only IPv4 prefixes are supported", i, pfx)
			}
			a := v4Of(pfx.Addr())
			pt.addrs = append(pt.addrs, a)
			mask := uint32(0)
			if pfx.Bits() > 0 {
				mask = ^uint32(0) << (32 - pfx.Bits())
			}
			e.routes.connected = append(e.routes.connected,
				connectedNet{net: a & mask, mask: mask, bits: pfx.Bits(), port: uint16(i), src: a})
		}
		if pc.Gateway.IsValid() {
			if !pc.Gateway.Is4() {
				return nil, fmt.Errorf("datapath: port %d: gateway %v: only IPv4 is supported", i, pc.Gateway)
			}
			if !e.routes.hasGateway { // the first port with a gateway carries the default route
				e.routes.hasGateway, e.routes.gateway, e.routes.gatewayPort = true, v4Of(pc.Gateway), uint16(i)
			}
		}
		e.ports = append(e.ports, pt)
	}
	sort.SliceStable(e.routes.connected, func(a, b int) bool {
		return e.routes.connected[a].bits > e.routes.connected[b].bits
	})
	var seed [3]uint64
	var rb [24]byte
	_, _ = rand.Read(rb[:]) // crypto/rand.Read never fails on supported platforms
	for i := range seed {
		seed[i] = binary.LittleEndian.Uint64(rb[8*i:])
	}
	e.conns = newConnTable(connCap, seed)
	e.neigh = newNeighTable(neighCap)
	e.arpq = newARPQueue(2 * len(e.neigh.slots))
	e.ctr.pub.Store(&published{})
	e.ctr.interval = publishInterval
	return e, nil
}

// BeginBurst starts a burst at time now (monotonic ns from the worker) and picks up a newly
// published configuration snapshot.
func (e *Engine) BeginBurst(now int64) {
	e.now = now
	if s := e.snapP.Load(); s != e.snap || !e.started {
		e.started = true
		e.applySnapshot(s)
	}
}

// EndBurst publishes the burst's counters and does a slice of periodic work: connection expiry,
// neighbour refresh, slot reclamation, a pending NAT table dump.
func (e *Engine) EndBurst() {
	e.sweepConns()
	e.maintainNeighbours()
	if e.reclaimPending {
		e.ctr.publish()
		e.reclaimRuleSlots()
		e.publishLayout()
	}
	e.ctr.maybePublish(e.now)
	e.serveNATDump()
}

// Process handles one received frame in place and says what to do with it. frame has the data
// length; its capacity may be larger. Process never panics and never allocates.
func (e *Engine) Process(frame []byte, inPort uint16) Result {
	e.ctr.g[gRxPackets]++
	e.ctr.g[gRxBytes] += uint64(len(frame))
	if int(inPort) >= len(e.ports) {
		return e.drop(gUnknownPort, frame)
	}
	p := &e.pkt
	if st := p.Decode(frame); st != ParseOK {
		return e.malformed(st, frame)
	}
	switch p.EtherType {
	case EtherTypeIPv4:
		return e.handleIPv4(frame, p, inPort)
	case EtherTypeARP:
		return e.handleARP(frame, p, inPort)
	}
	return e.pass(gUnsupported, frame)
}

// handleIPv4 classifies an IPv4 packet: existing connection, new flow to a rule, or the host.
func (e *Engine) handleIPv4(frame []byte, p *Parsed, in uint16) Result {
	eth := Ethernet(frame)
	if eth.Dst() != e.ports[in].mac {
		if eth.DstIsGroup() {
			return e.pass(gUnmatched, frame) // broadcast/multicast: never balanced
		}
		return e.drop(gNotForUs, frame)
	}
	if p.Fragment {
		// Solaris drops every fragment addressed to a VIP (spec §6.5); others are not ours.
		if e.snap.HasVIP(p.dst.netip()) {
			e.count(gFragIn)
			return e.drop(gFragDropped, frame)
		}
		return e.passOther(p, frame)
	}
	if p.Proto != ProtoTCP && p.Proto != ProtoUDP {
		return e.passOther(p, frame)
	}
	h := e.conns.hash(p.src, p.dst, p.SrcPort, p.DstPort, p.Proto)
	if ci, dir := e.conns.lookup(p.src, p.dst, p.SrcPort, p.DstPort, p.Proto, h); ci >= 0 {
		if !e.conns.entries[ci].expired(e.now) {
			return e.forwardConn(frame, p, ci, dir)
		}
		e.removeConn(ci) // lazy expiry; the packet is handled as if the entry never existed
	}
	if ri := e.snap.Lookup(p.dst.netip(), p.Proto, p.DstPort); ri >= 0 {
		return e.newFlow(frame, p, ri, h)
	}
	return e.passOther(p, frame)
}

// passOther passes an IPv4 packet the load balancer does not handle, counting whether it was
// addressed to the host itself or to someone else.
func (e *Engine) passOther(p *Parsed, frame []byte) Result {
	if e.isLocalAddr(p.dst.v4()) {
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
