package datapath

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// bigSnapshots compiles a configuration of nRules IPv4 half-NAT rules with nServers servers each
// (documentation addresses, ports distinguishing the rules), and the same configuration with one
// server disabled: the pair a health check flapping alternates between.
func bigSnapshots(tb testing.TB, nRules, nServers int) (a, b *rules.Snapshot) {
	tb.Helper()
	c := &rules.Config{}
	for i := range nRules {
		g := fmt.Sprintf("sg%d", i)
		if err := c.CreateServerGroup(g); err != nil {
			tb.Fatal(err)
		}
		grp := c.Group(g)
		for j := range nServers {
			ad := netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + j%250)})
			grp.Servers = append(grp.Servers, rules.Server{ID: fmt.Sprintf("_%s.%d", g, j), Addr: ad,
				MinPort: uint16(1000 + j), MaxPort: uint16(1000 + j), Enabled: true})
		}
		r := rules.Rule{Name: fmt.Sprintf("r%d", i), Enabled: true, VIP: vip, Proto: rules.ProtoTCP,
			MinPort: uint16(100 + i), MaxPort: uint16(100 + i), Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: g}
		c.Rules = append(c.Rules, r) // servers share addresses: CreateRule's checks are not the point here
	}
	id := func(name string) uint64 {
		var n uint64
		fmt.Sscanf(name, "r%d", &n)
		return n + 1
	}
	a = rules.Compile(c, 1, id)
	c.Groups[0].Servers[0].Enabled = false
	b = rules.Compile(c, 2, id)
	return a, b
}

func BenchmarkSnapshotPickup50x1000(b *testing.B) {
	sa, sb := bigSnapshots(b, 50, 1000)
	p := new(atomic.Pointer[rules.Snapshot])
	p.Store(sa)
	e, err := New(Config{Ports: testPorts(), ConnCapacity: 1 << 10, Snapshot: p})
	if err != nil {
		b.Fatal(err)
	}
	now := int64(1e9)
	e.BeginBurst(now)
	e.EndBurst()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			p.Store(sb)
		} else {
			p.Store(sa)
		}
		now += 1e6
		e.BeginBurst(now)
		e.EndBurst()
	}
}

// Picking up a snapshot of a known configuration (here 50 rules × 1000 servers, flapping one
// server's health) only indexes it: no allocation once the engine has seen that size.
func TestSnapshotPickupDoesNotAllocate(t *testing.T) {
	sa, sb := bigSnapshots(t, 50, 1000)
	p := new(atomic.Pointer[rules.Snapshot])
	p.Store(sa)
	e, err := New(Config{Ports: testPorts(), ConnCapacity: 1 << 10, Snapshot: p})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1e9)
	flip := func() {
		if p.Load() == sa {
			p.Store(sb)
		} else {
			p.Store(sa)
		}
		now += 1e6
		e.BeginBurst(now)
		e.EndBurst()
	}
	flip()
	flip() // warm-up: both snapshots seen
	if allocs := testing.AllocsPerRun(20, flip); allocs != 0 {
		t.Fatalf("snapshot pick-up: %v allocations", allocs)
	}
	if e.snap != p.Load() || len(e.rules) != 50 || len(e.rules[0].servers) != 1000 {
		t.Fatalf("pick-up did not apply the snapshot: %d rules", len(e.rules))
	}
	if got := len(e.srv); got != 50*1000 {
		t.Fatalf("%d server slots, want one per server", got)
	}
}

// A rule whose algorithm code has no registry entry balances nothing: its new flows are counted
// and dropped instead of falling back to round robin.
func TestUnknownAlgorithmDrops(t *testing.T) {
	rs := defaultRules()
	rs[0].Algo = 99
	h := newHarness(t, 64, rs)
	h.learnNeighbours()
	if r, _ := h.process(client(1000, TCPSyn).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("SYN to a rule with an unknown algorithm: %+v", r)
	}
	if g := h.stats().Global; g.UnknownAlgo != 1 || g.Forwarded != 0 {
		t.Fatalf("unknown_algo %d forwarded %d, want 1 0", g.UnknownAlgo, g.Forwarded)
	}
	if r := h.rule(ruleWeb); r.PktDropped != 1 {
		t.Fatalf("rule pkt_dropped %d, want 1", r.PktDropped)
	}
}

