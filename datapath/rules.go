package datapath

import (
	"math"
	"net/netip"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// ruleSlot is the engine's long-lived record of a rule, keyed by SnapRule.ID. It owns the rule's
// counters and outlives the rule in the configuration while connections created under it drain,
// as Solaris keeps a deleted rule's kstats until its connections are gone.
type ruleSlot struct {
	used      bool
	live      bool // present in the current snapshot
	id        uint64
	name      string
	refs      int           // connection entries created under this rule
	cursor    int           // round-robin cursor, carried across snapshots
	pcursor   int           // full-NAT proxy-src cursor, carried across snapshots
	connDrain time.Duration // the rule's conn-drain as last configured: applies after deletion too
	// Servers ever seen in the rule, keyed by ID and address, with their counter slots. They are
	// kept while the rule slot lives so draining connections still count on the right server.
	servers []serverSlot
}

type serverSlot struct {
	id   string
	addr netip.Addr
	slot int32
	live bool // a server of the rule in the current snapshot
}

// serverRun is the packet path's view of a server slot across snapshots.
type serverRun struct {
	drainAt   int64 // conn-drain deadline on the worker clock; 0 = none (spec §6.9)
	idx       int32 // index in its rule's current Servers; -1 when not in the current snapshot
	active    bool  // in the current snapshot, enabled and usable
	wasActive bool  // active in the previous snapshot: scratch for applySnapshot
}

// ruleState is what the packet path needs of one rule of the current snapshot, by rule index.
type ruleState struct {
	slot      int32  // rule slot: counters and connection references
	id        uint64 // SnapRule.ID: part of the persistence key
	cursor    int    // round-robin position: next server index to try
	pcursor   int    // full-NAT: index of the proxy-src address used last
	timeoutMs uint32 // idle timeout of the rule's connections, ms
	stickyMs  uint32 // persist-timeout, ms
	topo      rules.Topo
	algo      rules.Algo
	sticky    bool
	v6        bool
	pmask     addr          // persistence mask for the rule's family
	servers   []serverState // by index in SnapRule.Servers
	usable    []int32       // indexes of the usable servers in group order: the hash fallback table
	proxies   []natProxy    // full-NAT source addresses of the rule's family
}

// serverState is one server of a rule, pre-converted for the packet path.
type serverState struct {
	addr    addr
	slot    int32  // server counter slot
	usable  bool   // enabled, and of the VIP's family
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
	knownVIP    uint8 = 1 << iota // VIP of a rule, enabled or not: answered in ARP/NDP
	knownProxy                    // full-NAT proxy-src address: answered in ARP/NDP
	knownServer                   // back-end server of a rule
)

// applySnapshot rebuilds the per-rule state for a new snapshot. Control work at a burst
// boundary: it may allocate.
func (e *Engine) applySnapshot(s *rules.Snapshot) {
	e.ctr.publish() // flush dirty lists before slots can change meaning
	for i := range e.rules {
		sl := &e.slots[e.rules[i].slot]
		sl.cursor, sl.pcursor = e.rules[i].cursor, e.rules[i].pcursor
	}
	for i := range e.slots {
		e.slots[i].live = false
		for j := range e.slots[i].servers {
			e.slots[i].servers[j].live = false
		}
	}
	for i := range e.srv {
		r := &e.srv[i]
		r.wasActive, r.active, r.idx = r.active, false, -1
	}
	var n int
	if s != nil {
		n = len(s.Rules)
	}
	e.rules = make([]ruleState, n)
	e.known = make(map[addr]knownAddr)
	e.nat.beginSnapshot()
	for i := 0; i < n; i++ {
		e.buildRule(s, i)
	}
	e.nat.endSnapshot()
	e.snap = s
	e.startDrains()
	e.reclaimRuleSlots()
	e.publishLayout()
	e.resolveConfiguredNextHops()
}

// buildRule builds the state of rule i of s and records its addresses.
func (e *Engine) buildRule(s *rules.Snapshot, i int) {
	r := &s.Rules[i]
	slot := e.ruleSlotFor(r.ID, r.Name)
	rsl := &e.slots[slot]
	rsl.live = true
	rsl.connDrain = r.ConnDrain
	vip := addrFromNetip(r.VIP.Unmap())
	v4 := vip.is4()
	rs := &e.rules[i]
	*rs = ruleState{
		slot: slot, id: r.ID, cursor: rsl.cursor, pcursor: rsl.pcursor,
		topo: r.Topo, algo: r.Algo, v6: !v4,
		sticky: r.PMaskBits > 0, pmask: prefixMask(v4, r.PMaskBits),
	}
	if rs.cursor >= len(r.Servers) {
		rs.cursor = 0
	}
	rs.timeoutMs = uint32(min(natTimeout(r).Milliseconds(), math.MaxUint32))
	pt := r.PersistTimeout
	if pt <= 0 {
		pt = rules.DefaultPersistTimeout
	}
	rs.stickyMs = uint32(min(pt.Milliseconds(), math.MaxUint32))
	rs.servers = make([]serverState, len(r.Servers))
	for j := range r.Servers {
		sv := &r.Servers[j]
		a := addrFromNetip(sv.Addr.Unmap())
		ss := &rs.servers[j]
		ss.addr, ss.slot = a, e.serverSlotFor(slot, sv.ID, sv.Addr)
		// A server of the other family cannot be written into this rule's packets; the rules
		// package refuses such a configuration, the engine just never picks one.
		ss.usable = sv.Enabled && a.is4() == v4
		run := &e.srv[ss.slot]
		run.idx, run.active = int32(j), ss.usable
		if ss.usable {
			rs.usable = append(rs.usable, int32(j))
		}
		k := e.known[a]
		k.flags |= knownServer
		e.known[a] = k
	}
	if r.Topo == rules.TopoNAT {
		for _, pa := range r.ProxySrc {
			a := addrFromNetip(pa.Unmap())
			if a.is4() != v4 {
				continue
			}
			rs.proxies = append(rs.proxies, natProxy{addr: a, arena: e.nat.arenaFor(a)})
			k := e.known[a]
			k.flags |= knownProxy
			e.known[a] = k
		}
		if rs.pcursor >= len(rs.proxies) {
			rs.pcursor = 0
		}
	}
	k := e.known[vip]
	if k.flags&knownVIP == 0 {
		k.rule = int32(i)
	}
	k.flags |= knownVIP
	e.known[vip] = k
}

// natTimeout returns the rule's connection idle timeout, substituting the kernel default for 0.
func natTimeout(r *rules.SnapRule) time.Duration {
	switch {
	case r.NATTimeout > 0:
		return r.NATTimeout
	case r.Proto == rules.ProtoUDP:
		return rules.DefaultNATTimeoutUDP
	}
	return rules.DefaultNATTimeoutTCP
}

// ruleSlotFor returns the slot of rule id, taking a free or new one for a rule not seen before.
func (e *Engine) ruleSlotFor(id uint64, name string) int32 {
	if s, ok := e.slotByID[id]; ok {
		e.slots[s].name = name
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
	e.slots[s] = ruleSlot{used: true, id: id, name: name}
	e.ctr.rules[s] = ruleCounters{}
	e.slotByID[id] = s
	if len(e.ctr.dirtyRules) < len(e.slots) {
		e.ctr.dirtyRules = make([]int32, 2*len(e.slots)) // empty: publish ran first
	}
	return s
}

// serverSlotFor returns the counter slot of server (id, a) in rule slot rs.
func (e *Engine) serverSlotFor(rs int32, id string, a netip.Addr) int32 {
	rsl := &e.slots[rs]
	for i := range rsl.servers {
		if sv := &rsl.servers[i]; sv.id == id && sv.addr == a {
			sv.live = true
			return sv.slot
		}
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
	e.srv[s] = serverRun{idx: -1}
	rsl.servers = append(rsl.servers, serverSlot{id: id, addr: a, slot: s, live: true})
	if len(e.ctr.dirtyServers) < len(e.ctr.servers) {
		e.ctr.dirtyServers = make([]int32, 2*len(e.ctr.servers))
	}
	return s
}

// reclaimRuleSlots frees the slots of rules gone from the configuration with no connections left.
func (e *Engine) reclaimRuleSlots() {
	e.reclaimPending = false
	for i := range e.slots {
		rsl := &e.slots[i]
		if !rsl.used || rsl.live || rsl.refs > 0 {
			continue
		}
		for _, sv := range rsl.servers {
			e.freeServerSlots = append(e.freeServerSlots, sv.slot)
			e.srv[sv.slot] = serverRun{idx: -1}
		}
		delete(e.slotByID, rsl.id)
		*rsl = ruleSlot{}
		e.freeSlots = append(e.freeSlots, int32(i))
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
}

// pickServer runs the rule's algorithm (spec §6.6) and returns an index into its servers, or -1
// if none is usable. Round robin does not move its cursor here: the caller advances it once the
// packet is on its way (per connection for NAT, per packet for DSR).
func pickServer(rs *ruleState, p *Parsed) int {
	if rs.algo == rules.AlgoRoundRobin || rs.algo < rules.AlgoHashIP || rs.algo > rules.AlgoHashIPVIP {
		return pickRoundRobin(rs)
	}
	return pickHash(rs, p)
}

// pickRoundRobin returns the next usable server at or after the cursor, skipping disabled ones.
func pickRoundRobin(rs *ruleState) int {
	n := len(rs.servers)
	i := rs.cursor
	for k := 0; k < n; k++ {
		if i >= n {
			i = 0
		}
		if rs.servers[i].usable {
			return i
		}
		i++
	}
	return -1
}

// advance moves the round-robin cursor past server si after it was used.
func (rs *ruleState) advance(si int) { rs.cursor = si + 1 }
