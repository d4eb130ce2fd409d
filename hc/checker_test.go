package hc

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// fakeClock is a Clock whose time only moves when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	clk  *fakeClock
	when time.Time
	ch   chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2024, 5, 6, 4, 45, 0, 0, time.Local)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clk: f, when: f.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- f.now
		return t
	}
	f.timers = append(f.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	n := len(t.clk.timers)
	t.clk.timers = slices.DeleteFunc(t.clk.timers, func(x *fakeTimer) bool { return x == t })
	return len(t.clk.timers) != n
}

// Advance moves the time forward and fires every timer that is due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.timers = slices.DeleteFunc(f.timers, func(t *fakeTimer) bool {
		if t.when.After(f.now) {
			return false
		}
		t.ch <- f.now
		return true
	})
}

// Pending is the number of timers that have not fired or been stopped.
func (f *fakeClock) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// fakeRunner records every probe and answers with fn.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
	fn    func(p Probe) Outcome
}

func (r *fakeRunner) Run(ctx context.Context, p Probe) Outcome {
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("%s %s", p.Test, p.Server))
	fn := r.fn
	r.mu.Unlock()
	if fn == nil {
		return Outcome{OK: true}
	}
	return fn(p)
}

func (r *fakeRunner) set(fn func(p Probe) Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn = fn
}

// take returns and forgets the calls so far.
func (r *fakeRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// rig is a checker wired to a real rules.Manager, as in ilbd, with a fake clock and runner.
type rig struct {
	t   *testing.T
	mgr *rules.Manager
	clk *fakeClock
	run *fakeRunner
	chk *Checker

	mu      sync.Mutex
	randSeq []int // values Rand returns in turn (then 0)
	health  []string
}

const (
	srvA = "192.0.2.11" // _sg1.0
	srvB = "192.0.2.12" // _sg1.1
)

// newRig configures health check hc1 (test, count, timeout, interval 10 s, default ping
// defPing) on enabled half-NAT rule r1 (TCP port 80 unless the test is UDP) with two servers.
func newRig(t *testing.T, test string, count, timeout int, defPing bool) *rig {
	t.Helper()
	g := &rig{t: t, clk: newFakeClock(), run: &fakeRunner{}}
	mgr, err := rules.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	g.mgr = mgr
	proto := rules.ProtoTCP
	if strings.EqualFold(test, "UDP") {
		proto = rules.ProtoUDP
	}
	g.change(func(c *rules.Config) error {
		if err := c.CreateServerGroup("sg1"); err != nil {
			return err
		}
		for _, a := range []string{srvA, srvB} {
			if _, err := c.AddServer("sg1", rules.ServerSpec{Addr: netip.MustParseAddr(a)}); err != nil {
				return err
			}
		}
		if err := c.CreateHealthCheck(rules.HealthCheck{Name: "hc1", Test: test, Timeout: timeout, Count: count,
			Interval: 10, DefPing: defPing}); err != nil {
			return err
		}
		return c.CreateRule(rules.Rule{Name: "r1", Enabled: true, VIP: netip.MustParseAddr("203.0.113.10"),
			Proto: proto, MinPort: 80, MaxPort: 80, Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT,
			ServerGroup: "sg1", HCName: "hc1"})
	})
	g.chk = New(Options{Runner: g.run, Clock: g.clk, Rand: g.rand,
		Health: func(id uint64, srv string, up bool) {
			g.mu.Lock()
			g.health = append(g.health, fmt.Sprintf("%s %v", srv, up))
			g.mu.Unlock()
			mgr.SetServerHealth(id, srv, up)
		}})
	cancel := mgr.Watch(g.chk.Update)
	t.Cleanup(func() { cancel(); g.chk.Close() })
	return g
}

func (g *rig) rand(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.randSeq) == 0 {
		return 0
	}
	v := g.randSeq[0]
	g.randSeq = g.randSeq[1:]
	return min(v, n-1)
}

func (g *rig) change(fn func(c *rules.Config) error) {
	g.t.Helper()
	if err := g.mgr.Change(fn); err != nil {
		g.t.Fatal(err)
	}
}

