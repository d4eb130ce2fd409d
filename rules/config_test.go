package rules

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func code(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func baseConfig(t *testing.T) *Config {
	t.Helper()
	c := &Config{}
	if err := c.CreateServerGroup("sg1"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"192.0.2.13", "192.0.2.11", "192.0.2.12"} {
		if _, err := c.AddServer("sg1", ServerSpec{Addr: addr(a)}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func halfNAT(name string) Rule {
	return Rule{Name: name, VIP: addr("203.0.113.10"), Proto: ProtoTCP, MinPort: 80, MaxPort: 80,
		Algo: AlgoRoundRobin, Topo: TopoHalfNAT, ServerGroup: "sg1"}
}

func TestServersSortedWithMonotonicIDs(t *testing.T) {
	c := baseConfig(t)
	g := c.Group("sg1")
	var got []string
	for _, s := range g.Servers {
		got = append(got, s.ID+"="+s.Addr.String())
	}
	want := []string{"_sg1.1=192.0.2.11", "_sg1.2=192.0.2.12", "_sg1.0=192.0.2.13"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("servers = %v, want %v", got, want)
	}
	if err := c.RemoveServer("sg1", "_sg1.1"); err != nil {
		t.Fatal(err)
	}
	id, err := c.AddServer("sg1", ServerSpec{Addr: addr("192.0.2.14")})
	if err != nil || id != "_sg1.3" {
		t.Fatalf("after removing _sg1.1 the next ID = %q, %v; want _sg1.3 (monotonic)", id, err)
	}
}

func TestConfigFailureCodes(t *testing.T) {
	c := baseConfig(t)
	if err := c.CreateRule(halfNAT("r1")); err != nil {
		t.Fatal(err)
	}
	v6 := halfNAT("r6")
	v6.VIP = addr("2001:db8::10")
	other := halfNAT("r2")
	other.MinPort, other.MaxPort = 80, 90
	loop := halfNAT("r3")
	loop.VIP = addr("127.0.0.1")
	noSG := halfNAT("r4")
	noSG.ServerGroup = "nope"
	caseDup := halfNAT("R1")
	caseDup.MinPort, caseDup.MaxPort = 81, 81
	noHC := halfNAT("r5")
	noHC.MinPort, noHC.MaxPort = 82, 82
	noHC.HCName = "hc1"
	cases := []struct {
		name string
		err  error
		want Code
	}{
		{"duplicate name", c.CreateRule(halfNAT("r1")), CodeDupRule},
		{"name differing in case", c.CreateRule(caseDup), CodeEEXIST},
		{"overlapping ports", c.CreateRule(other), CodeEEXIST},
		{"family mismatch", c.CreateRule(v6), CodeMismatchSG},
		{"loopback vip", c.CreateRule(loop), CodeEINVAL},
		{"missing group", c.CreateRule(noSG), CodeSGUnavail},
		{"missing health check", c.CreateRule(noHC), CodeENOHCInfo},
		{"group exists", c.CreateServerGroup("sg1"), CodeSGExists},
		{"group name too long", c.CreateServerGroup("abcdefghijklmno"), CodeNameTooLong},
		{"group in use", c.DeleteServerGroup("sg1"), CodeSGInUse},
		{"delete unknown group", c.DeleteServerGroup("x"), CodeSGUnavail},
		{"delete unknown rule", c.DeleteRule("x"), CodeENORule},
		{"enable unknown rule", c.SetRuleEnabled("x", true), CodeENORule},
		{"duplicate server", func() error { _, err := c.AddServer("sg1", ServerSpec{Addr: addr("192.0.2.11")}); return err }(), CodeEEXIST},
		{"server family", func() error { _, err := c.AddServer("sg1", ServerSpec{Addr: addr("2001:db8::1")}); return err }(), CodeMismatchH},
		{"add to unknown group", func() error { _, err := c.AddServer("zz", ServerSpec{Addr: addr("192.0.2.1")}); return err }(), CodeENOENT},
		{"remove unknown server", c.RemoveServer("sg1", "_sg1.99"), CodeSrvUnavail},
		{"enable unknown server", c.SetServerEnabled("_sg1.99", true), CodeENOENT},
	}
	for _, tc := range cases {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.want)
		}
	}
	if err := c.CreateServerGroup("empty"); err != nil {
		t.Fatal(err)
	}
	e := halfNAT("r7")
	e.ServerGroup, e.MinPort, e.MaxPort = "empty", 7, 7
	if got := code(c.CreateRule(e)); got != CodeSGEmpty {
		t.Errorf("empty group: code %d, want %d", got, CodeSGEmpty)
	}
	if _, err := c.AddServer("empty", ServerSpec{Addr: addr("192.0.2.50")}); err != nil {
		t.Fatal(err)
	}
	if got := code(c.SetServerEnabled("_empty.0", false)); got != CodeInvalEnbSrvr {
		t.Errorf("server of unused group: code %d, want %d", got, CodeInvalEnbSrvr)
	}
}

func TestPortCompatibility(t *testing.T) {
	c := &Config{}
	c.CreateServerGroup("sg")
	c.AddServer("sg", ServerSpec{Addr: addr("192.0.2.11"), MinPort: 8000, MaxPort: 8009})
	r := halfNAT("r")
	r.ServerGroup, r.MinPort, r.MaxPort = "sg", 5000, 5004
	if got := code(c.CreateRule(r)); got != CodeBadSG {
		t.Fatalf("range size mismatch: code %d, want %d", got, CodeBadSG)
	}
	r.MaxPort = 5009
	if err := c.CreateRule(r); err != nil {
		t.Fatalf("same-size ranges: %v", err)
	}
	if _, err := c.AddServer("sg", ServerSpec{Addr: addr("192.0.2.12"), MinPort: 1, MaxPort: 3}); code(err) != CodeInvalSrvr {
		t.Fatalf("adding a differently sized range: %v, want code %d", err, CodeInvalSrvr)
	}
	if _, err := c.AddServer("sg", ServerSpec{Addr: addr("192.0.2.12"), MinPort: 9000, MaxPort: 9000}); err != nil {
		t.Fatalf("adding a single port (collapsing): %v", err)
	}
}

func TestCompileLookup(t *testing.T) {
	c := baseConfig(t)
	r := halfNAT("web")
	r.Enabled = true
	c.CreateRule(r)
	u := halfNAT("dns")
	u.Proto, u.MinPort, u.MaxPort = ProtoUDP, 53, 53
	c.CreateRule(u)
	s := Compile(c, 7, func(string) uint64 { return 1 })
	if i := s.Lookup(addr("203.0.113.10"), ProtoTCP, 80); i != 0 || !s.Rules[0].Enabled || len(s.Rules[0].Servers) != 3 {
		t.Fatalf("tcp lookup = %d", i)
	}
	if i := s.Lookup(addr("203.0.113.10"), ProtoUDP, 53); i != 1 || s.Rules[1].NATTimeout != DefaultNATTimeoutUDP {
		t.Fatalf("udp lookup = %d (timeout %v)", i, s.Rules[1].NATTimeout)
	}
	if s.Lookup(addr("203.0.113.10"), ProtoTCP, 81) != -1 || s.Lookup(addr("203.0.113.11"), ProtoTCP, 80) != -1 {
		t.Fatal("lookup matched a port or address no rule covers")
	}
	if !s.HasVIP(addr("203.0.113.10")) || s.HasVIP(addr("203.0.113.11")) {
		t.Fatal("HasVIP wrong")
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Lookup(addr("203.0.113.10"), ProtoTCP, 80) }); allocs != 0 {
		t.Fatalf("Lookup allocates %v times", allocs)
	}
}

func TestManagerFailedChangeLeavesEverything(t *testing.T) {
	dir := t.TempDir()
	st := &Store{Path: filepath.Join(dir, "config.json")}
	m, err := NewManager(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Change(func(c *Config) error { return c.CreateServerGroup("sg1") }); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(st.Path)
	gen := m.Snapshot().Load().Generation
	err = m.Change(func(c *Config) error {
		c.CreateServerGroup("sg2") // applied to the copy...
		return c.CreateServerGroup("sg1")
	})
	if code(err) != CodeSGExists {
		t.Fatalf("err = %v", err)
	}
	after, _ := os.ReadFile(st.Path)
	if string(before) != string(after) || m.Snapshot().Load().Generation != gen || len(m.Config().Groups) != 1 {
		t.Fatal("a failed change modified the stored file, the snapshot or the configuration")
	}
	// Reload from disk: the confirmed change is there.
	m2, err := NewManager(st)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m2.Config(), m.Config()) {
		t.Fatalf("reloaded %+v, want %+v", m2.Config(), m.Config())
	}
}

func TestStoreSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	st := &Store{Path: filepath.Join(dir, "config.json")}
	c := baseConfig(t)
	if err := st.Save(c); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	// A save that cannot complete leaves the old file intact.
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if os.Geteuid() != 0 {
		if err := st.Save(&Config{}); err == nil {
			t.Fatal("save into a read-only directory succeeded")
		}
		got, err := st.Load()
		if err != nil || len(got.Groups) != 1 {
			t.Fatalf("old configuration damaged: %+v %v", got, err)
		}
	}
	os.WriteFile(st.Path, []byte("{not json"), 0o644)
	if _, err := st.Load(); err == nil {
		t.Fatal("corrupt store loaded without error")
	}
}

