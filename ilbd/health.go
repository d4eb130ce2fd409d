package main

// Health checking (spec §5.5): the checker probes the servers of every rule that has a
// health check, with ordinary sockets of the ilbd host (and external probe programs).
// With a DPDK data plane those packets reach the servers through the exception path (the
// kernel's TAP of each port); in configuration-only mode through the host's own stack.
// Its verdicts take the configuration's path to the data plane: rules.Manager publishes a
// new snapshot in which a server declared dead is disabled for that rule.

import (
	"log"
	"os"
	"time"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/hc"
	"github.com/ilbgo/ilb/rules"
)

// health is the running health checker.
type health struct {
	chk     *hc.Checker
	unwatch func()
}

// startHealth starts checking the configuration of mgr, now and after every change.
func startHealth(mgr *rules.Manager, logger *log.Logger) *health {
	chk := hc.New(hc.Options{
		Runner: &hc.System{Stderr: os.Stderr},
		Health: func(ruleID uint64, serverID string, up bool) { mgr.SetServerHealth(ruleID, serverID, up) },
		Logf:   logger.Printf,
	})
	return &health{chk: chk, unwatch: mgr.Watch(chk.Update)}
}

// close stops every probe (killing external ones still running) and waits for them.
func (h *health) close() {
	h.unwatch()
	h.chk.Close()
}

// HealthResults gives the control service the checker's results (show-hc-result).
func (h *health) HealthResults() []api.HCResult {
	rs := h.chk.Results()
	out := make([]api.HCResult, len(rs))
	for i, r := range rs {
		out[i] = api.HCResult{Rule: r.Rule, HCName: r.HCName, ServerID: r.ServerID, Status: r.Status.String(),
			Fail: uint32(r.Fail), Last: unixTime(r.Last), Next: unixTime(r.Next), RTT: r.RTT}
	}
	return out
}

// unixTime is t in Unix seconds, 0 for the zero time.
func unixTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
