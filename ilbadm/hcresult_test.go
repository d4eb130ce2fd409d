package main

import (
	"testing"
	"time"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/rules"
)

// fakeChecker is a health checker with fixed results.
type fakeChecker []api.HCResult

func (f fakeChecker) HealthResults() []api.HCResult { return f }

func healthDaemon(t *testing.T, hc api.HealthChecker) string {
	t.Helper()
	sock := newDaemon(t, true, func(s *api.Service) { s.Health = hc }).sock
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11,192.0.2.12,192.0.2.13 sg1"},
		{line: "create-healthcheck -h hc-test=tcp,hc-timeout=2,hc-count=3,hc-interval=10 hc1"},
		{line: "create-healthcheck -h hc-test=PING hc2"},
		{line: "create-rule -e -i vip=203.0.113.10,port=80,protocol=tcp -m lbalg=rr,type=HALF-NAT -h hc-name=hc1 -o servergroup=sg1 rule1"},
		{line: "create-rule -i vip=203.0.113.10,port=81,protocol=tcp -m lbalg=rr,type=HALF-NAT -h hc-name=hc2 -o servergroup=sg1 rule-with-long-nm"},
		{line: "create-rule -e -i vip=203.0.113.10,port=82,protocol=tcp -m lbalg=rr,type=HALF-NAT -o servergroup=sg1 nohc"},
	})
	return sock
}

// at is a Unix time for a local wall-clock time, which show-hc-result prints.
func at(hms string) int64 {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", "2024-05-06 "+hms, time.Local)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

var hcResults = fakeChecker{
	{Rule: "rule1", HCName: "hc1", ServerID: "_sg1.0", Status: "dead", Fail: 6, Last: at("04:45:17"), Next: at("04:45:30"), RTT: 698},
	{Rule: "rule1", HCName: "hc1", ServerID: "_sg1.1", Status: "alive", Fail: 0, Last: at("04:45:11"), Next: at("04:45:25"), RTT: 260},
	{Rule: "rule1", HCName: "hc1", ServerID: "_sg1.2", Status: "unreach", Fail: 6, Last: at("04:45:17"), Next: at("04:45:30"), RTT: 0},
	{Rule: "rule-with-long-nm", HCName: "hc2", ServerID: "_sg1.0", Status: "disabled", Fail: 0, Last: at("23:59:59"), RTT: 0},
	{Rule: "rule-with-long-nm", HCName: "hc2", ServerID: "_sg1.1", Status: "un-init", Fail: 0, Last: at("00:00:00"), Next: at("00:00:07"), RTT: 4294967295},
}

const hcHeader = "RULENAME      HCNAME        SERVERID      STATUS   FAIL LAST     NEXT     RTT\n"

const hcRule1 = "" +
	"rule1         hc1           _sg1.0        dead     6    04:45:17 04:45:30 698\n" +
	"rule1         hc1           _sg1.1        alive    0    04:45:11 04:45:25 260\n" +
	"rule1         hc1           _sg1.2        unreach  6    04:45:17 04:45:30 0\n"

// A 17-character rule name overflows RULENAME (14) by 4 columns, which HCNAME's padding
// gives back; NEXT of a disabled server is empty ("--").
const hcLong = "" +
	"rule-with-long-nm hc2       _sg1.0        disabled 0    23:59:59 --       0\n" +
	"rule-with-long-nm hc2       _sg1.1        un-init  0    00:00:00 00:00:07 4294967295\n"

func TestShowHCResult(t *testing.T) {
	sock := healthDaemon(t, hcResults)
	const noHC = "ilbadm: rule does not have health check enabled\n"
	runSteps(t, sock, []step{
		{line: "show-hc-result", stdout: hcHeader + hcRule1 + hcLong},
		{line: "show-hc-res rule1", stdout: hcHeader + hcRule1},
		{line: "SHOW-HC-RESULT RULE-WITH-LONG-NM", stdout: hcHeader + hcLong},
		{line: "show-hc-result rule-with-long-nm rule1", stdout: hcHeader + hcLong + hcRule1},
		// Stops at the first rule without a health check, after printing the earlier ones.
		{line: "show-hc-result rule1 nohc rule-with-long-nm", stdout: hcHeader + hcRule1, stderr: noHC, status: 1},
		{line: "show-hc-result nosuch", stderr: noHC, status: 1},
		{line: "show-hc-result nohc", stderr: noHC, status: 1},
		// No options: "-p" is a rule name.
		{line: "show-hc-result -p", stderr: noHC, status: 1},
	})
}

// Without a health checker (or before any probe) there are no rows, but the rule checks
// still apply.
func TestShowHCResultWithoutChecker(t *testing.T) {
	sock := healthDaemon(t, nil)
	runSteps(t, sock, []step{
		{line: "show-hc-result"},
		{line: "show-hc-result rule1"},
		{line: "show-hc-result nohc", stderr: "ilbadm: rule does not have health check enabled\n", status: 1},
	})
	runSteps(t, healthDaemon(t, fakeChecker{}), []step{{line: "show-hc-result"}})
}

// show-hc-result is a read: anyone may run it.
func TestShowHCResultIsReadOnly(t *testing.T) {
	if api.OpShowHCResult.Mutates() {
		t.Fatal("show-hc-result needs authorization")
	}
	mgr, err := rules.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := &api.Service{Mgr: mgr, Health: hcResults}
	r := svc.Handle(api.Peer{UID: 65534, GID: 65534}, &api.Request{Op: api.OpShowHCResult})
	if r.Status != 0 || len(r.HCResults) != len(hcResults) {
		t.Fatalf("non-root show-hc-result: %+v", r)
	}
}
