package datapath

import (
	"net/netip"
	"slices"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// ruleSlot is the engine's long-lived record of a rule, keyed by SnapRule.ID. It owns the rule's
// counters and outlives the rule in the configuration while connections created under it drain,
// as Solaris keeps a deleted rule's kstats until its connections are gone.
type ruleSlot struct {
	used      bool
	live      bool // present in the current snapshot
	wasLive   bool // present in the previous snapshot: scratch for applySnapshot
	id        uint64
	name      string
	refs      int           // connection entries created under this rule
	cursor    int           // round-robin cursor, carried across snapshots
	pcursor   int           // full-NAT proxy-src cursor, carried across snapshots
	connDrain time.Duration // the rule's conn-drain as last configured: applies after deletion too
	// Servers of the rule with a counter slot: those of the current snapshot and removed ones
	// whose connections still drain, so those still count on the right server.
	servers []serverSlot
	// Counters of the rule's reclaimed server slots: still part of the rule's totals.
	gonePkts, goneBytes uint64
}

type serverSlot struct {
	id      string
	addr    netip.Addr
	slot    int32
	live    bool // a server of the rule in the current snapshot
	wasLive bool // scratch for applySnapshot
}

// serverKey identifies a server of a rule across snapshots.
type serverKey struct {
	rule int32 // rule slot
	id   string
	addr netip.Addr
}

// serverRun is the packet path's view of a server slot across snapshots.
type serverRun struct {
	drainAt   int64  // conn-drain deadline on the worker clock; 0 = none (spec §6.9)
	idx       int32  // index in its rule's current Servers; -1 when not in the current snapshot
	rule      int32  // rule slot
	pos       int32  // index in the rule slot's servers
	refs      int32  // connection entries on this server slot
	gen       uint32 // bumped when the slot is reclaimed, so a persistence entry cannot follow it to a new server
	nh        uint32 // neighbour slot + 1 of the next hop toward the server, 0 = not cached
	nhEpoch   uint32 // neighbour table epoch nh belongs to
	active    bool   // in the current snapshot, enabled and usable
	wasActive bool   // active in the previous snapshot: scratch for applySnapshot
}

// ruleState is what the packet path needs of one rule of the current snapshot, by rule index.
// Its slices are windows on engine-owned pools, so picking up a snapshot allocates nothing.
type ruleState struct {
	slot      int32  // rule slot: counters and connection references
	id        uint64 // SnapRule.ID: part of the persistence key
	cursor    int    // round-robin position: next server index to try
	pcursor   int    // full-NAT: index of the proxy-src address used last
	timeoutMs uint32 // idle timeout of the rule's connections, ms
	stickyMs  uint32 // persist-timeout, ms
	topo      rules.Topo
	sticky    bool
	v6        bool
	pmask     addr // persistence mask for the rule's family
	// pick is the algorithm's selection (registry entry), nil for an unknown code; table is
	// what it picks from, in the snapshot.
	pick    func(t *rules.AlgoTable, f *rules.Flow, cursor int) int
	table   *rules.AlgoTable
	servers []serverState // by index in SnapRule.Servers
	proxies []natProxy    // full-NAT source addresses of the rule's family
}

// serverState is one server of a rule, pre-converted for the packet path.
type serverState struct {
	addr    addr
	slot    int32  // server counter slot
	nh      uint32 // DSR: neighbour slot + 1 of the next hop toward the server, 0 = not cached
	nhEpoch uint32 // neighbour table epoch nh belongs to
}

// natProxy is one full-NAT source address of a rule and its port arena.
type natProxy struct {
	addr  addr
	arena int32
}

// knownAddr says what an address is to the current snapshot.
type knownAddr struct {
	flags uint8
	rule  int32 // knownVIP: index of the first rule on the VIP, whose counters ICMP uses
}

const (
	knownVIP    = rules.KnownVIP    // VIP of a rule, enabled or not: answered in ARP/NDP
	knownProxy  = rules.KnownProxy  // full-NAT proxy-src address: answered in ARP/NDP
	knownServer = rules.KnownServer // back-end server of a rule
)

// applySnapshot makes s current. Control work at a burst boundary: everything derivable from
// the configuration was compiled into s, so this only indexes it. Only growth allocates (a
// larger configuration, a rule or server not seen before); picking up a snapshot of a known
// configuration allocates nothing.
func (e *Engine) applySnapshot(s *rules.Snapshot) {
	e.ctr.publish() // flush dirty lists before slots can change meaning
	for i := range e.rules {
		sl := &e.slots[e.rules[i].slot]
		sl.cursor, sl.pcursor = e.rules[i].cursor, e.rules[i].pcursor
	}
	for i := range e.slots {
		sl := &e.slots[i]
		sl.wasLive, sl.live = sl.live, false
		for j := range sl.servers {
			sv := &sl.servers[j]
			sv.wasLive, sv.live = sv.live, false
		}
	}
	for i := range e.srv {
		r := &e.srv[i]
		r.wasActive, r.active, r.idx = r.active, false, -1
	}
	var n, nServers, nProxies int
	if s != nil {
		n, nServers, nProxies = len(s.Rules), s.NumServers, s.NumProxies
	}
	e.rules = resize(e.rules, n)
	e.serverPool = resize(e.serverPool, nServers)
	e.proxyPool = resize(e.proxyPool, nProxies)
	e.indexKnown(s)
	if e.serverSlots == nil {
		e.serverSlots = make(map[serverKey]int32)
	}
	e.nat.beginSnapshot()
	var off, poff int
	for i := 0; i < n; i++ {
		off, poff = e.buildRule(s, i, off, poff)
	}
	e.nat.endSnapshot()
	e.snap = s
	e.vips.build(s)
	e.startDrains()
	for i := range e.slots {
		sl := &e.slots[i]
		e.layoutChanged = e.layoutChanged || sl.live != sl.wasLive
		for j := range sl.servers {
			e.layoutChanged = e.layoutChanged || sl.servers[j].live != sl.servers[j].wasLive
		}
	}
	e.reclaimRuleSlots()
	if e.layoutChanged {
		e.publishLayout()
	}
	e.resolveConfiguredNextHops()
}

// resize returns s with length n, reusing its array when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// indexKnown rebuilds the known-address map from the snapshot's list, unless the list is the
// one indexed already (a change of server state, the usual case, leaves it as it was).
func (e *Engine) indexKnown(s *rules.Snapshot) {
	var list []rules.KnownAddr
	if s != nil {
		list = s.Known
	}
	if e.known != nil && slices.Equal(list, e.knownList) {
		e.knownList = list
		return
	}
	if e.known == nil {
		e.known = make(map[addr]knownAddr, len(list))
	}
	clear(e.known)
	if e.handoff && e.steerKnown == nil {
		e.steerKnown = make(map[addr]uint8, len(list))
	}
	for i := range list {
		k := &list[i]
		a := addrFrom16(k.Addr[:])
		e.known[a] = knownAddr{flags: k.Flags, rule: k.Rule}
		if e.handoff {
			e.steerKnown[a] |= k.Flags
		}
	}
	e.knownList = list
}

// buildRule indexes rule i of s, its servers at serverPool[off:] and its proxy-src addresses at
// proxyPool[poff:], and returns the offsets past them.
func (e *Engine) buildRule(s *rules.Snapshot, i, off, poff int) (int, int) {
	r := &s.Rules[i]
	slot := e.ruleSlotFor(r.ID, r.Name)
	rsl := &e.slots[slot]
	rsl.live = true
	rsl.connDrain = r.ConnDrain
	e.conns.names.setRule(slot, addrFromNetip(r.VIP.Unmap()), r.TimeoutMs)
	v4 := r.VIP.Unmap().Is4()
	rs := &e.rules[i]
	ns, np := len(r.Servers), len(r.ProxySrc)
	*rs = ruleState{
		slot: slot, id: r.ID, cursor: rsl.cursor, pcursor: rsl.pcursor,
		timeoutMs: r.TimeoutMs, stickyMs: r.StickyMs,
		topo: r.Topo, v6: !v4, sticky: r.PMaskBits > 0, pmask: prefixMask(v4, r.PMaskBits),
		table:   &r.Table,
		servers: e.serverPool[off : off+ns : off+ns],
	}
	if r.Algorithm != nil {
		rs.pick = r.Algorithm.Pick
	}
	if rs.cursor >= ns {
		rs.cursor = 0
	}
	for j := range r.Servers {
		sv := &r.Servers[j]
		a := addrFromNetip(sv.Addr.Unmap())
		sl := e.serverSlotFor(slot, sv.ID, sv.Addr)
		if ss := &rs.servers[j]; ss.slot != sl || ss.addr != a {
			*ss = serverState{addr: a, slot: sl} // another server than last time: no cached next hop
		}
		run := &e.srv[sl]
		run.idx, run.active = int32(j), j < len(r.Table.Usable) && r.Table.Usable[j]
	}
	if r.Topo == rules.TopoNAT {
		rs.proxies = e.proxyPool[poff : poff+np : poff+np]
		for k, pa := range r.ProxySrc {
			a := addrFromNetip(pa.Unmap())
			rs.proxies[k] = natProxy{addr: a, arena: e.nat.arenaFor(a)}
			if rs.proxies[k].arena >= 0 {
				e.conns.names.setProxy(rs.proxies[k].arena, a)
			}
		}
		if rs.pcursor >= np {
			rs.pcursor = 0
		}
	}
	return off + ns, poff + np
}

// ruleSlotFor returns the slot of rule id, taking a free or new one for a rule not seen before.
func (e *Engine) ruleSlotFor(id uint64, name string) int32 {
	if s, ok := e.slotByID[id]; ok {
		if e.slots[s].name != name {
			e.slots[s].name, e.layoutChanged = name, true
		}
		return s
	}
	var s int32
	if n := len(e.freeSlots); n > 0 {
		s = e.freeSlots[n-1]
		e.freeSlots = e.freeSlots[:n-1]
	} else {
		s = int32(len(e.slots))
		e.slots = append(e.slots, ruleSlot{})
		e.ctr.rules = append(e.ctr.rules, ruleCounters{})
	}
	e.slots[s] = ruleSlot{used: true, id: id, name: name, servers: e.slots[s].servers[:0]}
	e.ctr.rules[s] = ruleCounters{}
	e.slotByID[id] = s
	e.layoutChanged = true
	if len(e.ctr.dirtyRules) < len(e.slots) {
		e.ctr.dirtyRules = make([]int32, 2*len(e.slots)) // empty: publish ran first
	}
	return s
}

// serverSlotFor returns the counter slot of server (id, a) in rule slot rs, taking a free or
// new one for a server the rule has no slot for. A map lookup, so a snapshot pick-up is linear
// in the servers.
func (e *Engine) serverSlotFor(rs int32, id string, a netip.Addr) int32 {
	rsl := &e.slots[rs]
	k := serverKey{rule: rs, id: id, addr: a}
	if s, ok := e.serverSlots[k]; ok {
		rsl.servers[e.srv[s].pos].live = true
		return s
	}
	var s int32
	if n := len(e.freeServerSlots); n > 0 {
		s = e.freeServerSlots[n-1]
		e.freeServerSlots = e.freeServerSlots[:n-1]
	} else {
		s = int32(len(e.ctr.servers))
		e.ctr.servers = append(e.ctr.servers, serverCounters{})
		e.srv = append(e.srv, serverRun{})
	}
	e.ctr.servers[s] = serverCounters{}
	e.srv[s] = serverRun{idx: -1, rule: rs, pos: int32(len(rsl.servers)), gen: e.srv[s].gen}
	e.conns.names.setServer(s, addrFromNetip(a.Unmap()))
	rsl.servers = append(rsl.servers, serverSlot{id: id, addr: a, slot: s, live: true})
	e.serverSlots[k] = s
	e.layoutChanged = true
	if len(e.ctr.dirtyServers) < len(e.ctr.servers) {
		e.ctr.dirtyServers = make([]int32, 2*len(e.ctr.servers))
	}
	return s
}

// reclaimRuleSlots frees the slots of rules gone from the configuration with no connections
// left, and the server slots of servers gone from their rule with no connections left (their
// counters stay in the rule's totals). Run after the counters were published.
func (e *Engine) reclaimRuleSlots() {
	e.reclaimPending = false
	for i := range e.slots {
		rsl := &e.slots[i]
		if !rsl.used {
			continue
		}
		if !rsl.live && rsl.refs <= 0 {
			for _, sv := range rsl.servers {
				e.freeServerSlot(int32(i), sv)
			}
			delete(e.slotByID, rsl.id)
			*rsl = ruleSlot{servers: rsl.servers[:0]}
			e.freeSlots = append(e.freeSlots, int32(i))
			e.layoutChanged = true
			continue
		}
		w := 0
		for _, sv := range rsl.servers {
			if !sv.live && e.srv[sv.slot].refs <= 0 {
				rsl.gonePkts += e.ctr.servers[sv.slot].pkts
				rsl.goneBytes += e.ctr.servers[sv.slot].bytes
				e.freeServerSlot(int32(i), sv)
				e.layoutChanged = true
				continue
			}
			e.srv[sv.slot].pos = int32(w)
			rsl.servers[w] = sv
			w++
		}
		clear(rsl.servers[w:])
		rsl.servers = rsl.servers[:w]
	}
}

// freeServerSlot returns server slot sv of rule slot rs to the free list.
func (e *Engine) freeServerSlot(rs int32, sv serverSlot) {
	delete(e.serverSlots, serverKey{rule: rs, id: sv.id, addr: sv.addr})
	e.srv[sv.slot] = serverRun{idx: -1, rule: -1, gen: e.srv[sv.slot].gen + 1}
	e.freeServerSlots = append(e.freeServerSlots, sv.slot)
}

// releaseServer drops a connection's reference on server slot s; the last one of a server gone
// from the configuration lets its slot be reclaimed at the end of the burst.
func (e *Engine) releaseServer(s int32) {
	run := &e.srv[s]
	if run.refs--; run.refs <= 0 && run.idx < 0 {
		e.reclaimPending = true
	}
}

// publishLayout replaces the structure Stats reads after slots changed, carrying current values.
func (e *Engine) publishLayout() {
	p := &published{
		rules:   make([]pubRule, len(e.slots)),
		servers: make([]pubServer, len(e.ctr.servers)),
	}
	for i := range e.slots {
		rsl := &e.slots[i]
		if !rsl.used {
			continue
		}
		pr := &p.rules[i]
		pr.used, pr.draining, pr.id, pr.name = true, !rsl.live, rsl.id, rsl.name
		pr.gonePkts, pr.goneBytes = rsl.gonePkts, rsl.goneBytes
		pr.servers = make([]int32, len(rsl.servers))
		for k := range e.ctr.rules[i].v {
			pr.v[k].Store(e.ctr.rules[i].v[k])
		}
		for j, sv := range rsl.servers {
			pr.servers[j] = sv.slot
			ps := &p.servers[sv.slot]
			ps.id, ps.addr, ps.removed = sv.id, sv.addr, !sv.live
			ps.pkts.Store(e.ctr.servers[sv.slot].pkts)
			ps.bytes.Store(e.ctr.servers[sv.slot].bytes)
		}
	}
	e.ctr.seq.Add(1)
	e.ctr.pub.Store(p)
	e.ctr.seq.Add(1)
	e.layoutChanged = false
}

// pickServer runs the rule's algorithm (spec §6.6) through its registry entry and returns an
// index into its servers, or -1 if none is usable. Round robin does not move its cursor here:
// the caller advances it once the packet is on its way (per connection for NAT, per packet for
// DSR). The rule must have an algorithm (rs.pick non-nil).
func (e *Engine) pickServer(rs *ruleState, p *Parsed) int {
	f := &e.flow // in the engine: a pointer handed to a func value would escape
	*f = rules.Flow{SrcHi: p.src.hi, SrcLo: p.src.lo, DstHi: p.dst.hi, DstLo: p.dst.lo, SrcPort: p.SrcPort}
	return rs.pick(rs.table, f, rs.cursor)
}

// advance moves the round-robin cursor past server si after it was used.
func (rs *ruleState) advance(si int) { rs.cursor = si + 1 }
