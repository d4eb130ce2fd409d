// Package hc is ilbd's health checker (spec §5.5): for every server of every rule that
// has a health check it runs the check's test periodically (PING, TCP, UDP or an external
// program), keeps the result that show-hc-result prints, and declares servers down or up
// again. Verdicts reach the data plane the way configuration changes do: through the
// rules.Manager, which publishes a new snapshot with the server disabled for that rule.
package hc

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// Status is a server's health-check status, as show-hc-result prints it.
type Status uint8

const (
	StatusUnInit   Status = iota // probing, no verdict yet
	StatusUnreach                // the ping stage (or a PING test) failed hc-count times
	StatusAlive                  // the test succeeded
	StatusDead                   // the TCP, UDP or external test failed hc-count times
	StatusDisabled               // the rule or the server is disabled: no probing
)

func (s Status) String() string {
	switch s {
	case StatusUnInit:
		return "un-init"
	case StatusUnreach:
		return "unreach"
	case StatusAlive:
		return "alive"
	case StatusDead:
		return "dead"
	}
	return "disabled"
}

// Result is one row of show-hc-result: the probe state of one server of one rule.
type Result struct {
	Rule     string
	HCName   string
	ServerID string
	Status   Status
	// Fail counts consecutive failed probe executions (retries included); 0 after a success.
	Fail int
	// Last is when the last cycle was scheduled (the previous one finished, or probing
	// started); Next is when the next cycle starts, zero while disabled.
	Last, Next time.Time
	// RTT is the smoothed round-trip time in microseconds, 0 if unknown.
	RTT uint32
}

// Options configure a Checker. Zero values select the real thing.
type Options struct {
	Runner Runner // default: &System{}
	Clock  Clock  // default: SystemClock{}
	// Rand returns a uniformly random integer in [0, n); it schedules cycles and picks
	// ports for hc-port ANY. Default: math/rand/v2.IntN.
	Rand func(n int) int
	// Health receives every verdict: up=false when a server is declared unreachable or
	// dead, up=true when its test succeeds. It is called without the Checker's lock held
	// (typically rules.Manager.SetServerHealth, which ignores verdicts that change nothing).
	Health func(ruleID uint64, serverID string, up bool)
	// Logf reports status changes; nil discards them.
	Logf func(format string, args ...any)
}

// probeGrace is how much longer than hc-timeout the checker waits for a Runner that does
// not keep its own deadline.
const probeGrace = 2 * time.Second

// key identifies a probe state: one server of one rule instance.
type key struct {
	rule   uint64
	server string
}

// state is the probe state of one server of one rule.
type state struct {
	key
	// What is probed; fixed for the life of the state.
	ruleName string
	hc       rules.HealthCheck
	test     Test
	vip      netip.Addr
	proto    uint8
	topo     rules.Topo
	hcPort   uint16
	rMin     uint16
	rMax     uint16
	addr     netip.Addr
	sMin     uint16
	sMax     uint16

	// Guarded by Checker.mu.
	active bool
	epoch  uint64 // changes whenever probing stops or restarts: results of older cycles are dropped
	cancel context.CancelFunc
	status Status
	fail   int
	rtt    uint32
	last   time.Time
	next   time.Time
}

// Checker runs the health checks of a configuration.
type Checker struct {
	runner Runner
	clock  Clock
	health func(uint64, string, bool)
	logf   func(string, ...any)

	randMu sync.Mutex
	rand   func(int) int

	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	states map[key]*state
	order  []*state // show-hc-result order: rules in configuration order, servers in group order
}