// ilbd's health-check checks: names unique ignoring case, interval > timeout*count
// (without overflow for any numbers a client sends), a known test or an absolute path;
// a check in use by any rule cannot be deleted.
func TestHealthChecks(t *testing.T) {
	c := baseConfig(t)
	ok := HealthCheck{Name: "hc1", Test: "tcp", Timeout: 5, Count: 3, Interval: 16}
	if err := c.CreateHealthCheck(ok); err != nil {
		t.Fatal(err)
	}
	const maxInt = int(^uint(0) >> 1)
	long := make([]byte, MaxHCTest+1)
	for i := range long {
		long[i] = 'x'
	}
	long[0] = '/'
	for _, tt := range []struct {
		hc   HealthCheck
		want Code
	}{
		{HealthCheck{Name: "HC1", Test: "udp", Interval: 1}, CodeEEXIST},
		{HealthCheck{Name: "h", Test: "tcp", Timeout: 5, Count: 3, Interval: 15}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: "tcp", Timeout: maxInt, Count: maxInt, Interval: maxInt}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: "tcp", Timeout: -1, Count: 1, Interval: 10}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: "tcp", Interval: 0}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: "probe.sh", Interval: 10}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: string(long), Interval: 10}, CodeEINVAL},
		{HealthCheck{Name: "", Test: "tcp", Interval: 10}, CodeEINVAL},
		{HealthCheck{Name: "h", Test: "PING", Timeout: maxInt, Count: 0, Interval: 1}, 0},
	} {
		if got := code(c.CreateHealthCheck(tt.hc)); got != tt.want {
			t.Errorf("%+v: code %d, want %d", tt.hc, got, tt.want)
		}
	}
	r := halfNAT("r1")
	r.HCName = "HC1"
	if err := c.CreateRule(r); err != nil {
		t.Fatal(err)
	}
	if got := code(c.DeleteHealthCheck("hc1")); got != CodeInUse {
		t.Errorf("delete in use: %d", got)
	}
	if got := code(c.DeleteHealthCheck("nosuch")); got != CodeENOENT {
		t.Errorf("delete unknown: %d", got)
	}
	if got := code(c.DeleteHealthCheck("H")); got != 0 || c.HealthCheck("h") != nil {
		t.Errorf("delete h: %d", got)
	}
}