func (g *rig) takeHealth() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.health
	g.health = nil
	return h
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// step advances the fake time by d and waits until every probing server has scheduled
// its next cycle again (active servers each hold exactly one pending timer).
func (g *rig) step(d time.Duration, active int) {
	g.t.Helper()
	waitFor(g.t, "the probe loops to arm their timers", func() bool { return g.clk.Pending() == active })
	g.clk.Advance(d)
	waitFor(g.t, "the cycles to finish", func() bool { return g.clk.Pending() == active })
}

// row returns the result row of server id.
func (g *rig) row(id string) Result {
	g.t.Helper()
	for _, r := range g.chk.Results() {
		if r.ServerID == id {
			return r
		}
	}
	g.t.Fatalf("no result for %s: %+v", id, g.chk.Results())
	return Result{}
}

// inService reports whether server id of r1 is enabled in the published snapshot.
func (g *rig) inService(id string) bool {
	for _, r := range g.mgr.Snapshot().Load().Rules {
		for _, s := range r.Servers {
			if s.ID == id {
				return s.Enabled
			}
		}
	}
	g.t.Fatalf("%s not in the snapshot", id)
	return false
}

func (g *rig) check(id string, status Status, fail int, rtt uint32) {
	g.t.Helper()
	r := g.row(id)
	if r.Status != status || r.Fail != fail || r.RTT != rtt {
		g.t.Errorf("%s: status %s fail %d rtt %d; want %s %d %d", id, r.Status, r.Fail, r.RTT, status, fail, rtt)
	}
}

func sameCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("probes run: %q\nwant:       %q", got, want)
	}
}

func TestUnInitToAlive(t *testing.T) {
	g := newRig(t, "TCP", 3, 2, true)
	t0 := g.clk.Now()
	g.run.set(func(p Probe) Outcome {
		if p.Test == TestPing {
			return Outcome{OK: true, RTT: 100}
		}
		return Outcome{OK: true, RTT: 200}
	})
	for _, id := range []string{"_sg1.0", "_sg1.1"} {
		r := g.row(id)
		if r.Status != StatusUnInit || r.Fail != 0 || r.RTT != 0 || !r.Last.Equal(t0) || !r.Next.Equal(t0.Add(5*time.Second)) ||
			r.Rule != "r1" || r.HCName != "hc1" {
			t.Fatalf("before the first cycle: %+v (want un-init, LAST %v, NEXT +5s)", r, t0)
		}
	}
	// Rand 0: the first cycle comes after interval/2 = 5 s, not before.
	g.step(4*time.Second, 2)
	sameCalls(t, g.run.take())
	g.step(time.Second, 2)
	calls := g.run.take()
	slices.Sort(calls)
	sameCalls(t, calls, "PING "+srvA, "PING "+srvB, "TCP "+srvA, "TCP "+srvB)
	// RTT: the ping's sample as is, then 3*(100>>2) + (200>>2).
	g.check("_sg1.0", StatusAlive, 0, 125)
	g.check("_sg1.1", StatusAlive, 0, 125)
	if r := g.row("_sg1.0"); !r.Last.Equal(t0.Add(5*time.Second)) || !r.Next.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after the cycle LAST %v NEXT %v; want +5s, +10s", r.Last, r.Next)
	}
	if !g.inService("_sg1.0") || !g.inService("_sg1.1") {
		t.Error("alive servers are out of service")
	}
}

