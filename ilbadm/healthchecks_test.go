package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeProbe creates an executable external health-check script and returns its path.
func writeProbe(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "probe.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Manual Example 8: the show-healthcheck table, byte for byte. The external test's path
// is the manual's; the probe really lives in the test's directory, and the TEST column
// is the last one (printed unpadded), so the substitution changes no alignment.
func TestShowHealthCheckManualExample8(t *testing.T) {
	sock := daemon(t)
	probe := writeProbe(t, t.TempDir())
	runSteps(t, sock, []step{
		{line: "show-healthcheck"}, // nothing configured: no header either
		{line: "create-healthcheck -h hc-test=tcp,hc-timeout=2,hc-count=1,hc-interval=10 hc1"},
		{line: "create-healthcheck -n -h hc-test=" + probe + ",hc-timeout=2,hc-count=1,hc-interval=10 hc2"},
	})
	out, errs, status := ilbadm(sock, "show-healthcheck")
	out = strings.ReplaceAll(out, probe, "/usr/local/bin/probe")
	want := `HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST
hc1           2       1       10       Y        tcp
hc2           2       1       10       N        /usr/local/bin/probe
`
	if out != want || errs != "" || status != 0 {
		t.Errorf("show-healthcheck:\n%s%q %d\nwant:\n%s", out, errs, status, want)
	}
}

func TestCreateHealthCheck(t *testing.T) {
	sock := daemon(t)
	dir := t.TempDir()
	probe := writeProbe(t, dir)
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	runSteps(t, sock, []step{
		// Defaults: timeout 5, count 3, interval 30, default ping on; the test is kept
		// as typed; keys and subcommand are case-insensitive, aliases accepted.
		{line: "create-healthcheck -h hc-test=TCP hcdef"},
		{line: "CREATE-HC -h HC-TEST=udp,hc-tout=1,HC-COUNT=2,hc-intl=3 hcudp"},
		{line: "create-hc -h hc-test=Ping,hc-timeout=0,hc-count=0,hc-interval=1 hcping"},
		// -h starts again from the defaults; -n turns the default ping off.
		{line: "create-hc -h hc-test=tcp,hc-count=9 -n -h hc-test=" + probe + " hcext"},
		{line: "show-hc", stdout: `HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST
hcdef         5       3       30       Y        TCP
hcudp         1       2       3        Y        udp
hcping        0       0       1        Y        Ping
hcext         5       3       30       N        ` + probe + `
`},
	})

	// Every error situation of spec §1.4 / §3.3, each leaving the configuration alone.
	before, _, _ := ilbadm(sock, "show-hc")
	runSteps(t, sock, []step{
		{line: "create-hc -h hc-test=tcp", status: 1,
			stderr: "ilbadm: usage: ilbadm create-healthcheck [-n] -h hc-test=val[,hc-timeout=val][,hc-count=va][,hc-interval=val]  hc-name\n"},
		{line: "create-hc -h hc-timeout=2 hcx", status: 1, stderr: "ilbadm: hc-test: missing\n"},
		{line: "create-hc hcx", status: 1, stderr: "ilbadm: hc-test: missing\n"},
		{line: "create-hc -x hcx", status: 1, stderr: "ilbadm: bad argument ?\n"},
		{line: "create-hc -h", status: 1, stderr: "ilbadm: bad argument :\n"},
		{line: "create-hc -h hc-test=tcp abcdefghijklmnopqrst", status: 1,
			stderr: "ilbadm: health check object name abcdefghijklmnopqrst is too long - must not exceed 19 chars\n"},
		{line: "create-hc -n -h hc-test=udp hcx", status: 1, stderr: "ilbadm: cannot disable default PING for this test\n"},
		{line: "create-hc -n -h hc-test=PING hcx", status: 1, stderr: "ilbadm: cannot disable default PING for this test\n"},
		{line: "create-hc -h hc-test=tcp,hc-timeout=5,hc-count=2,hc-interval=10 hcx", status: 1,
			stderr: "ilbadm: invalid argument(s) - see man page\n"},
		{line: "create-hc -h hc-test=tcp,hc-count=x hcx", status: 1, stderr: "ilbadm: hc-count: invalid value  - refer to ilbadm(1M)\n"},
		{line: "create-hc -h hc-test=tcp,hc-interval=-1 hcx", status: 1, stderr: "ilbadm: hc-interval: invalid value  - refer to ilbadm(1M)\n"},
		{line: "create-hc -h hc-test=tcp,foo=1 hcx", status: 1, stderr: "ilbadm: bad keyword foo\n"},
		{line: "create-hc -h hc-test tcp hcx", status: 1, stderr: "ilbadm: hc-test: assignment '=' missing\n"},
		{line: "create-hc -h hc-test= hcx", status: 1, stderr: "ilbadm: hc-test: missing value\n"},
		// ilbd: names compared case-insensitively; the name check comes first.
		{line: "create-hc -h hc-test=tcp HCDEF", status: 1, stderr: "ilbadm: object already exists\n"},
		{line: "create-hc -h hc-test=/nonexistent/probe hcdef", status: 1, stderr: "ilbadm: object already exists\n"},
		// ilbd: the external test must exist, and be an executable file.
		{line: "create-hc -h hc-test=/nonexistent/probe hcx", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
		{line: "create-hc -h hc-test=" + plain + " hcx", status: 1, stderr: "ilbadm: invalid argument(s) - see man page\n"},
		{line: "create-hc -h hc-test=" + dir + " hcx", status: 1, stderr: "ilbadm: invalid argument(s) - see man page\n"},
		{line: "create-hc -h hc-test=probe.sh hcx", status: 1, stderr: "ilbadm: invalid argument(s) - see man page\n"},
		{line: "create-hc -h hc-test=" + plain + "/x hcx", status: 1, stderr: "ilbadm: invalid argument(s) - see man page\n"},
	})
	if after, _, _ := ilbadm(sock, "show-hc"); after != before {
		t.Errorf("bad input changed the health checks:\n%s\nwant\n%s", after, before)
	}

	dead := filepath.Join(t.TempDir(), "none.sock")
	runSteps(t, dead, []step{
		{line: "create-hc -h hc-test=tcp hcx", status: 1, stderr: "ilbadm: socket() failed\n"},
		// Local checks come before ilbd is contacted.
		{line: "create-hc -h hc-test=tcp", status: 1,
			stderr: "ilbadm: usage: ilbadm create-healthcheck [-n] -h hc-test=val[,hc-timeout=val][,hc-count=va][,hc-interval=val]  hc-name\n"},
	})
}

func TestDeleteHealthCheck(t *testing.T) {
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11 sg"},
		{line: "create-hc -h hc-test=tcp hc1"},
		{line: "create-hc -h hc-test=tcp hc2"},
		{line: "create-hc -h hc-test=tcp hc3"},
		{line: "create-hc -h hc-test=tcp hc4"},
		// A rule uses hc1 (by another case) and is disabled: still "in use".
		{line: "create-rule -i vip=203.0.113.1,port=80 -m lbalg=rr,type=h -h hc-name=HC1 -o sg=sg r1"},
		{line: "delete-healthcheck", status: 1, stderr: "ilbadm: usage: ilbadm delete-healthcheck hc-name ...\n"},
		{line: "delete-healthcheck hc1", status: 1, stderr: "ilbadm: object is in use, cannot destroy\n"},
		{line: "delete-hc nosuch", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
		// Names are processed in order and the first failure stops: hc2 goes, hc3 stays.
		{line: "delete-hc hc2 nosuch hc3", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
		// No option parsing: "-a" is a health-check name.
		{line: "delete-hc -a", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
		{line: "DELETE-HC HC4"},
		{line: "show-hc", stdout: `HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST
hc1           5       3       30       Y        tcp
hc3           5       3       30       Y        tcp
`},
		{line: "delete-rule r1"},
		{line: "delete-hc hc1 hc3"},
		{line: "show-hc"},
	})
	runSteps(t, filepath.Join(t.TempDir(), "none.sock"), []step{
		{line: "delete-hc hc1", status: 1, stderr: "ilbadm: socket() failed\n"},
	})
}

func TestShowHealthCheck(t *testing.T) {
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-hc -h hc-test=tcp,hc-timeout=2,hc-count=1,hc-interval=10 hc1"},
		{line: "create-hc -h hc-test=PING health-check-nam19 "},
		// Named checks print in the order given, matched case-insensitively.
		{line: "show-hc health-check-nam19 HC1", stdout: `HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST
health-check-nam19 5  3       30       Y        PING
hc1           2       1       10       Y        tcp
`},
		// An unknown name stops the listing after what was printed.
		{line: "show-hc hc1 nosuch health-check-nam19", status: 1, stdout: `HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST
hc1           2       1       10       Y        tcp
`, stderr: "ilbadm: no such/no more element(s)\n"},
		{line: "show-hc nosuch", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
		// No options: "-p" is a name.
		{line: "show-healthcheck -p", status: 1, stderr: "ilbadm: no such/no more element(s)\n"},
	})
	runSteps(t, filepath.Join(t.TempDir(), "none.sock"), []step{
		{line: "show-hc", status: 1, stderr: "ilbadm: socket() failed\n"},
	})
}
