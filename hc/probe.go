package hc

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// Test is the kind of one probe.
type Test uint8

const (
	TestPing     Test = iota // ICMP/ICMPv6 echo
	TestTCP                  // TCP connect
	TestUDP                  // empty datagram, ICMP port unreachable means dead
	TestExternal             // a program given by absolute path
)

func (t Test) String() string {
	switch t {
	case TestPing:
		return "PING"
	case TestTCP:
		return "TCP"
	case TestUDP:
		return "UDP"
	}
	return "external"
}

// Probe is one execution of a test against one server of one rule.
type Probe struct {
	Test Test
	Path string // TestExternal: the program's absolute path
	// VIP, Proto and Topo are the rule's; Server is the server's address.
	VIP    netip.Addr
	Server netip.Addr
	Proto  uint8
	Topo   rules.Topo
	// Port is the fixed hc-port or, with hc-port ANY, a port chosen at random in the
	// server's port range (the rule's if the server has none); 0 if neither has one.
	Port uint16
	// TimeoutSec is hc-timeout: the probe has this long to give its verdict.
	TimeoutSec int
}

// Timeout returns hc-timeout as a duration.
func (p *Probe) Timeout() time.Duration { return time.Duration(p.TimeoutSec) * time.Second }

// Target is the address the built-in probes are sent to: the server's own address.
// (Solaris addressed DSR probes to the VIP with the server as IP_NEXTHOP; Linux has no
// per-socket next hop, so every topology probes the server address, a listed deviation.)
func (p *Probe) Target() netip.Addr { return p.Server }

// Args returns the arguments (argv[1..6]) an external probe runs with, as Solaris' ilbd
// passed them: VIP, server address, TCP|UDP, DSR|NAT|HALF_NAT, port, hc-timeout.
func (p *Probe) Args() []string {
	proto := "TCP"
	if p.Proto == rules.ProtoUDP {
		proto = "UDP"
	}
	topo := ""
	switch p.Topo {
	case rules.TopoDSR:
		topo = "DSR"
	case rules.TopoNAT:
		topo = "NAT"
	case rules.TopoHalfNAT:
		topo = "HALF_NAT"
	}
	return []string{p.VIP.String(), p.Server.String(), proto, topo,
		strconv.Itoa(int(p.Port)), strconv.Itoa(p.TimeoutSec)}
}

// Outcome is a probe's verdict.
type Outcome struct {
	OK bool
	// RTT is the round-trip time in microseconds; only a value > 0 updates the server's
	// smoothed RTT.
	RTT int64
	// NotRun means the probe could not be started at all (an external program that cannot
	// be executed): as on Solaris the cycle ends without a verdict and the next one is
	// scheduled, the failure count unchanged.
	NotRun bool
	// Err explains a failure or NotRun, for the log; nil on success.
	Err error
}

// Runner executes probes. Run must return within the probe's timeout (or when ctx is
// done) and leave nothing running that is not bounded by that timeout.
type Runner interface {
	Run(ctx context.Context, p Probe) Outcome
}

// System runs probes on the ilbd host with ordinary sockets: PING, TCP and UDP in-process
// (no shell, no fork), external tests as programs started directly.
type System struct {
	// Stderr receives external probes' standard error; nil means /dev/null.
	Stderr *os.File

	mu      sync.Mutex
	closing chan struct{}
	wg      sync.WaitGroup
}

// Run executes one probe.
func (s *System) Run(ctx context.Context, p Probe) Outcome {
	if p.TimeoutSec <= 0 {
		// Solaris armed its kill timer with hc-timeout: 0 killed every probe at once.
		return Outcome{Err: errZeroTimeout}
	}
	deadline := time.Now().Add(p.Timeout())
	switch p.Test {
	case TestPing:
		return ping(ctx, p.Target(), deadline)
	case TestTCP:
		return tcpProbe(ctx, netip.AddrPortFrom(p.Target(), p.Port), deadline)
	case TestUDP:
		return udpProbe(ctx, netip.AddrPortFrom(p.Target(), p.Port), p.Timeout()*3/4)
	}
	return s.external(ctx, p, deadline)
}

// closingCh returns the channel that Close closes.
func (s *System) closingCh() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing == nil {
		s.closing = make(chan struct{})
	}
	return s.closing
}

// Close kills every external probe that is still running and waits until all are reaped.
func (s *System) Close() {
	ch := s.closingCh()
	s.mu.Lock()
	select {
	case <-ch:
	default:
		close(ch)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