func TestRetriesDeadAndRecovery(t *testing.T) {
	g := newRig(t, "TCP", 3, 2, true)
	down := true
	var mu sync.Mutex
	g.run.set(func(p Probe) Outcome {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p.Test == TestPing:
			return Outcome{OK: true}
		case p.Server.String() == srvA && down:
			return Outcome{}
		}
		return Outcome{OK: true, RTT: 40}
	})
	g.step(5*time.Second, 2)
	calls := g.run.take()
	// Server A: one ping, then the TCP test hc-count (3) times; B: ping and one test.
	if n := strings.Count(strings.Join(calls, ","), "TCP "+srvA); n != 3 {
		t.Errorf("TCP probes of the failing server: %d, want hc-count = 3 (%q)", n, calls)
	}
	if n := strings.Count(strings.Join(calls, ","), "PING "+srvA); n != 1 {
		t.Errorf("pings of the failing server: %d, want 1 (%q)", n, calls)
	}
	g.check("_sg1.0", StatusDead, 3, 0)
	g.check("_sg1.1", StatusAlive, 0, 40)
	if g.inService("_sg1.0") || !g.inService("_sg1.1") {
		t.Fatal("the dead server is still in service in the snapshot (or the alive one is not)")
	}
	cfg := g.mgr.Config()
	if !cfg.Group("sg1").Servers[0].Enabled {
		t.Fatal("the health check changed the configuration (show-server must still say E)")
	}
	// Dead servers are probed on the normal schedule; FAIL keeps growing, no retries.
	g.step(5*time.Second, 2)
	sameCalls(t, filter(g.run.take(), srvA), "PING "+srvA, "TCP "+srvA)
	g.check("_sg1.0", StatusDead, 4, 0)
	// Recovery: FAIL 0, alive, back in service.
	mu.Lock()
	down = false
	mu.Unlock()
	g.step(5*time.Second, 2)
	g.check("_sg1.0", StatusAlive, 0, 40)
	if !g.inService("_sg1.0") {
		t.Fatal("a server that recovered was not re-enabled")
	}
	if h := filter(g.takeHealth(), "_sg1.0"); !slices.Equal(h, []string{"_sg1.0 false", "_sg1.0 false", "_sg1.0 true"}) {
		t.Errorf("verdicts on _sg1.0: %q", h)
	}
}

func filter(calls []string, sub string) []string {
	var out []string
	for _, c := range calls {
		if strings.Contains(c, sub) {
			out = append(out, c)
		}
	}
	return out
}

func TestUnreachVersusDead(t *testing.T) {
	fail := func(test Test) func(Probe) Outcome {
		return func(p Probe) Outcome { return Outcome{OK: p.Test != test} }
	}
	cases := []struct {
		test    string
		defPing bool
		failing Test
		want    Status
		calls   []string // of server A in one cycle
	}{
		{"TCP", true, TestPing, StatusUnreach, []string{"PING " + srvA, "PING " + srvA, "PING " + srvA}},
		{"TCP", true, TestTCP, StatusDead, []string{"PING " + srvA, "TCP " + srvA, "TCP " + srvA, "TCP " + srvA}},
		{"TCP", false, TestTCP, StatusDead, []string{"TCP " + srvA, "TCP " + srvA, "TCP " + srvA}},
		{"UDP", true, TestUDP, StatusDead, []string{"PING " + srvA, "UDP " + srvA, "UDP " + srvA, "UDP " + srvA}},
		{"PING", true, TestPing, StatusUnreach, []string{"PING " + srvA, "PING " + srvA, "PING " + srvA}},
		{"/bin/true", true, TestExternal, StatusDead, []string{"PING " + srvA, "external " + srvA, "external " + srvA, "external " + srvA}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s-defping=%v-%s-fails", tc.test, tc.defPing, tc.failing), func(t *testing.T) {
			g := newRig(t, tc.test, 3, 2, tc.defPing)
			g.run.set(fail(tc.failing))
			g.step(5*time.Second, 2)
			sameCalls(t, filter(g.run.take(), srvA), tc.calls...)
			g.check("_sg1.0", tc.want, 3, 0)
			if g.inService("_sg1.0") {
				t.Errorf("%s server still in service", tc.want)
			}
		})
	}
}

