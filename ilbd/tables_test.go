package main

import (
	"bytes"
	"errors"
	"log"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/rules"
)

// twoWorkers builds two engines on one snapshot with a sticky round-robin rule (pmask /24), as
// two workers of one data plane are, and returns them with a function that opens a connection
// on one of them from a client address.
func twoWorkers(t *testing.T) ([]*datapath.Engine, func(e *datapath.Engine, client string, sport uint16), *int64) {
	t.Helper()
	cfg := rules.Config{}
	cfg.CreateServerGroup("sg")
	for _, s := range benchServer {
		if _, err := cfg.AddServer("sg", rules.ServerSpec{Addr: s}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.CreateRule(rules.Rule{Name: "web", Enabled: true, VIP: benchVIP, Proto: rules.ProtoTCP,
		MinPort: 80, MaxPort: 80, Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "sg",
		Sticky: true, PMaskBits: 24}); err != nil {
		t.Fatal(err)
	}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&cfg, 1, func(string) uint64 { return 1 }))
	var engines []*datapath.Engine
	for range 2 {
		// Each engine is its own only worker, so that every SYN is balanced where it is sent
		// rather than handed to the worker owning its client: the test places the entries.
		e, err := datapath.New(datapath.Config{Snapshot: snap, Ports: []datapath.PortConfig{{
			MAC: benchMAC, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("192.0.2.1/24")},
			Gateway: netip.MustParseAddr("198.51.100.254"),
		}}})
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	clock := int64(time.Hour)
	open := func(e *datapath.Engine, client string, sport uint16) {
		t.Helper()
		f, err := benchSegment(benchClient, netip.MustParseAddr(client), benchVIP, sport, 80, &layers.TCP{SYN: true})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(f), 2048)
		copy(buf, f)
		clock += int64(time.Millisecond)
		e.BeginBurst(clock)
		r := e.Process(buf, 0)
		e.EndBurst()
		if r.Action != datapath.ActionForward && r.Action != datapath.ActionHeld {
			t.Fatalf("SYN from %s: %+v", client, r)
		}
	}
	return engines, open, &clock
}

// drive runs bursts on the engines, as their workers do, until stop is called. The worker clock
// goes on from *clock, a microsecond a burst, so that no entry times out meanwhile.
func drive(engines []*datapath.Engine, clock *int64) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		now := *clock
		for !quit.Load() {
			now += int64(time.Microsecond)
			for _, e := range engines {
				e.BeginBurst(now)
				e.EndBurst()
			}
			time.Sleep(10 * time.Microsecond)
		}
	}()
	return func() { quit.Store(true); wg.Wait() }
}

// The listings of two workers are merged: show-nat concatenates them in worker order; show-persist
// lists a rule and prefix held by both once, and when the two disagree on its server logs it and
// keeps the first worker's.
func TestDumpMergesWorkers(t *testing.T) {
	engines, open, clock := twoWorkers(t)
	p1, p2, p3 := "203.0.113.5", "198.51.100.5", "192.0.2.5"
	open(engines[0], p1, 1000)            // server 0
	open(engines[0], p3, 1001)            // server 1
	open(engines[1], "203.0.113.6", 2000) // the same /24 as p1: server 0 on this worker too
	open(engines[1], p2, 2001)            // server 1
	open(engines[1], p3, 2002)            // server 2: not what worker 0 chose, a bug to report
	stop := drive(engines, clock)
	defer stop()

	nat, err := dumpNAT(engines, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var clients []string
	for _, e := range nat {
		clients = append(clients, e.Client.String())
	}
	want := "203.0.113.5:1000 192.0.2.5:1001 203.0.113.6:2000 198.51.100.5:2001 192.0.2.5:2002"
	if got := strings.Join(clients, " "); got != want {
		t.Fatalf("show-nat lists %s, want %s", got, want)
	}
	if nat, err = dumpNAT(engines, 3, time.Second); err != nil || len(nat) != 3 || nat[2].Client.Port() != 2000 {
		t.Fatalf("max 3: %v %+v", err, nat)
	}

	var logBuf bytes.Buffer
	logger := log.New(&logBuf, "", 0)
	per, err := dumpPersist(engines, 0, time.Second, logger.Printf)
	if err != nil {
		t.Fatal(err)
	}
	wantPer := []api.PersistEntry{
		{Rule: "web", Client: netip.MustParseAddr("203.0.113.0"), Server: benchServer[0]},
		{Rule: "web", Client: netip.MustParseAddr("192.0.2.0"), Server: benchServer[1]},
		{Rule: "web", Client: netip.MustParseAddr("198.51.100.0"), Server: benchServer[1]},
	}
	if len(per) != len(wantPer) {
		t.Fatalf("show-persist lists %+v, want %+v", per, wantPer)
	}
	for i := range per {
		if per[i] != wantPer[i] {
			t.Fatalf("show-persist lists %+v, want %+v", per, wantPer)
		}
	}
	if l := logBuf.String(); strings.Count(l, "\n") != 1 || !strings.Contains(l, "192.0.2.0") ||
		!strings.Contains(l, benchServer[1].String()) || !strings.Contains(l, benchServer[2].String()) {
		t.Fatalf("log %q: want one line on 192.0.2.0 naming both servers", l)
	}
	if per, err = dumpPersist(engines, 2, time.Second, logger.Printf); err != nil || len(per) != 2 || per[1] != wantPer[1] {
		t.Fatalf("max 2: %v %+v", err, per)
	}
}

// A worker still walking an earlier listing makes the listing fail with "in progress", and the
// dump already requested from the other worker is cancelled, so that it is free again at once;
// a worker that does not answer in time makes it fail with an internal error, likewise cancelled.
func TestDumpInProgressAndTimeout(t *testing.T) {
	engines, open, clock := twoWorkers(t)
	open(engines[0], "203.0.113.5", 1000)
	open(engines[1], "198.51.100.5", 2000)

	busy, ok := engines[1].RequestNATDump(0) // an earlier listing, not served yet
	if !ok {
		t.Fatal("request refused")
	}
	if _, err := dumpNAT(engines, 0, time.Second); !errors.Is(err, compat.StatusInProgress) {
		t.Fatalf("with worker 1 busy: %v, want %v", err, compat.StatusInProgress)
	}
	engines[0].BeginBurst(*clock)
	engines[0].EndBurst() // worker 0 drops the cancelled request
	if ch, ok := engines[0].RequestNATDump(0); !ok {
		t.Fatal("worker 0 still busy with the listing that failed")
	} else {
		engines[0].CancelNATDump(ch)
	}

	// Nobody runs the workers: the wait times out, and both requests are cancelled.
	engines[1].CancelNATDump(busy)
	engines[1].BeginBurst(*clock)
	engines[1].EndBurst()
	if _, err := dumpPersist(engines, 0, 20*time.Millisecond, t.Logf); !errors.Is(err, compat.StatusInternal) {
		t.Fatalf("with no worker running: %v, want %v", err, compat.StatusInternal)
	}
	for _, e := range engines {
		if _, ok := e.RequestPersistDump(0); ok {
			t.Fatal("a timed-out request was not pending any more before the worker ran")
		}
		e.BeginBurst(*clock)
		e.EndBurst() // drops the cancelled request without answering it
	}
	stop := drive(engines, clock)
	defer stop()
	per, err := dumpPersist(engines, 0, time.Second, t.Logf)
	if err != nil || len(per) != 2 {
		t.Fatalf("after the timeout: %v %+v", err, per)
	}
}
