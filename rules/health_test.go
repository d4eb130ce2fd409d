package rules

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// snapEnabled returns, for the named rule of the current snapshot, each server's Enabled.
func snapEnabled(t *testing.T, m *Manager, rule string) map[string]bool {
	t.Helper()
	s := m.Snapshot().Load()
	for _, r := range s.Rules {
		if r.Name == rule {
			out := map[string]bool{}
			for _, sv := range r.Servers {
				out[sv.ID] = sv.Enabled
			}
			return out
		}
	}
	t.Fatalf("rule %s not in the snapshot", rule)
	return nil
}

func ruleID(m *Manager, name string) uint64 {
	var id uint64
	cancel := m.Watch(func(v View) { id = v.RuleID(name) })
	cancel()
	return id
}

// The health overlay disables a server in the snapshot only, for one rule instance, and
// is forgotten whenever the rule or server is disabled, removed or recreated.
func TestHealthOverlay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	m, err := NewManager(&Store{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Change(func(c *Config) error {
		*c = *baseConfig(t)
		r1, r2 := halfNAT("r1"), halfNAT("r2")
		r1.Enabled, r2.Enabled = true, true
		r2.MinPort, r2.MaxPort = 81, 81
		if err := c.CreateRule(r1); err != nil {
			return err
		}
		return c.CreateRule(r2)
	}))
	stored, _ := os.ReadFile(path)
	id1, id2 := ruleID(m, "r1"), ruleID(m, "R2")
	if id1 == 0 || id2 == 0 || id1 == id2 {
		t.Fatalf("rule IDs %d %d", id1, id2)
	}
	gen := m.Snapshot().Load().Generation

	if !m.SetServerHealth(id1, "_sg1.2", false) {
		t.Fatal("marking a server down published nothing")
	}
	if got := snapEnabled(t, m, "r1"); got["_sg1.2"] || !got["_sg1.0"] || !got["_sg1.1"] {
		t.Fatalf("r1 after _sg1.2 down: %v", got)
	}
	if got := snapEnabled(t, m, "r2"); !got["_sg1.2"] {
		t.Fatalf("r2 must not be affected by r1's health check: %v", got)
	}
	if g := m.Snapshot().Load().Generation; g <= gen {
		t.Fatalf("generation %d after %d", g, gen)
	}
	// Transient: the configuration (show-server) and the stored file are unchanged.
	cfg := m.Config()
	if s := cfg.Group("sg1").Servers; !s[0].Enabled || !s[1].Enabled || !s[2].Enabled {
		t.Fatalf("configuration changed: %+v", s)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, stored) {
		t.Fatal("the health overlay was written to the store")
	}
	// Idempotent: the same verdict publishes nothing.
	if m.SetServerHealth(id1, "_sg1.2", false) {
		t.Fatal("a repeated verdict published a snapshot")
	}
	// Back up.
	if !m.SetServerHealth(id1, "_sg1.2", true) || !snapEnabled(t, m, "r1")["_sg1.2"] {
		t.Fatal("server not re-enabled")
	}
	// An admin-disabled server stays disabled whatever the health check says.
	must(m.Change(func(c *Config) error { return c.SetServerEnabled("_sg1.0", false) }))
	if m.SetServerHealth(id1, "_sg1.0", true) || snapEnabled(t, m, "r1")["_sg1.0"] {
		t.Fatal("health verdict overrode an administrator's disable-server")
	}
	must(m.Change(func(c *Config) error { return c.SetServerEnabled("_sg1.0", true) }))

	// Disabling the server forgets the verdict: enabling it again puts it in service.
	m.SetServerHealth(id1, "_sg1.1", false)
	must(m.Change(func(c *Config) error { return c.SetServerEnabled("_sg1.1", false) }))
	must(m.Change(func(c *Config) error { return c.SetServerEnabled("_sg1.1", true) }))
	if !snapEnabled(t, m, "r1")["_sg1.1"] {
		t.Fatal("a verdict survived disable-server/enable-server")
	}
	// Same for disable-rule/enable-rule.
	m.SetServerHealth(id1, "_sg1.1", false)
	must(m.Change(func(c *Config) error { return c.SetRuleEnabled("r1", false) }))
	if m.SetServerHealth(id1, "_sg1.1", false) {
		t.Fatal("a verdict on a disabled rule was recorded")
	}
	must(m.Change(func(c *Config) error { return c.SetRuleEnabled("r1", true) }))
	if !snapEnabled(t, m, "r1")["_sg1.1"] {
		t.Fatal("a verdict survived disable-rule/enable-rule")
	}
	// A deleted and recreated rule is a new instance: verdicts on the old one are ignored.
	m.SetServerHealth(id1, "_sg1.1", false)
	must(m.Change(func(c *Config) error { return c.DeleteRule("r1") }))
	must(m.Change(func(c *Config) error { r := halfNAT("r1"); r.Enabled = true; return c.CreateRule(r) }))
	if id := ruleID(m, "r1"); id == id1 {
		t.Fatal("recreated rule kept its instance ID")
	}
	if m.SetServerHealth(id1, "_sg1.0", false) {
		t.Fatal("a verdict on a deleted rule instance was recorded")
	}
	if got := snapEnabled(t, m, "r1"); !got["_sg1.0"] || !got["_sg1.1"] || !got["_sg1.2"] {
		t.Fatalf("recreated rule inherited verdicts: %v", got)
	}
	// A removed server's verdict goes with it.
	m.SetServerHealth(id2, "_sg1.2", false)
	must(m.Change(func(c *Config) error { return c.RemoveServer("sg1", "_sg1.2") }))
	if len(m.down) != 0 {
		t.Fatalf("overlay keeps entries of removed servers: %v", m.down)
	}
	// A new Manager (ilbd restart) starts with every server in service.
	m2, err := NewManager(&Store{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m2.Snapshot().Load().Rules {
		for _, s := range r.Servers {
			if !s.Enabled {
				t.Fatalf("after restart %s/%s is disabled", r.Name, s.ID)
			}
		}
	}
}

// Watch delivers the current configuration at once and every change in order.
func TestWatch(t *testing.T) {
	m, err := NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	cancel := m.Watch(func(v View) { seen = append(seen, len(v.Config.Groups)) })
	_ = m.Change(func(c *Config) error { return c.CreateServerGroup("a") })
	_ = m.Change(func(c *Config) error { return c.CreateServerGroup("a") }) // fails: no call
	_ = m.Change(func(c *Config) error { return c.CreateServerGroup("b") })
	cancel()
	_ = m.Change(func(c *Config) error { return c.CreateServerGroup("c") })
	if len(seen) != 3 || seen[0] != 0 || seen[1] != 1 || seen[2] != 2 {
		t.Fatalf("watcher saw %v, want [0 1 2]", seen)
	}
}
