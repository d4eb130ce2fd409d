package tests

import (
	"strings"
	"testing"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestConfigOnlyBadInput runs ilbd without a data plane (no port lines) and checks that
// bad create-rule commands fail exactly as on Solaris (stderr text, exit 1, nothing on
// stdout) and change nothing.
func TestConfigOnlyBadInput(t *testing.T) {
	l := newLab(t, lab.Options{ConfigOnly: true})
	startIlbd(t, l)
	configureWeb(t, l)
	want := ilbadmOK(t, l, "show-rule")
	sameText(t, "ilbadm show-rule", want, golden(t, "show-rule.golden"))
	sameText(t, "ilbadm show-servergroup", ilbadmOK(t, l, "show-servergroup"), golden(t, "show-servergroup.golden"))

	for _, c := range []struct {
		args   string
		stderr string
	}{
		{"create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr -o servergroup=websg bad1",
			"ilbadm: lbalg or type is unspecified\n"},
		{"create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT,foo=1 -o servergroup=websg bad2",
			"ilbadm: bad keyword foo\n"},
		{"create-rule -e -i vip=not-an-ip,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg bad3",
			"ilbadm: vip: address is invalid\n"},
		{"create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg",
			"ilbadm: missing mandatory arguments - please refer to 'ilbadm create-rule' subcommand description in ilbadm(1M)\n"},
		// Refused by ilbd rather than by ilbadm's parser (spec §1.4, §3.2).
		{"create-rule -e -i vip=203.0.113.21,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=nosuchsg bad5",
			"ilbadm: cannot find specified server group\n"},
		{"create-rule -e -i vip=203.0.113.21,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp",
			"ilbadm: specified rule name already exists\n"},
		{"create-rule -e -i vip=203.0.113.10,port=80,protocol=tcp -m lbalg=rr,type=HALF-NAT -o servergroup=websg dup80",
			"ilbadm: object already exists\n"},
	} {
		args := strings.Fields(c.args)
		out, errOut, code := l.Ilbadm(args...)
		if code != 1 || out != "" || errOut != c.stderr {
			t.Errorf("ilbadm %s\n got: exit %d, stdout %q, stderr %q\nwant: exit 1, stdout \"\", stderr %q", c.args, code, out, errOut, c.stderr)
		}
		sameText(t, "show-rule after `ilbadm "+c.args+"`", ilbadmOK(t, l, "show-rule"), want)
	}
}

// TestConfigOnlyDurability: several groups and rules of every kind survive kill -9 and a
// graceful restart of ilbd, byte for byte in every show-* output.
func TestConfigOnlyDurability(t *testing.T) {
	l := newLab(t, lab.Options{ConfigOnly: true})
	d := startIlbd(t, l)
	for _, cmd := range []string{
		"create-servergroup -s server=192.0.2.11,192.0.2.12,192.0.2.13 websg",
		"create-servergroup -s server=192.0.2.21:8080,192.0.2.22:8080 appsg",
		"add-server -s server=192.0.2.23:8080 appsg",
		"create-servergroup -s server=192.0.2.31-192.0.2.33 dnssg",
		"create-servergroup emptysg",
		"create-rule -e -i vip=203.0.113.10,port=80,protocol=tcp -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp",
		"create-rule -i vip=203.0.113.11,port=8080,protocol=tcp -m lbalg=hash-ip,type=HALF-NAT -t conn-drain=30,nat-timeout=200 -o servergroup=appsg app",
		"create-rule -e -p -i vip=203.0.113.12,port=53,protocol=udp -m lbalg=hash-ip-port,type=DSR,pmask=24 -t persist-timeout=90 -o servergroup=dnssg dns",
		"create-rule -e -i vip=203.0.113.13,port=8000-8001,protocol=tcp -m lbalg=hipv,type=NAT,proxy-src=198.51.100.50-198.51.100.53 -o servergroup=websg natrule",
		"disable-server _websg.1",
	} {
		ilbadmOK(t, l, strings.Fields(cmd)...)
	}
	views := [][]string{
		{"show-rule"},
		{"show-rule", "-f"},
		{"show-servergroup"},
		{"show-server"},
	}
	snapshot := func() []string {
		var s []string
		for _, v := range views {
			s = append(s, ilbadmOK(t, l, v...))
		}
		return s
	}
	before := snapshot()
	// Not vacuous: every object is listed.
	for _, name := range []string{"webtcp", "app", "dns", "natrule"} {
		if !strings.Contains(before[0], "\n"+name+" ") {
			t.Errorf("show-rule does not list %s:\n%s", name, before[0])
		}
	}
	if n := strings.Count(before[1], "RULENAME: "); n != 4 {
		t.Errorf("show-rule -f lists %d rules, want 4:\n%s", n, before[1])
	}
	for _, name := range []string{"websg", "appsg", "dnssg", "emptysg"} {
		if !strings.Contains(before[2], "\n"+name+" ") {
			t.Errorf("show-servergroup does not list %s:\n%s", name, before[2])
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	compare := func(when string) {
		t.Helper()
		for i, got := range snapshot() {
			sameText(t, "ilbadm "+strings.Join(views[i], " ")+" "+when, got, before[i])
		}
	}
	if err := d.Kill9(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	compare("after kill -9 and restart")

	if err := d.Restart(); err != nil { // SIGTERM, then start again
		t.Fatalf("graceful restart: %v", err)
	}
	compare("after a graceful restart")

	// Still fully working: a change after the restarts is accepted and shown.
	ilbadmOK(t, l, "delete-rule", "app")
	if got := ilbadmOK(t, l, "show-rule"); strings.Contains(got, "\napp ") || !strings.Contains(got, "\nwebtcp ") {
		t.Errorf("show-rule after delete-rule app:\n%s", got)
	}
}