// Failures are counted across the stages of one cycle; a success in the test stage resets
// the count.
func TestRetryThenSuccess(t *testing.T) {
	g := newRig(t, "TCP", 3, 2, true)
	var mu sync.Mutex
	n := map[Test]int{}
	g.run.set(func(p Probe) Outcome {
		if p.Server.String() != srvA {
			return Outcome{OK: true}
		}
		mu.Lock()
		defer mu.Unlock()
		n[p.Test]++
		return Outcome{OK: n[p.Test] > 1} // each stage fails once
	})
	g.step(5*time.Second, 2)
	sameCalls(t, filter(g.run.take(), srvA), "PING "+srvA, "PING "+srvA, "TCP "+srvA, "TCP "+srvA)
	g.check("_sg1.0", StatusAlive, 0, 0)
	// With hc-count 2 the same pattern is fatal in the test stage: FAIL 1 (ping), 2 (TCP).
	g2 := newRig(t, "TCP", 2, 2, true)
	n2 := map[Test]int{}
	g2.run.set(func(p Probe) Outcome {
		mu.Lock()
		defer mu.Unlock()
		if p.Server.String() != srvA {
			return Outcome{OK: true}
		}
		n2[p.Test]++
		return Outcome{OK: n2[p.Test] > 1}
	})
	g2.step(5*time.Second, 2)
	sameCalls(t, filter(g2.run.take(), srvA), "PING "+srvA, "PING "+srvA, "TCP "+srvA)
	g2.check("_sg1.0", StatusDead, 2, 0)
}

func TestDisabledRuleAndServer(t *testing.T) {
	g := newRig(t, "TCP", 2, 2, false)
	g.run.set(func(p Probe) Outcome { return Outcome{OK: p.Server.String() != srvA, RTT: 80} })
	g.step(5*time.Second, 2)
	g.check("_sg1.0", StatusDead, 2, 0)
	g.check("_sg1.1", StatusAlive, 0, 80)
	last := g.row("_sg1.1").Last
	g.run.take()

	// disable-server: only that server stops; NEXT is empty; its verdict is forgotten.
	g.change(func(c *rules.Config) error { return c.SetServerEnabled("_sg1.0", false) })
	g.check("_sg1.0", StatusDisabled, 2, 0)
	if r := g.row("_sg1.0"); !r.Next.IsZero() {
		t.Errorf("disabled server has NEXT %v", r.Next)
	}
	g.step(10*time.Second, 1)
	sameCalls(t, g.run.take(), "TCP "+srvB)
	// enable-server: un-init, FAIL 0, RTT 0, back in service at once.
	g.change(func(c *rules.Config) error { return c.SetServerEnabled("_sg1.0", true) })
	g.check("_sg1.0", StatusUnInit, 0, 0)
	if !g.inService("_sg1.0") {
		t.Error("re-enabled server not in service")
	}

	// disable-rule: every server disabled, no probing at all.
	g.change(func(c *rules.Config) error { return c.SetRuleEnabled("r1", false) })
	g.check("_sg1.0", StatusDisabled, 0, 0)
	g.check("_sg1.1", StatusDisabled, 0, 80)
	if r := g.row("_sg1.1"); !r.Last.After(last) || !r.Next.IsZero() {
		t.Errorf("disabled rule: LAST %v NEXT %v", r.Last, r.Next)
	}
	waitFor(t, "the probe loops to stop", func() bool { return g.clk.Pending() == 0 })
	g.clk.Advance(time.Minute)
	time.Sleep(10 * time.Millisecond)
	sameCalls(t, g.run.take())
	// enable-rule: probing restarts from scratch.
	g.change(func(c *rules.Config) error { return c.SetRuleEnabled("r1", true) })
	waitFor(t, "the new probe loops", func() bool { return g.clk.Pending() == 2 })
	g.check("_sg1.0", StatusUnInit, 0, 0)
	g.check("_sg1.1", StatusUnInit, 0, 0)
	g.step(5*time.Second, 2)
	g.check("_sg1.0", StatusDead, 2, 0)

	// A rule without the health check, removed servers and deleted rules leave no rows.
	g.change(func(c *rules.Config) error { return c.RemoveServer("sg1", "_sg1.1") })
	if rs := g.chk.Results(); len(rs) != 1 || rs[0].ServerID != "_sg1.0" {
		t.Errorf("after remove-server: %+v", rs)
	}
	g.change(func(c *rules.Config) error { return c.DeleteRule("r1") })
	if rs := g.chk.Results(); len(rs) != 0 {
		t.Errorf("after delete-rule: %+v", rs)
	}
	waitFor(t, "the probe loops to stop", func() bool { return g.clk.Pending() == 0 })
}

