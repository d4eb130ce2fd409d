package main

import (
	"github.com/ilbgo/ilb/api"

	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/dataplane"
)

func settingsFrom(t *testing.T, text string) (*Settings, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ilbd.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return loadSettings(p, true)
}

func TestExceptionSettings(t *testing.T) {
	s, err := settingsFrom(t, `
eal   -l 0-1
port  net_af_packet0,iface=lbc 198.51.100.1/24
port  net_af_packet1,iface=lbs 192.0.2.1/24 tap=srvtap
port  0000:03:00.0 203.0.113.1/24 exception=off
port  net_null0 203.0.113.129/25 exception=on
`)
	if err != nil {
		t.Fatal(err)
	}
	type tap struct {
		name string
		on   bool
	}
	check := func(want ...tap) {
		t.Helper()
		for i, w := range want {
			if name, on := s.TapName(i); name != w.name || on != w.on {
				t.Errorf("TapName(%d) = %q, %v; want %q, %v", i, name, on, w.name, w.on)
			}
		}
	}
	check(tap{"ilb0", true}, tap{"srvtap", true}, tap{"", false}, tap{"ilb3", true})
	if got := s.Ports[1].Addrs; len(got) != 1 || got[0].String() != "192.0.2.1/24" {
		t.Errorf("port 1 addresses %v: options must not be taken for addresses", got)
	}
	args := dataplane.EALArgs(&s.Config)
	for _, want := range []string{"--vdev=net_tap_ilb0,iface=ilb0", "--vdev=net_tap_ilb1,iface=srvtap", "--vdev=net_tap_ilb3,iface=ilb3"} {
		if !slices.Contains(args, want) {
			t.Errorf("EAL arguments %q lack %s", args, want)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "net_tap_ilb2") }) {
		t.Errorf("EAL arguments %q create a TAP for a port with exception=off", args)
	}

	// "exception off" turns it off for every port that does not say exception=on.
	if err := s.set("exception", []string{"off"}); err != nil {
		t.Fatal(err)
	}
	check(tap{"", false}, tap{"", false}, tap{"", false}, tap{"ilb3", true})
	if err := s.set("exception", []string{"on"}); err != nil {
		t.Fatal(err)
	}
	check(tap{"ilb0", true}, tap{"srvtap", true}, tap{"", false}, tap{"ilb3", true})
	if err := s.CheckTaps(); err != nil {
		t.Errorf("checkTaps: %v", err)
	}
}

func TestExceptionSettingsErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"exception maybe\n", "on or off"},
		{"exception\n", "takes one value"},
		{"port net_null0 198.51.100.1/24 tap=\n", "1 to 15 bytes"},
		{"port net_null0 198.51.100.1/24 tap=averyveryverylongname\n", "1 to 15 bytes"},
		{"port net_null0 198.51.100.1/24 tap=a,b\n", "not allowed"},
		{"port net_null0 198.51.100.1/24 tap=a/b\n", "not allowed"},
		{"port net_null0 198.51.100.1/24 exception=no\n", "on or off"},
		{"port net_null0 198.51.100.1/24 colour=blue\n", "unknown port option"},
		{"port net_null0 tap=x0\n", "at least one address"},
	} {
		if _, err := settingsFrom(t, c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.text, err, c.want)
		}
	}
	s, err := settingsFrom(t, "port net_null0 198.51.100.1/24 tap=ilb1\nport net_null1 192.0.2.1/24\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckTaps(); err == nil || !strings.Contains(err.Error(), "ilb1") {
		t.Errorf("two ports on ilb1: checkTaps = %v", err)
	}
	s, err = settingsFrom(t, "port net_tap0,iface=ilb1 198.51.100.1/24 exception=off\nport net_null1 192.0.2.1/24\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckTaps(); err == nil || !strings.Contains(err.Error(), "ilb1") {
		t.Errorf("exception interface ilb1 = a port's own interface: checkTaps = %v", err)
	}
}

// TestSettingsExample: the shipped example file is valid and says what it means.
func TestSettingsExample(t *testing.T) {
	s, err := loadSettings("../dist/ilbd.conf.example", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Ports) != 2 || s.NoException {
		t.Fatalf("ports %+v, exception off %v", s.Ports, s.NoException)
	}
	if name, on := s.TapName(1); name != "ilbsrv" || !on {
		t.Errorf("TapName(1) = %q, %v; want ilbsrv, true", name, on)
	}
	if err := s.CheckTaps(); err != nil {
		t.Error(err)
	}
	if s.ConnTable != 262144 || s.HalfOpenTimeout != 5*time.Second || s.ConnFullDrop {
		t.Errorf("connection table settings %d %v %v", s.ConnTable, s.HalfOpenTimeout, s.ConnFullDrop)
	}
}

