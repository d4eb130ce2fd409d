package hc

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// script writes an executable /bin/sh script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func externalProbe(path string, timeout int) Probe {
	return Probe{Test: TestExternal, Path: path, VIP: netip.MustParseAddr("203.0.113.10"),
		Server: netip.MustParseAddr("192.0.2.11"), Proto: rules.ProtoTCP, Topo: rules.TopoHalfNAT,
		Port: 8080, TimeoutSec: timeout}
}

// gone reports whether pid has exited (absent, or a zombie that nobody reaped yet).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the probe did not record its PIDs: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, n)
	}
	return pids
}

func TestExternalProbeOutputs(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, body string
		want       Outcome
	}{
		{"rtt", "echo 1234\n", Outcome{OK: true, RTT: 1234}},
		{"minus1", "echo -1\n", Outcome{}},
		{"zero", "echo 0\n", Outcome{OK: true}},
		{"minus2", "echo -2\n", Outcome{OK: true}},
		{"text", "echo alive\n", Outcome{OK: true}},
		{"blanks", "printf '  \\t42 ms'\n", Outcome{OK: true, RTT: 42}},
		{"huge", "echo 99999999999\n", Outcome{OK: true}}, // above UINT_MAX: no RTT
		{"silent", "exit 0\n", Outcome{}},
		{"silent-failing", "exit 3\n", Outcome{}},
		{"rtt-exit-status-ignored", "echo 77; exit 1\n", Outcome{OK: true, RTT: 77}},
	}
	s := &System{}
	defer s.Close()
	for _, c := range cases {
		p := script(t, dir, c.name, c.body)
		start := time.Now()
		out := s.Run(context.Background(), externalProbe(p, 5))
		if out.OK != c.want.OK || out.RTT != c.want.RTT || out.NotRun {
			t.Errorf("%s: %+v, want OK=%v RTT=%d", c.name, out, c.want.OK, c.want.RTT)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("%s: took %v; a probe that exits must not wait for the timeout", c.name, el)
		}
	}
}

// argv[1..6], argv[0], the empty environment and stdin.
func TestExternalProbeArgumentsAndEnvironment(t *testing.T) {
	t.Setenv("ILB_HC_TEST_SECRET", "leak")
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	p := script(t, dir, "probe", `
printf '%s\n' "$0" "$#" "$1" "$2" "$3" "$4" "$5" "$6" > `+rec+`
wc -c < /proc/$$/environ >> `+rec+`
cat > /dev/null; echo "stdin-eof" >> `+rec+`
echo 5
`)
	s := &System{}
	defer s.Close()
	probe := externalProbe(p, 3)
	probe.Topo, probe.Proto = rules.TopoDSR, rules.ProtoUDP
	out := s.Run(context.Background(), probe)
	if !out.OK || out.RTT != 5 {
		t.Fatalf("outcome %+v", out)
	}
	b, _ := os.ReadFile(rec)
	want := p + "\n6\n203.0.113.10\n192.0.2.11\nUDP\nDSR\n8080\n3\n0\nstdin-eof\n"
	if string(b) != want {
		t.Errorf("the probe saw\n%s\nwant\n%s", b, want)
	}
}

// A probe that outlives hc-timeout without output is killed with its whole process group.
func TestExternalProbeKilledAtTimeout(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	p := script(t, dir, "hang", "sleep 60 &\necho $$ $! > "+pids+"\nsleep 60\necho 1\n")
	s := &System{}
	start := time.Now()
	out := s.Run(context.Background(), externalProbe(p, 1))
	el := time.Since(start)
	if out.OK || out.NotRun {
		t.Fatalf("hanging probe: %+v", out)
	}
	if el < 900*time.Millisecond || el > 2500*time.Millisecond {
		t.Errorf("hanging probe returned after %v, want hc-timeout (1s)", el)
	}
	s.Close() // waits until the probe is reaped
	for _, pid := range readPIDs(t, pids) {
		waitFor(t, "process "+strconv.Itoa(pid)+" to die", func() bool { return gone(pid) })
	}
}

// A probe that answers and then lingers: the verdict comes at once, the process (and what it
// started) is killed at the deadline.
func TestExternalProbeAnswersThenLingers(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	p := script(t, dir, "linger", "sleep 60 &\necho $$ $! > "+pids+"\necho 900\nsleep 60\n")
	s := &System{}
	start := time.Now()
	out := s.Run(context.Background(), externalProbe(p, 1))
	if !out.OK || out.RTT != 900 || time.Since(start) > 800*time.Millisecond {
		t.Fatalf("lingering probe: %+v after %v", out, time.Since(start))
	}
	ps := readPIDs(t, pids)
	if gone(ps[0]) {
		t.Fatal("the probe was killed before its deadline")
	}
	for _, pid := range ps {
		waitFor(t, "process "+strconv.Itoa(pid)+" to be killed at the deadline", func() bool { return gone(pid) })
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("killed after %v, before hc-timeout", el)
	}
	s.Close()
}

// A probe whose main process exits leaves nothing of its group behind.
func TestExternalProbeStragglersKilled(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	p := script(t, dir, "bg", "sleep 60 > /dev/null &\necho $$ $! > "+pids+"\necho 3\n")
	s := &System{}
	if out := s.Run(context.Background(), externalProbe(p, 5)); !out.OK || out.RTT != 3 {
		t.Fatalf("%+v", out)
	}
	s.Close()
	for _, pid := range readPIDs(t, pids) {
		waitFor(t, "process "+strconv.Itoa(pid)+" to die", func() bool { return gone(pid) })
	}
}

func TestExternalProbeNotRun(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\necho 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &System{}
	defer s.Close()
	for _, p := range []string{filepath.Join(dir, "missing"), noexec, dir} {
		if out := s.Run(context.Background(), externalProbe(p, 2)); !out.NotRun || out.OK {
			t.Errorf("%s: %+v, want NotRun", p, out)
		}
	}
}

// Close kills running probes at once and leaves no goroutine behind.
func TestSystemCloseKillsProbes(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	p := script(t, dir, "linger", "echo 1\nsleep 60\n")
	s := &System{}
	for range 3 {
		if out := s.Run(context.Background(), externalProbe(p, 30)); !out.OK {
			t.Fatalf("%+v", out)
		}
	}
	start := time.Now()
	s.Close()
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Close took %v", el)
	}
	if out := s.Run(context.Background(), externalProbe(p, 30)); !out.NotRun {
		t.Errorf("a probe started after Close: %+v", out)
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestStrtoll(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "42": 42, " \t\n42abc": 42, "+7": 7, "-1": -1, "-1\n": -1, "--1": 0, "abc": 0,
		"9223372036854775807": 9223372036854775807, "9223372036854775808": 9223372036854775807,
		"99999999999999999999999": 9223372036854775807, "-9223372036854775808": -9223372036854775808,
		"-99999999999999999999999": -9223372036854775808, "0x10": 0, "12 34": 12,
	} {
		if got := strtoll([]byte(in)); got != want {
			t.Errorf("strtoll(%q) = %d, want %d", in, got, want)
		}
	}
}
