package datapath

import (
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// Global counter slots. The worker increments plain uint64s in an array indexed by these; EndBurst
// publishes the array with atomic stores and Stats maps it onto GlobalCounters by name.
const (
	gRxPackets = iota
	gRxBytes
	gTxPackets
	gTxBytes
	gForwarded
	gARPRepliesSent
	gARPRequestsSent
	gARPRepliesReceived
	gARPIgnored
	gNeighbourMisses
	gNoRoute
	gMalformed
	gMalformedEthernet
	gMalformedARP
	gMalformedIPv4
	gBadIPv4Checksum
	gMalformedL4
	gTTLExceeded
	gNoMemory
	gConnConflict
	gUnmatched
	gLocal
	gNotProcessed
	gUnsupported
	gNotForUs
	gFragIn
	gFragDropped
	gUnknownPort
	gPassed
	gDropped
	gMalformedIPv6
	gIPv6ExtDropped
	gVIPPortUnmatched
	gServerUnmatched
	gNoPort
	gStickyFull
	gConnDrained
	gICMPEchoReplies
	gICMPTooBigForwarded
	gICMPTooBigDropped
	gICMPDropped
	gNDPAdvertsSent
	gNDPSolicitsSent
	gNDPAdvertsReceived
	gNDPIgnored
	gNDPInvalid
	gNoRoom
	gTCPNoConn
	gHalfOpenEvicted
	gHalfOpenExpired
	gConnReset
	gVLANDropped
	gNextHopHeld
	gNextHopHeldSent
	gNextHopHeldExpired
	gNextHopHeldOverflow
	gChecksumSampled
	gChecksumBad
	gConnEntries
	gHalfOpenEntries
	gUnknownAlgo
	gHandoffOut
	gHandoffIn
	gNeighbourCopies
	numGlobalCounters
)

// GlobalCounters are an engine's totals since it was created.
type GlobalCounters struct {
	RxPackets, RxBytes uint64 // frames handed to Process
	TxPackets, TxBytes uint64 // frames the engine asked to send: forwarded, ARP/NDP and ICMP replies, ARP/NDP requests
	Forwarded          uint64 // load-balanced packets sent (both directions)

	ARPRepliesSent     uint64 // requests for our addresses answered
	ARPRequestsSent    uint64 // resolution requests originated through NextControlFrame
	ARPRepliesReceived uint64 // replies seen (and learned from where acceptable); passed to the host
	ARPIgnored         uint64 // ARP not for us or not Ethernet/IPv4; dropped
	NeighbourMisses    uint64 // forwarding dropped because the next hop's MAC was unknown
	NoRoute            uint64 // no connected subnet and no gateway for the destination; dropped

	Malformed         uint64 // sum of the malformed reasons below; all dropped
	MalformedEthernet uint64 // frame shorter than its Ethernet header / VLAN tag
	MalformedARP      uint64 // truncated ARP
	MalformedIPv4     uint64 // bad version, IHL or total length
	BadIPv4Checksum   uint64 // IPv4 header checksum wrong
	MalformedL4       uint64 // truncated or inconsistent TCP/UDP header
	TTLExceeded       uint64 // would have been forwarded with TTL 0; dropped
	NoMemory          uint64 // connection table full; dropped (also counted per rule)
	ConnConflict      uint64 // new flow whose return key is already taken by another entry; dropped

	Unmatched    uint64 // matching no connection and no rule, not for us (also multicast/broadcast, link-local); passed
	Local        uint64 // addressed to an interface address of the engine; passed to the host
	NotProcessed uint64 // hit a disabled rule; passed (also counted per rule)
	Unsupported  uint64 // EtherType or IP protocol the engine does not handle; passed
	NotForUs     uint64 // unicast frame for another MAC; dropped
	FragIn       uint64 // IPv4 fragments and IPv6 Fragment headers addressed to a VIP or proxy-src (ip_frag_in)
	FragDropped  uint64 // of which dropped (ip_frag_dropped): all of them, as Solaris does
	UnknownPort  uint64 // Process called with a port number outside Config.Ports; dropped

	Passed  uint64 // total frames answered with ActionPass
	Dropped uint64 // total frames answered with ActionDrop

	MalformedIPv6    uint64 // bad IPv6 header, payload length or extension header chain; dropped
	IPv6ExtDropped   uint64 // IPv6 with a routing (or other unwalked) extension header toward a VIP or proxy-src; dropped
	VIPPortUnmatched uint64 // TCP/UDP to a VIP on a port (or protocol) no rule covers; passed
	ServerUnmatched  uint64 // TCP/UDP from a back-end server matching no connection; passed, as ILB does
	NoPort           uint64 // full-NAT source ports of the proxy-src addresses exhausted; dropped (also per rule)
	StickyFull       uint64 // persistence table full; dropped (also counted per rule as nomem)
	ConnDrained      uint64 // connections cut because their server's conn-drain deadline passed

	ICMPEchoReplies     uint64 // echo requests to a VIP or proxy-src answered by the engine
	ICMPTooBigForwarded uint64 // frag-needed / packet-too-big translated and forwarded
	ICMPTooBigDropped   uint64 // frag-needed / packet-too-big matching no connection (or invalid); dropped
	ICMPDropped         uint64 // any other ICMP to a VIP or proxy-src; dropped

	NDPAdvertsSent     uint64 // neighbor solicitations for our addresses answered
	NDPSolicitsSent    uint64 // resolution solicitations originated through NextControlFrame
	NDPAdvertsReceived uint64 // neighbor advertisements seen (learned where acceptable); passed to the host
	NDPIgnored         uint64 // solicitations for addresses we do not own; dropped
	NDPInvalid         uint64 // NDP failing RFC 4861 §7.1 validation (hop limit, code, checksum, options); dropped
	NoRoom             uint64 // a reply did not fit the frame's capacity; dropped

	TCPNoConn           uint64 // TCP segment other than a SYN to a NAT rule, matching no connection; dropped (also per rule)
	HalfOpenEvicted     uint64 // half-open or closing entries evicted to make room for a new connection
	HalfOpenExpired     uint64 // half-open or closing entries removed at their (short) timeout
	ConnReset           uint64 // established connections that saw a RST and entered the closing state
	VLANDropped         uint64 // 802.1Q-tagged frames on an untagged port; dropped
	NextHopHeld         uint64 // packets held while their next hop's MAC was resolved
	NextHopHeldSent     uint64 // of which sent once it was
	NextHopHeldExpired  uint64 // of which dropped, unresolved after the hold timeout
	NextHopHeldOverflow uint64 // packets dropped on a neighbour miss because the hold queue (or the neighbour's share) was full
	ChecksumSampled     uint64 // TCP/UDP packets whose checksum was verified (one in 64 per port)
	ChecksumBad         uint64 // of which wrong: see Stats.Ports for the port
	ConnEntries         uint64 // connection entries in use (a gauge)
	HalfOpenEntries     uint64 // of which half-open or closing (a gauge)
	UnknownAlgo         uint64 // new flows of a rule whose algorithm code has no registry entry; dropped (pkt_dropped)
	HandoffOut          uint64 // frames handed to the worker owning them
	HandoffIn           uint64 // frames another worker handed to this one
	NeighbourCopies     uint64 // ARP/NDP frames another worker received, learned from here too
}

func (a *globalArray) export() GlobalCounters {
	return GlobalCounters{
		RxPackets: a[gRxPackets], RxBytes: a[gRxBytes], TxPackets: a[gTxPackets], TxBytes: a[gTxBytes],
		Forwarded:      a[gForwarded],
		ARPRepliesSent: a[gARPRepliesSent], ARPRequestsSent: a[gARPRequestsSent],
		ARPRepliesReceived: a[gARPRepliesReceived], ARPIgnored: a[gARPIgnored],
		NeighbourMisses: a[gNeighbourMisses], NoRoute: a[gNoRoute],
		Malformed: a[gMalformed], MalformedEthernet: a[gMalformedEthernet], MalformedARP: a[gMalformedARP],
		MalformedIPv4: a[gMalformedIPv4], BadIPv4Checksum: a[gBadIPv4Checksum], MalformedL4: a[gMalformedL4],
		TTLExceeded: a[gTTLExceeded], NoMemory: a[gNoMemory], ConnConflict: a[gConnConflict],
		Unmatched: a[gUnmatched], Local: a[gLocal], NotProcessed: a[gNotProcessed], Unsupported: a[gUnsupported],
		NotForUs: a[gNotForUs], FragIn: a[gFragIn], FragDropped: a[gFragDropped], UnknownPort: a[gUnknownPort],
		Passed: a[gPassed], Dropped: a[gDropped],
		MalformedIPv6: a[gMalformedIPv6], IPv6ExtDropped: a[gIPv6ExtDropped],
		VIPPortUnmatched: a[gVIPPortUnmatched], ServerUnmatched: a[gServerUnmatched],
		NoPort: a[gNoPort], StickyFull: a[gStickyFull], ConnDrained: a[gConnDrained],
		ICMPEchoReplies: a[gICMPEchoReplies], ICMPTooBigForwarded: a[gICMPTooBigForwarded],
		ICMPTooBigDropped: a[gICMPTooBigDropped], ICMPDropped: a[gICMPDropped],
		NDPAdvertsSent: a[gNDPAdvertsSent], NDPSolicitsSent: a[gNDPSolicitsSent],
		NDPAdvertsReceived: a[gNDPAdvertsReceived], NDPIgnored: a[gNDPIgnored], NDPInvalid: a[gNDPInvalid],
		NoRoom:    a[gNoRoom],
		TCPNoConn: a[gTCPNoConn], HalfOpenEvicted: a[gHalfOpenEvicted], HalfOpenExpired: a[gHalfOpenExpired],
		ConnReset: a[gConnReset], VLANDropped: a[gVLANDropped],
		NextHopHeld: a[gNextHopHeld], NextHopHeldSent: a[gNextHopHeldSent],
		NextHopHeldExpired: a[gNextHopHeldExpired], NextHopHeldOverflow: a[gNextHopHeldOverflow],
		ChecksumSampled: a[gChecksumSampled], ChecksumBad: a[gChecksumBad],
		ConnEntries: a[gConnEntries], HalfOpenEntries: a[gHalfOpenEntries], UnknownAlgo: a[gUnknownAlgo],
		HandoffOut: a[gHandoffOut], HandoffIn: a[gHandoffIn], NeighbourCopies: a[gNeighbourCopies],
	}
}

type globalArray [numGlobalCounters]uint64

// Per-port counter slots.
const (
	pChecksumSampled = iota
	pChecksumBad
	pVLANDropped
	numPortCounters
)

// PortStats are one port's counters (index as Config.Ports).
type PortStats struct {
	ChecksumSampled uint64 // TCP/UDP packets received whose checksum was verified
	ChecksumBad     uint64 // of which wrong (an offload left them partial?)
	VLANDropped     uint64 // tagged frames dropped
}

type portArray [numPortCounters]uint64

func (a *portArray) export() PortStats {
	return PortStats{ChecksumSampled: a[pChecksumSampled], ChecksumBad: a[pChecksumBad], VLANDropped: a[pVLANDropped]}
}

// Per-rule counter slots: the rulestat kstats of Solaris (spec §2.7). Packet/byte pairs are
// adjacent so one helper (ruleAdd) bumps both; the ICMP counters are packets only (ruleInc).
const (
	rPktNotProcessed = iota
	rBytesNotProcessed
	rPktDropped
	rBytesDropped
	rNoMemPktDropped
	rNoMemBytesDropped
	rNoPortPktDropped
	rNoPortBytesDropped
	rICMPEchoProcessed
	rICMPDropped
	rICMPTooBigProcessed
	rICMPTooBigDropped
	numRuleCounters
)

// RuleCounters are a rule's rulestat kstats (spec §2.7).
type RuleCounters struct {
	PktNotProcessed, BytesNotProcessed     uint64 // hit the rule while it was disabled (PKT_U/BYTES_U)
	PktDropped, BytesDropped               uint64 // PKT_D/BYTES_D
	NoMemPktDropped, NoMemBytesDropped     uint64 // connection table full (NOMEMP_D/NOMEMB_D)
	NoPortPktDropped, NoPortBytesDropped   uint64 // full-NAT ports exhausted (NOPORTP_D/NOPORTB_D)
	ICMPEchoProcessed, ICMPDropped         uint64 // ICMP_P/ICMP_D
	ICMPTooBigProcessed, ICMPTooBigDropped uint64 // ICMP2BIG_P/ICMP2BIG_D
}

func exportRule(a *[numRuleCounters]uint64) RuleCounters {
	return RuleCounters{
		PktNotProcessed: a[rPktNotProcessed], BytesNotProcessed: a[rBytesNotProcessed],
		PktDropped: a[rPktDropped], BytesDropped: a[rBytesDropped],
		NoMemPktDropped: a[rNoMemPktDropped], NoMemBytesDropped: a[rNoMemBytesDropped],
		NoPortPktDropped: a[rNoPortPktDropped], NoPortBytesDropped: a[rNoPortBytesDropped],
		ICMPEchoProcessed: a[rICMPEchoProcessed], ICMPDropped: a[rICMPDropped],
		ICMPTooBigProcessed: a[rICMPTooBigProcessed], ICMPTooBigDropped: a[rICMPTooBigDropped],
	}
}

// RuleStats is one rule's counters. Rules deleted from the configuration stay listed (Draining)
// while connections created under them live, as Solaris keeps their kstats.
type RuleStats struct {
	ID       uint64
	Name     string
	Draining bool // no longer in the current snapshot
	RuleCounters
	PktProcessed, BytesProcessed uint64 // sum over Servers (PKT_P/BYTES_P)
	NumServers                   int    // num_servers: servers of the rule in the current snapshot
	Servers                      []ServerStats
}

// ServerStats is one server's sstat kstats within a rule; bytes are IP packet lengths, both directions.
type ServerStats struct {
	ID                           string
	Addr                         netip.Addr
	Removed                      bool // no longer a server of the rule in the current snapshot
	PktProcessed, BytesProcessed uint64
}

// Stats is a copy of an engine's counters as of the end of a burst.
type Stats struct {
	Global   GlobalCounters
	NumRules int         // num_rules: rules of the current snapshot (draining ones excluded)
	Rules    []RuleStats // ascending ID
	Ports    []PortStats // index as Config.Ports
}

// ruleCounters are a rule slot's live counters, written by the worker only.
type ruleCounters struct {
	v     [numRuleCounters]uint64
	dirty bool // in the dirty list, to be published at EndBurst
}

// serverCounters are a server slot's live counters, written by the worker only.
type serverCounters struct {
	pkts, bytes uint64
	dirty       bool
}

// published is what Stats reads: immutable names and layout plus atomically updated values.
// The worker replaces it (one pointer swap) when rule or server slots change.
type published struct {
	rules   []pubRule   // by rule slot
	servers []pubServer // by server slot
}

type pubRule struct {
	used     bool
	draining bool
	id       uint64
	name     string
	servers  []int32 // server slots of the rule
	v        [numRuleCounters]atomic.Uint64
	// Processed counters of the rule's reclaimed server slots, part of its totals.
	gonePkts, goneBytes uint64
}

type pubServer struct {
	id          string
	addr        netip.Addr
	removed     bool
	pkts, bytes atomic.Uint64
}

// counters groups the live counters, their published copies and the dirty lists.
type counters struct {
	g    globalArray
	pubG [numGlobalCounters]atomic.Uint64

	ports    []portArray // by port
	pubPorts [][numPortCounters]atomic.Uint64

	rules   []ruleCounters   // by rule slot
	servers []serverCounters // by server slot

	// Dirty lists have room for every slot, and a slot enters at most once per burst, so
	// marking never grows them on the packet path.
	dirtyRules   []int32
	nDirtyRules  int
	dirtyServers []int32
	nDirtySrv    int

	pub atomic.Pointer[published]
	// seq is odd while the worker publishes; Stats retries until it reads an even, unchanged value,
	// so a reader sees all counters as of one burst's end.
	seq atomic.Uint64

	// readers counts Stats calls in progress; the worker postpones paced publications while
	// there are any, so a reader needs at most one retry however slow its copy is.
	readers atomic.Int32

	// Publication is paced: at most once per interval of the worker's clock, which keeps the
	// atomic stores off most bursts.
	interval    int64
	lastPublish int64
}

// publishInterval is how stale Stats may be: show-statistics samples once a second.
const publishInterval = int64(time.Millisecond)

// maxStatsRetries bounds how often Stats retries a read that raced with a publication; only a
// storm of configuration changes (whose publications are not postponed) can exhaust it. Past it,
// Stats returns values that are each exact but may straddle publications, rather than wait.
const maxStatsRetries = 1000

// maybePublish publishes if the interval has passed since the last publication and no reader
// is copying; a postponed publication happens at a later burst, nothing is lost.
func (c *counters) maybePublish(now int64) {
	if now-c.lastPublish >= c.interval && c.readers.Load() == 0 {
		c.lastPublish = now
		c.publish()
	}
}

// ruleInc bumps the single (packet-only) rule counter k of rule slot s: the ICMP kstats.
func (c *counters) ruleInc(s int32, k int) {
	rc := &c.rules[s]
	rc.v[k]++
	if !rc.dirty {
		rc.dirty = true
		c.dirtyRules[c.nDirtyRules] = s
		c.nDirtyRules++
	}
}

// ruleAdd adds one packet of n bytes to the pair starting at k of rule slot s.
func (c *counters) ruleAdd(s int32, k int, n int) {
	rc := &c.rules[s]
	rc.v[k]++
	rc.v[k+1] += uint64(n)
	if !rc.dirty {
		rc.dirty = true
		c.dirtyRules[c.nDirtyRules] = s
		c.nDirtyRules++
	}
}

// serverAdd adds one processed packet of n bytes to server slot s.
func (c *counters) serverAdd(s int32, n int) {
	sc := &c.servers[s]
	sc.pkts++
	sc.bytes += uint64(n)
	if !sc.dirty {
		sc.dirty = true
		c.dirtyServers[c.nDirtySrv] = s
		c.nDirtySrv++
	}
}

// initPorts sizes the per-port counters.
func (c *counters) initPorts(n int) {
	c.ports = make([]portArray, n)
	c.pubPorts = make([][numPortCounters]atomic.Uint64, n)
}

// portsChanged reports whether a per-port counter differs from its published value.
func (c *counters) portsChanged() bool {
	for p := range c.ports {
		for k, v := range c.ports[p] {
			if c.pubPorts[p][k].Load() != v {
				return true
			}
		}
	}
	return false
}

// publish makes this burst's counter values visible to Stats. It stores only what changed.
func (c *counters) publish() {
	changed := c.nDirtyRules > 0 || c.nDirtySrv > 0
	if !changed {
		for i := range c.g {
			if c.pubG[i].Load() != c.g[i] {
				changed = true
				break
			}
		}
		if !changed && !c.portsChanged() {
			return
		}
	}
	c.seq.Add(1)
	for i := range c.g {
		if c.pubG[i].Load() != c.g[i] {
			c.pubG[i].Store(c.g[i])
		}
	}
	for p := range c.ports {
		for k, v := range c.ports[p] {
			if c.pubPorts[p][k].Load() != v {
				c.pubPorts[p][k].Store(v)
			}
		}
	}
	p := c.pub.Load()
	for _, s := range c.dirtyRules[:c.nDirtyRules] {
		rc := &c.rules[s]
		rc.dirty = false
		if int(s) < len(p.rules) {
			for k := range rc.v {
				p.rules[s].v[k].Store(rc.v[k])
			}
		}
	}
	c.nDirtyRules = 0
	for _, s := range c.dirtyServers[:c.nDirtySrv] {
		sc := &c.servers[s]
		sc.dirty = false
		if int(s) < len(p.servers) {
			p.servers[s].pkts.Store(sc.pkts)
			p.servers[s].bytes.Store(sc.bytes)
		}
	}
	c.nDirtySrv = 0
	c.seq.Add(1)
}

// Stats returns a copy of the counters as last published: at the end of a burst, at most about
// a millisecond of worker time old. Safe from any goroutine.
func (e *Engine) Stats() Stats {
	c := &e.ctr
	c.readers.Add(1)
	defer c.readers.Add(-1)
	for try := 0; ; try++ {
		s1 := c.seq.Load()
		if s1&1 != 0 && try < maxStatsRetries {
			runtime.Gosched() // the worker is publishing; it holds the odd value for a few stores only
			continue
		}
		st := c.read()
		if c.seq.Load() == s1 || try >= maxStatsRetries {
			return st
		}
	}
}

// read builds a Stats from the published values; Stats validates it against seq.
func (c *counters) read() Stats {
	var g globalArray
	for i := range g {
		g[i] = c.pubG[i].Load()
	}
	st := Stats{Global: g.export(), Ports: make([]PortStats, len(c.pubPorts))}
	for i := range c.pubPorts {
		var a portArray
		for k := range a {
			a[k] = c.pubPorts[i][k].Load()
		}
		st.Ports[i] = a.export()
	}
	p := c.pub.Load()
	if p == nil {
		return st
	}
	for i := range p.rules {
		pr := &p.rules[i]
		if !pr.used {
			continue
		}
		var v [numRuleCounters]uint64
		for k := range v {
			v[k] = pr.v[k].Load()
		}
		rs := RuleStats{ID: pr.id, Name: pr.name, Draining: pr.draining, RuleCounters: exportRule(&v),
			PktProcessed: pr.gonePkts, BytesProcessed: pr.goneBytes}
		rs.Servers = make([]ServerStats, 0, len(pr.servers))
		for _, s := range pr.servers {
			ps := &p.servers[s]
			ss := ServerStats{ID: ps.id, Addr: ps.addr, Removed: ps.removed,
				PktProcessed: ps.pkts.Load(), BytesProcessed: ps.bytes.Load()}
			rs.PktProcessed += ss.PktProcessed
			rs.BytesProcessed += ss.BytesProcessed
			if !ss.Removed {
				rs.NumServers++
			}
			rs.Servers = append(rs.Servers, ss)
		}
		if !rs.Draining {
			st.NumRules++
		}
		st.Rules = append(st.Rules, rs)
	}
	slices.SortFunc(st.Rules, func(a, b RuleStats) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return st
}