// A server removed and re-added (under a new ID, as ilbd gives it) many times reuses counter
// slots instead of growing the tables; a draining connection of the removed server keeps
// counting on that server, and once it ends the slot is reclaimed with its counts kept in the
// rule's totals.
func TestRemovedServerSlotsAreReclaimed(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	if i := connect(t, h, 1000); i != 0 {
		t.Fatalf("first connection went to server %d", i)
	}
	without := func(rs []rules.SnapRule) []rules.SnapRule { rs[0].Servers = rs[0].Servers[1:]; return rs }
	h.setRules(without(defaultRules()))
	h.burst()
	slots := len(h.e.srv)
	for k := range 200 {
		rs := defaultRules()
		rs[0].Servers[0].ID = "_sg1." + string(rune('a'+k%26)) + string(rune('a'+k/26))
		h.setRules(rs)
		h.burst()
		h.setRules(without(defaultRules()))
		h.burst()
	}
	if len(h.e.srv) > slots+1 || len(h.e.ctr.servers) > slots+1 || len(h.e.serverSlots) > slots {
		t.Fatalf("server slots grew from %d to %d (%d keys)", slots, len(h.e.srv), len(h.e.serverSlots))
	}
	// The draining connection still counts on the removed server 0.
	if r, _ := h.process(client(1000, TCPAck).build(t), 0); r.Action != ActionForward {
		t.Fatalf("draining connection: %+v", r)
	}
	var removed *ServerStats
	web := h.rule(ruleWeb)
	for i := range web.Servers {
		if s := &web.Servers[i]; s.Removed && s.Addr == serverAddr[0] {
			removed = s
		}
	}
	if removed == nil || removed.PktProcessed != 4 {
		t.Fatalf("removed server 0: %+v, want 4 packets (handshake both ways, one after removal)", removed)
	}
	total := web.PktProcessed
	// The connection ends (idle timeout): the slot goes, the rule's totals stay.
	h.advance(200 * time.Second)
	h.scan()
	web = h.rule(ruleWeb)
	for _, s := range web.Servers {
		if s.Removed {
			t.Fatalf("removed server still listed after its last connection: %+v", s)
		}
	}
	if web.PktProcessed != total || len(web.Servers) != 2 {
		t.Fatalf("rule processed %d with %d servers, want %d with 2", web.PktProcessed, len(web.Servers), total)
	}
}

// A persistence entry names a server slot; when that server is removed and its slot reclaimed
// for a new server of the same rule, the entry must not send its clients to the newcomer
// (that would be a choice no algorithm made): it is re-balanced like a mapping to a gone server.
func TestPersistenceDoesNotFollowReusedSlot(t *testing.T) {
	sticky := func(servers int, rename bool) []rules.SnapRule {
		rs := defaultRules()
		rs[0].PMaskBits, rs[0].PersistTimeout = 24, time.Hour
		rs[0].Servers = rs[0].Servers[:servers]
		if rename { // a new server where server 0 was: new ID, new address
			rs[0].Servers = append([]rules.SnapServer(nil), rs[0].Servers...)
			rs[0].Servers[0].ID, rs[0].Servers[0].Addr = "_sg1.new", serverAddr[2]
		}
		return rs
	}
	h := newHarness(t, 64, sticky(2, false))
	h.learnNeighbours()
	if i := connectSYN(t, h, 1000); i != 0 {
		t.Fatalf("first client went to server %d", i)
	}
	slot := h.e.srv[h.e.rules[0].servers[0].slot]
	oldSlot := h.e.rules[0].servers[0].slot
	// The connection ends; server 0 is removed and its slot reclaimed; a new server comes.
	h.advance(DefaultHalfOpenTimeout + time.Millisecond)
	h.burst()
	rs := sticky(2, false)
	rs[0].Servers = rs[0].Servers[1:]
	h.setRules(rs)
	h.burst()
	h.setRules(sticky(2, true))
	h.burst()
	newSlot := h.e.rules[0].servers[0].slot
	if newSlot != oldSlot {
		t.Skipf("the new server got slot %d, not the reclaimed %d: nothing to check", newSlot, oldSlot)
	}
	if h.e.srv[newSlot].gen == slot.gen {
		t.Fatal("a reclaimed slot kept its generation")
	}
	// Another client of the same /24: the old mapping is not a hit on the newcomer.
	p := client(1001, TCPSyn)
	h.process(p.build(t), 0)
	for i := range h.e.sticky.entries {
		if s := &h.e.sticky.entries[i]; s.inUse && s.serverGen != h.e.srv[s.server].gen {
			t.Fatalf("persistence entry still points at slot %d of generation %d (now %d)", s.server, s.serverGen, h.e.srv[s.server].gen)
		}
	}
}
