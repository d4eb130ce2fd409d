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
	used   bool
	live   bool // present in the current snapshot
	id     uint64
	name   string
	refs   int // connection entries created under this rule
	cursor int // round-robin cursor, carried across snapshots
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

// ruleState is what the packet path needs of one rule of the current snapshot, by rule index.
type ruleState struct {
	slot      int32         // rule slot: counters and connection references
	cursor    int           // round-robin position: next server index to try
	timeoutMs uint32        // idle timeout of the rule's connections, ms
	servers   []serverState // by index in SnapRule.Servers
}

// serverState is one server of a rule, pre-converted for the packet path.
type serverState struct {
	addr addr
	slot int32 // server counter slot
}

// applySnapshot rebuilds the per-rule state for a new snapshot. Control work at a burst
// boundary: it may allocate.
func (e *Engine) applySnapshot(s *rules.Snapshot) {
	e.ctr.publish() // flush dirty lists before slots can change meaning
	for i := range e.rules {
		e.slots[e.rules[i].slot].cursor = e.rules[i].cursor
	}
	for i := range e.slots {
		e.slots[i].live = false
		for j := range e.slots[i].servers {
			e.slots[i].servers[j].live = false
		}
	}
	var n int
	if s != nil {
		n = len(s.Rules)
	}
	e.rules = make([]ruleState, n)
	for i := 0; i < n; i++ {
		r := &s.Rules[i]
		slot := e.ruleSlotFor(r.ID, r.Name)
		rsl := &e.slots[slot]
		rsl.live = true
		rs := &e.rules[i]
		rs.slot = slot
		rs.cursor = rsl.cursor
		if rs.cursor >= len(r.Servers) {
			rs.cursor = 0
		}
		rs.timeoutMs = uint32(min(natTimeout(r).Milliseconds(), math.MaxUint32))
		rs.servers = make([]serverState, len(r.Servers))
		for j := range r.Servers {
			sv := &r.Servers[j]
			rs.servers[j] = serverState{addr: addrFromNetip(sv.Addr), slot: e.serverSlotFor(slot, sv.ID, sv.Addr)}
		}
	}
	e.snap = s
	e.reclaimRuleSlots()
	e.publishLayout()
	e.resolveConfiguredNextHops()
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
	}
	e.ctr.servers[s] = serverCounters{}
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

// pickServer runs the rule's algorithm and returns an index into r.Servers, or -1 if no server
// is enabled; newFlow calls rs.advance once the connection exists. Only round robin exists so
// far; the hash algorithms (spec §6.6) will slot in here.
func pickServer(r *rules.SnapRule, rs *ruleState) int {
	return pickRoundRobin(r, rs)
}

// pickRoundRobin returns the next enabled server at or after the cursor, skipping disabled ones
// (spec §6.6). The caller moves the cursor past it once the connection exists, so the cursor
// advances once per new connection.
func pickRoundRobin(r *rules.SnapRule, rs *ruleState) int {
	n := len(r.Servers)
	i := rs.cursor
	for k := 0; k < n; k++ {
		if i >= n {
			i = 0
		}
		if r.Servers[i].Enabled {
			return i
		}
		i++
	}
	return -1
}

// advance moves the round-robin cursor past server si after a connection to it was created.
func (rs *ruleState) advance(si int) { rs.cursor = si + 1 }
