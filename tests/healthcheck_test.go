package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// hcRow is one parsed row of show-hc-result.
type hcRow struct {
	rule, hc, server, status, fail, last, next, rtt string
}

var hcClock = regexp.MustCompile(`^\d\d:\d\d:\d\d$`)

// hcResults runs show-hc-result and parses it, checking the header and the row format.
func hcResults(t *testing.T, l *lab.Lab, args ...string) map[string]hcRow {
	t.Helper()
	out := ilbadmOK(t, l, append([]string{"show-hc-result"}, args...)...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		return map[string]hcRow{}
	}
	const header = "RULENAME      HCNAME        SERVERID      STATUS   FAIL LAST     NEXT     RTT"
	if lines[0] != header {
		t.Fatalf("show-hc-result header %q, want %q", lines[0], header)
	}
	rows := map[string]hcRow{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 8 || !hcClock.MatchString(f[5]) || (f[6] != "--" && !hcClock.MatchString(f[6])) {
			t.Fatalf("show-hc-result row %q", line)
		}
		rows[f[2]] = hcRow{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]}
	}
	return rows
}

// waitHC polls show-hc-result until every server in want has its wanted status, for at
// most limit, and returns the last rows seen.
func waitHC(t *testing.T, l *lab.Lab, what string, limit time.Duration, want map[string]string) map[string]hcRow {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		rows := hcResults(t, l)
		ok := true
		for id, st := range want {
			if rows[id].status != st {
				ok = false
			}
		}
		if ok {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; show-hc-result:\n%s", what, limit, ilbadmOK(t, l, "show-hc-result"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHealthCheckTCP: a TCP health check (with the default ping first) on the half-NAT
// rule. ilbd's probes are ordinary sockets of the lb namespace's kernel that leave through
// the DPDK ports by the exception path. When one server stops accepting TCP connections
// the check declares it dead within a bounded time and new connections avoid it, while the
// administrative state (show-server) is unchanged; when it accepts again it is alive and
// balanced again.
func TestHealthCheckTCP(t *testing.T) {
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	// hc-interval 3: cycles every 1..4 s; hc-timeout 1 and hc-count 2: a dead server is
	// declared within one cycle plus two refused connections.
	for _, args := range [][]string{
		{"create-healthcheck", "-h", "hc-test=tcp,hc-timeout=1,hc-count=2,hc-interval=3", "hctcp"},
		{"create-servergroup", "-s", "server=192.0.2.11,192.0.2.12", "websg"},
		{"add-server", "-s", "server=192.0.2.13", "websg"},
		{"create-rule", "-e", "-i", "vip=203.0.113.10,port=80,protocol=tcp", "-m", "lbalg=rr,type=HALF-NAT",
			"-h", "hc-name=hctcp,hc-port=80", "-o", "servergroup=websg", "webtcp"},
	} {
		ilbadmOK(t, l, args...)
	}
	vip := lab.VIPAddr()
	all := map[string]string{"_websg.0": "alive", "_websg.1": "alive", "_websg.2": "alive"}
	const bound = 20 * time.Second // ≥ the longest cycle delay (4.5 s) + probes, with margin

	start := time.Now()
	rows := waitHC(t, l, "every server alive", bound, all)
	t.Logf("all alive after %v", time.Since(start).Round(time.Millisecond))
	for id, r := range rows {
		if r.rule != "webtcp" || r.hc != "hctcp" || r.fail != "0" || r.rtt == "0" || r.next == "--" {
			t.Errorf("%s: %+v; want webtcp hctcp FAIL 0, an RTT (ping and connect through the exception path) and NEXT", id, r)
		}
	}
	per, err := l.TCPRequests(vip, 30, tcpTimeout)
	if err != nil {
		t.Fatalf("TCP with every server alive: %v", err)
	}
	balanced(t, "TCP with every server alive", per, 10, 1)

	// srv2 (192.0.2.12, _websg.1) stops accepting connections on port 80.
	if err := l.StopServerTCP("srv2", lab.ServicePort); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rows = waitHC(t, l, "srv2 dead", bound, map[string]string{"_websg.0": "alive", "_websg.1": "dead", "_websg.2": "alive"})
	t.Logf("srv2 dead after %v: %+v", time.Since(start).Round(time.Millisecond), rows["_websg.1"])
	fail, _ := strconv.Atoi(rows["_websg.1"].fail)
	if fail < 2 || fail > 4 {
		t.Errorf("dead server FAIL = %d, want hc-count (2) or a little more", fail)
	}
	// The administrative state is unchanged: show-server still says E.
	if out := ilbadmOK(t, l, "show-server", "-p", "-o", "SERVERID,STATUS"); !strings.Contains(out, "_websg.1:E\n") {
		t.Errorf("show-server after the health check failed:\n%s\nwant _websg.1 still E", out)
	}
	// New connections avoid the dead server and none fails.
	per, err = l.TCPRequests(vip, 30, tcpTimeout)
	if err != nil {
		t.Errorf("TCP with srv2 dead: %v", err)
	}
	if per["srv2"] != 0 || per["srv1"] < 14 || per["srv3"] < 14 {
		t.Errorf("TCP with srv2 dead: %s; want srv1 and srv3 about 15 each, srv2 none", sortedCounts(per))
	}
	// It stays dead, FAIL growing, while it refuses.
	time.Sleep(5 * time.Second)
	r := hcResults(t, l)["_websg.1"]
	if later, _ := strconv.Atoi(r.fail); r.status != "dead" || later <= fail {
		t.Errorf("5 s later srv2 is %+v; want dead with a higher FAIL than %d", r, fail)
	}
	if t.Failed() {
		t.FailNow()
	}

	// srv2 accepts again: alive, FAIL 0, back in the rotation.
	if err := l.StartServerTCP("srv2", lab.ServicePort); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rows = waitHC(t, l, "srv2 alive again", bound, all)
	t.Logf("srv2 alive again after %v: %+v", time.Since(start).Round(time.Millisecond), rows["_websg.1"])
	if rows["_websg.1"].fail != "0" {
		t.Errorf("recovered server FAIL = %s, want 0", rows["_websg.1"].fail)
	}
	per, err = l.TCPRequests(vip, 30, tcpTimeout)
	if err != nil {
		t.Errorf("TCP after srv2 recovered: %v", err)
	}
	balanced(t, "TCP after srv2 recovered", per, 10, 1)

	// disable-server: the check stops for it (disabled, NEXT empty); enable-server
	// restarts it at un-init.
	ilbadmOK(t, l, "disable-server", "_websg.2")
	if r := hcResults(t, l, "webtcp")["_websg.2"]; r.status != "disabled" || r.next != "--" {
		t.Errorf("after disable-server: %+v", r)
	}
	ilbadmOK(t, l, "enable-server", "_websg.2")
	if r := hcResults(t, l, "WEBTCP")["_websg.2"]; r.status != "un-init" || r.fail != "0" || r.rtt != "0" {
		t.Errorf("after enable-server: %+v", r)
	}
	if out, errOut, code := l.Ilbadm("show-hc-result", "nosuch"); code != 1 || out != "" ||
		errOut != "ilbadm: rule does not have health check enabled\n" {
		t.Errorf("show-hc-result nosuch: %d %q %q", code, out, errOut)
	}
}