// A probe in flight when its server is disabled is abandoned: its failure counts nothing.
func TestInFlightProbeAbandoned(t *testing.T) {
	g := newRig(t, "TCP", 1, 2, false)
	started := make(chan struct{}, 2)
	g.run.set(func(p Probe) Outcome {
		if p.Server.String() == srvA {
			started <- struct{}{}
			time.Sleep(50 * time.Millisecond) // the probe outlives the server's enablement
			return Outcome{}
		}
		return Outcome{OK: true}
	})
	waitFor(t, "timers", func() bool { return g.clk.Pending() == 2 })
	g.clk.Advance(5 * time.Second)
	<-started
	g.change(func(c *rules.Config) error { return c.SetServerEnabled("_sg1.0", false) })
	waitFor(t, "B's next cycle to be scheduled", func() bool { return g.clk.Pending() == 1 })
	time.Sleep(100 * time.Millisecond)
	g.check("_sg1.0", StatusDisabled, 0, 0)
	for _, h := range g.takeHealth() {
		if h == "_sg1.0 false" {
			t.Error("an abandoned probe's failure became a verdict")
		}
	}
}

func TestSchedulingBounds(t *testing.T) {
	for _, iv := range []int{1, 2, 5, 30, 3600} {
		c := New(Options{Clock: newFakeClock()})
		st := &state{hc: rules.HealthCheck{Interval: iv}}
		lo, hi := max(iv/2, 1), max(iv/2+iv, 1)
		seen := map[int]bool{}
		for range 20000 {
			now := c.clock.Now()
			d := c.scheduleLocked(st, now).Sub(now)
			s := int(d / time.Second)
			if d%time.Second != 0 || s < lo || s > hi || !st.last.Equal(now) || !st.next.Equal(now.Add(d)) {
				t.Fatalf("interval %d: delay %v (want whole seconds in [%d, %d]), LAST %v NEXT %v", iv, d, lo, hi, st.last, st.next)
			}
			seen[s] = true
		}
		if iv <= 30 && len(seen) != hi-lo+1 {
			t.Errorf("interval %d: delays %v never covered [%d, %d]", iv, seen, lo, hi)
		}
	}
}

// Servers are scheduled independently: each draws its own delay.
func TestIndependentSchedules(t *testing.T) {
	g := newRig(t, "TCP", 3, 2, false)
	t0 := g.clk.Now()
	// The rig was built before randSeq was set (both drew 0: +5 s); restart both servers.
	g.change(func(c *rules.Config) error { return c.SetRuleEnabled("r1", false) })
	waitFor(t, "the probe loops to stop", func() bool { return g.clk.Pending() == 0 })
	g.mu.Lock()
	g.randSeq = []int{0, 10}
	g.mu.Unlock()
	g.change(func(c *rules.Config) error { return c.SetRuleEnabled("r1", true) })
	if a, b := g.row("_sg1.0").Next, g.row("_sg1.1").Next; !a.Equal(t0.Add(5*time.Second)) || !b.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("NEXT %v and %v; want +5s and +15s", a, b)
	}
	g.step(5*time.Second, 2)
	sameCalls(t, g.run.take(), "TCP "+srvA)
	g.step(10*time.Second, 2) // A's second cycle (due +10 s) and B's first (+15 s)
	calls := g.run.take()
	slices.Sort(calls)
	sameCalls(t, calls, "TCP "+srvA, "TCP "+srvB)
}

func TestSmoothRTT(t *testing.T) {
	var rtt uint32
	for _, c := range []struct{ sample, want uint32 }{{698, 698}, {260, 3*(698>>2) + 260>>2}, {1000, 3*(586>>2) + 1000>>2}} {
		rtt = smoothRTT(rtt, c.sample)
		if rtt != c.want {
			t.Fatalf("after %d: %d, want %d", c.sample, rtt, c.want)
		}
	}
	if got := smoothRTT(0xFFFFFFFF, 0xFFFFFFFF); got != 3*(0xFFFFFFFF>>2)+0xFFFFFFFF>>2 {
		t.Fatalf("large: %d", got)
	}
}