func TestConnTableSettings(t *testing.T) {
	s, err := settingsFrom(t, "conn-table 4096\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.ConnTable != 4096 || s.HalfOpenTimeout != 5*time.Second || s.ConnFullDrop {
		t.Fatalf("defaults: %d entries, half-open %v, drop %v", s.ConnTable, s.HalfOpenTimeout, s.ConnFullDrop)
	}
	s, err = settingsFrom(t, "half-open-timeout 12\nconn-full drop\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.HalfOpenTimeout != 12*time.Second || !s.ConnFullDrop {
		t.Fatalf("half-open %v, drop %v", s.HalfOpenTimeout, s.ConnFullDrop)
	}
	for _, bad := range []string{"half-open-timeout 0", "half-open-timeout 5s", "half-open-timeout 3601", "conn-full lru", "conn-table 100", "conn-full"} {
		if _, err := settingsFrom(t, bad+"\n"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A missing admin group is reported at start, an existing one is not.
func TestWarnAdminGroup(t *testing.T) {
	var logged []string
	logf := func(format string, a ...any) { logged = append(logged, fmt.Sprintf(format, a...)) }
	warnAdminGroup("root", logf) // exists on every Linux system
	if len(logged) != 0 {
		t.Fatalf("existing group: %q", logged)
	}
	warnAdminGroup("ilb-no-such-group-xyz", logf)
	if len(logged) != 1 || !strings.Contains(logged[0], `admin group "ilb-no-such-group-xyz" does not exist`) || !strings.Contains(logged[0], "only root") {
		t.Fatalf("missing group: %q", logged)
	}
	logged = nil
	warnAdminGroup("", logf)
	if len(logged) != 1 || !strings.Contains(logged[0], "only root") {
		t.Fatalf("no group: %q", logged)
	}
}

// SIGHUP applies a new admin group at once and names every other changed setting as one for
// the next restart.
func TestApplyReload(t *testing.T) {
	cur := &Settings{Socket: "/run/ilb/s", Store: "/a", AdminGroup: "root"}
	cur.ConnTable = 1000
	next := *cur
	next.AdminGroup, next.Store, next.ConnTable = "ilb-no-such-group-xyz", "/b", 2000
	var logged []string
	logf := func(format string, a ...any) { logged = append(logged, fmt.Sprintf(format, a...)) }
	svc := &api.Service{AdminGroup: cur.AdminGroup}
	got := applyReload(cur, &next, svc, logf)
	if got.AdminGroup != next.AdminGroup || got.Store != "/a" || got.ConnTable != 1000 {
		t.Fatalf("settings in force: %+v", got)
	}
	all := strings.Join(logged, "\n")
	for _, want := range []string{`admin group is now "ilb-no-such-group-xyz"`, "does not exist",
		"store changed in the settings; it takes effect when ilbd restarts",
		"conn-table changed in the settings; it takes effect when ilbd restarts"} {
		if !strings.Contains(all, want) {
			t.Errorf("log lacks %q:\n%s", want, all)
		}
	}
	logged = nil
	applyReload(got, got, svc, logf)
	if len(logged) != 1 || !strings.Contains(logged[0], "unchanged") {
		t.Errorf("unchanged settings: %q", logged)
	}
}

// Every field of the settings has its key for the reload's log.
func TestSettingKeysCoverSettings(t *testing.T) {
	var a, b Settings
	b.Socket, b.Store, b.AdminGroup = "x", "x", "x"
	b.EAL, b.Ports, b.Gateways = []string{"x"}, make([]dataplane.Port, 1), make([]netip.Addr, 1)
	b.ConnTable, b.HalfOpenTimeout, b.ConnFullDrop, b.SteerPrefix4, b.SteerPrefix6, b.NoException = 1, 1, true, 1, 1, true
	changed := settingsDiff(&a, &b)
	if len(changed) != 12 {
		t.Errorf("%d fields differ, want 12: %v (a new field needs a key here and in the test)", len(changed), changed)
	}
	for _, f := range changed {
		if settingKeys[f] == "" {
			t.Errorf("field %s has no settings key", f)
		}
	}
}