// New returns a Checker with nothing to check; Update gives it a configuration.
func New(o Options) *Checker {
	c := &Checker{runner: o.Runner, clock: o.Clock, rand: o.Rand, health: o.Health, logf: o.Logf,
		states: map[key]*state{}}
	if c.runner == nil {
		c.runner = &System{}
	}
	if c.clock == nil {
		c.clock = SystemClock{}
	}
	if c.rand == nil {
		c.rand = rand.IntN
	}
	if c.health == nil {
		c.health = func(uint64, string, bool) {}
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	return c
}

// Update makes v the configuration being checked: probe states are created for new
// (rule, server) pairs, started when both the rule and the server are enabled (at un-init,
// FAIL 0, RTT 0), stopped when either is disabled (status disabled), and dropped with their
// rule or server. It only starts and cancels goroutines, so it may be called as a
// rules.Manager watcher.
func (c *Checker) Update(v rules.View) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now := c.clock.Now()
	cfg := &v.Config
	seen := map[key]bool{}
	var order []*state
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if r.HCName == "" {
			continue
		}
		h := cfg.HealthCheck(r.HCName)
		g := cfg.Group(r.ServerGroup)
		id := v.RuleID(r.Name)
		if h == nil || g == nil || id == 0 {
			continue
		}
		for j := range g.Servers {
			sv := &g.Servers[j]
			k := key{id, sv.ID}
			st := c.states[k]
			if st != nil && (st.addr != sv.Addr || st.sMin != sv.MinPort || st.sMax != sv.MaxPort) {
				c.stopLocked(st) // a server ID reused for another server: start afresh
				st = nil
			}
			if st == nil {
				st = newState(k, r, h, sv)
				st.status, st.last = StatusDisabled, now
				c.states[k] = st
			}
			seen[k] = true
			order = append(order, st)
			switch want := r.Enabled && sv.Enabled; {
			case want && !st.active:
				c.startLocked(st, now)
			case !want && st.active:
				c.stopLocked(st)
				st.status = StatusDisabled
			}
		}
	}
	for k, st := range c.states {
		if !seen[k] {
			c.stopLocked(st)
			delete(c.states, k)
		}
	}
	c.order = order
}

func newState(k key, r *rules.Rule, h *rules.HealthCheck, sv *rules.Server) *state {
	st := &state{key: k, ruleName: r.Name, hc: *h, vip: r.VIP, proto: r.Proto, topo: r.Topo,
		hcPort: r.HCPort, rMin: r.MinPort, rMax: r.MaxPort, addr: sv.Addr, sMin: sv.MinPort, sMax: sv.MaxPort}
	switch strings.ToUpper(h.Test) {
	case "PING":
		st.test = TestPing
	case "TCP":
		st.test = TestTCP
	case "UDP":
		st.test = TestUDP
	default:
		st.test = TestExternal
	}
	return st
}

// startLocked starts probing st from scratch.
func (c *Checker) startLocked(st *state, now time.Time) {
	st.epoch++
	st.active = true
	st.status, st.fail, st.rtt = StatusUnInit, 0, 0
	next := c.scheduleLocked(st, now)
	ctx, cancel := context.WithCancel(c.ctx)
	st.cancel = cancel
	c.wg.Add(1)
	go c.loop(ctx, st, st.epoch, next)
}

// stopLocked stops probing st; a probe in flight is abandoned and its result dropped.
func (c *Checker) stopLocked(st *state) {
	if st.active {
		st.active = false
		st.epoch++
		st.cancel()
	}
}

// scheduleLocked schedules st's next cycle after a random delay, uniform in whole seconds
// over [interval/2, interval/2 + interval] and at least 1 s (D/ilbd_hc.c
// ilbd_hc_restart_timer), records LAST and NEXT, and returns NEXT.
func (c *Checker) scheduleLocked(st *state, now time.Time) time.Time {
	iv := max(st.hc.Interval, 0)
	d := time.Duration(max(iv/2+c.randN(iv+1), 1)) * time.Second
	st.last, st.next = now, now.Add(d)
	return st.next
}

func (c *Checker) randN(n int) int {
	if n <= 1 {
		return 0
	}
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.rand(n)
}