func TestProbeArgumentsAndPorts(t *testing.T) {
	c := New(Options{Rand: func(n int) int { return n - 1 }})
	st := &state{hc: rules.HealthCheck{Test: "/x/probe", Timeout: 7}, test: TestExternal,
		vip: netip.MustParseAddr("2001:db8:3::10"), addr: netip.MustParseAddr("2001:db8:2::11"),
		proto: rules.ProtoUDP, topo: rules.TopoHalfNAT, rMin: 5000, rMax: 5009}
	p := c.probe(st, TestExternal)
	if got := strings.Join(p.Args(), " "); got != "2001:db8:3::10 2001:db8:2::11 UDP HALF_NAT 5009 7" || p.Path != "/x/probe" {
		t.Errorf("ANY, rule range: args %q path %q", got, p.Path)
	}
	st.sMin, st.sMax = 8080, 8089
	if p := c.probe(st, TestTCP); p.Port != 8089 {
		t.Errorf("ANY, server range: port %d", p.Port)
	}
	c.rand = func(int) int { return 0 }
	if p := c.probe(st, TestTCP); p.Port != 8080 {
		t.Errorf("ANY, server range: port %d", p.Port)
	}
	st.hcPort = 8085
	if p := c.probe(st, TestTCP); p.Port != 8085 {
		t.Errorf("fixed hc-port: %d", p.Port)
	}
	for topo, want := range map[rules.Topo]string{rules.TopoDSR: "DSR", rules.TopoNAT: "NAT", rules.TopoHalfNAT: "HALF_NAT"} {
		p := Probe{Topo: topo, Proto: rules.ProtoTCP, VIP: netip.MustParseAddr("203.0.113.10"), Server: netip.MustParseAddr("192.0.2.11"), Port: 80, TimeoutSec: 5}
		if got := strings.Join(p.Args(), " "); got != "203.0.113.10 192.0.2.11 TCP "+want+" 80 5" {
			t.Errorf("args %q", got)
		}
	}
}

// hc-timeout 0: every probe fails at once, the runner is never asked.
func TestZeroTimeout(t *testing.T) {
	g := newRig(t, "TCP", 3, 0, true)
	g.step(5*time.Second, 2)
	sameCalls(t, g.run.take())
	g.check("_sg1.0", StatusUnreach, 3, 0)
	g.step(5*time.Second, 2)
	g.check("_sg1.0", StatusUnreach, 4, 0)
	if out := (&System{}).Run(context.Background(), Probe{Test: TestTCP, TimeoutSec: 0}); out.OK {
		t.Error("a real probe with hc-timeout 0 succeeded")
	}
}

// A probe that cannot be started ends the cycle without a verdict.
func TestNotRun(t *testing.T) {
	g := newRig(t, "/nonexistent/probe", 3, 2, false)
	g.run.set(func(Probe) Outcome { return Outcome{NotRun: true} })
	t0 := g.clk.Now()
	g.step(5*time.Second, 2)
	g.check("_sg1.0", StatusUnInit, 0, 0)
	if r := g.row("_sg1.0"); !r.Last.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("not rescheduled: LAST %v", r.Last)
	}
	if len(g.takeHealth()) != 0 {
		t.Error("verdict without a probe")
	}
}

// Close ends every goroutine of the checker.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	g := newRig(t, "TCP", 3, 2, true)
	block := make(chan struct{})
	g.run.set(func(p Probe) Outcome {
		if p.Server.String() == srvA {
			<-block
		}
		return Outcome{OK: true}
	})
	waitFor(t, "timers", func() bool { return g.clk.Pending() == 2 })
	g.clk.Advance(5 * time.Second)
	waitFor(t, "B's cycle", func() bool { return g.clk.Pending() == 1 })
	close(block)
	g.chk.Close()
	g.chk.Update(rules.View{}) // no effect after Close
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	if g.clk.Pending() != 0 {
		t.Errorf("%d timers left", g.clk.Pending())
	}
}