// loop runs st's cycles, the first one at next, until ctx is done.
func (c *Checker) loop(ctx context.Context, st *state, epoch uint64, next time.Time) {
	defer c.wg.Done()
	for {
		t := c.clock.NewTimer(next.Sub(c.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		var ok bool
		if next, ok = c.cycle(ctx, st, epoch); !ok {
			return
		}
	}
}

// stages returns the tests of one cycle: the default ping first unless the test is PING
// or the check was created with -n, then the test.
func (st *state) stages() []Test {
	if st.hc.DefPing && st.test != TestPing {
		return []Test{TestPing, st.test}
	}
	return []Test{st.test}
}

// probe returns the probe of one stage, choosing the port for hc-port ANY.
func (c *Checker) probe(st *state, t Test) Probe {
	p := Probe{Test: t, VIP: st.vip, Server: st.addr, Proto: st.proto, Topo: st.topo,
		Port: st.hcPort, TimeoutSec: st.hc.Timeout}
	if t == TestExternal {
		p.Path = st.hc.Test
	}
	if p.Port == 0 {
		lo, hi := st.sMin, st.sMax
		if lo == 0 {
			lo, hi = st.rMin, st.rMax
		}
		p.Port = lo
		if hi > lo {
			p.Port = lo + uint16(c.randN(int(hi-lo)+1))
		}
	}
	return p
}

// cycle runs one health-check cycle (spec §5.5 "One cycle") and schedules the next one.
// It returns the time of the next cycle, or false if probing of st stopped meanwhile.
func (c *Checker) cycle(ctx context.Context, st *state, epoch uint64) (time.Time, bool) {
	if !c.current(ctx, st, epoch) {
		return time.Time{}, false
	}
	stages := st.stages()
	for i := 0; i < len(stages); {
		var out Outcome
		if st.hc.Timeout > 0 {
			pctx, cancel := context.WithTimeout(ctx, time.Duration(st.hc.Timeout)*time.Second+probeGrace)
			out = c.runner.Run(pctx, c.probe(st, stages[i]))
			cancel()
		}
		c.mu.Lock()
		if st.epoch != epoch || ctx.Err() != nil {
			c.mu.Unlock()
			return time.Time{}, false
		}
		if out.NotRun {
			d := c.scheduleLocked(st, c.clock.Now())
			c.mu.Unlock()
			c.logf("health check %s: rule %s server %s: probe not run: %v", st.hc.Name, st.ruleName, st.server, out.Err)
			return d, true
		}
		if out.OK && out.RTT > 0 && out.RTT <= 0xFFFFFFFF {
			st.rtt = smoothRTT(st.rtt, uint32(out.RTT))
		}
		if out.OK && i+1 < len(stages) {
			i++ // the default ping answered: on to the test
			c.mu.Unlock()
			continue
		}
		if !out.OK {
			if st.hc.Timeout <= 0 {
				// Every execution fails at once: the retries end where they would.
				st.fail = max(st.fail+1, st.hc.Count)
			} else {
				st.fail++
			}
			if st.fail < st.hc.Count {
				c.mu.Unlock()
				continue // retry the same stage at once
			}
		} else {
			st.fail = 0
		}
		was := st.status
		switch {
		case out.OK:
			st.status = StatusAlive
		case stages[i] == TestPing:
			st.status = StatusUnreach
		default:
			st.status = StatusDead
		}
		now, status, fail := c.clock.Now(), st.status, st.fail
		d := c.scheduleLocked(st, now)
		c.mu.Unlock()
		if status != was {
			if out.OK {
				c.logf("health check %s: rule %s server %s (%s): %s", st.hc.Name, st.ruleName, st.server, st.addr, status)
			} else {
				c.logf("health check %s: rule %s server %s (%s): %s after %d failures: %v", st.hc.Name, st.ruleName, st.server, st.addr, status, fail, out.Err)
			}
		}
		c.health(st.rule, st.server, out.OK)
		return d, true
	}
	return time.Time{}, false // not reached: every path through a stage returns or continues
}

// current reports whether the cycle of epoch is still wanted.
func (c *Checker) current(ctx context.Context, st *state, epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return st.epoch == epoch && ctx.Err() == nil
}

// smoothRTT is Solaris' smoothed average: the first sample as is, then
// rtt = 3*(rtt>>2) + (new>>2).
func smoothRTT(rtt, sample uint32) uint32 {
	if rtt == 0 {
		return sample
	}
	return 3*(rtt>>2) + (sample >> 2)
}

// Results returns the probe state of every (rule, server) pair with a health check, rules
// in configuration order and servers in their group's order.
func (c *Checker) Results() []Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Result, 0, len(c.order))
	for _, st := range c.order {
		r := Result{Rule: st.ruleName, HCName: st.hc.Name, ServerID: st.server, Status: st.status,
			Fail: st.fail, Last: st.last, RTT: st.rtt}
		if st.status != StatusDisabled {
			r.Next = st.next
		}
		out = append(out, r)
	}
	return out
}

// Close stops every probe and waits until the checker's goroutines have ended (a probe in
// flight ends at once; its result is dropped). The Runner is closed too if it has a Close
// method. Update does nothing afterwards.
func (c *Checker) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, st := range c.states {
		c.stopLocked(st)
	}
	c.stop()
	c.mu.Unlock()
	c.wg.Wait()
	if cl, ok := c.runner.(interface{ Close() }); ok {
		cl.Close()
	}
}
