package rules

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Manager owns the configuration of a running ilbd. Every change is validated on a copy,
// written durably, compiled into a new Snapshot and published with one atomic store, so
// readers (the data plane, show commands) never see half a change and a failed change
// leaves everything as it was.
type Manager struct {
	mu    sync.Mutex // serialises changes; readers use Config() or the snapshot pointer
	cfg   Config
	store *Store

	// ruleIDs gives every rule instance a daemon-lifetime ID (counters, connections).
	ruleIDs map[string]uint64
	nextID  uint64
	gen     uint64

	// down is the health checker's transient overlay: the servers (by ID) of each rule
	// instance (by ID) that a health check declared unreachable or dead. It is never
	// stored; it only holds entries while the rule and the server are both enabled.
	down map[uint64]map[string]bool
	// watchers are called, under mu, with every configuration that becomes current.
	watchers map[int]func(View)
	nextWID  int

	snap atomic.Pointer[Snapshot]
}

// View is a configuration together with the instance ID of each of its rules (the
// SnapRule.ID of the snapshot compiled from it), taken under one lock so the two agree.
type View struct {
	Config  Config
	ruleIDs map[string]uint64
}

// RuleID returns the instance ID of the named rule, 0 if the view has no such rule.
func (v *View) RuleID(name string) uint64 { return v.ruleIDs[strings.ToLower(name)] }

// NewManager loads the stored configuration (if store is non-nil) and publishes its snapshot.
func NewManager(store *Store) (*Manager, error) {
	m := &Manager{store: store, ruleIDs: map[string]uint64{}, down: map[uint64]map[string]bool{},
		watchers: map[int]func(View){}}
	if store != nil {
		cfg, err := store.Load()
		if err != nil {
			return nil, err
		}
		m.cfg = cfg
	}
	m.publish()
	return m, nil
}

// Snapshot returns the pointer that data-plane workers load once per burst.
func (m *Manager) Snapshot() *atomic.Pointer[Snapshot] { return &m.snap }

// Config returns a deep copy of the current configuration.
func (m *Manager) Config() Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Clone()
}

// Change applies fn to a copy of the configuration; if fn succeeds the copy is stored
// durably and becomes the configuration. A storage failure is reported as CodeCfgUpdate and
// also leaves the configuration unchanged.
func (m *Manager) Change(fn func(c *Config) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := m.cfg.Clone()
	if err := fn(&next); err != nil {
		return err
	}
	if m.store != nil {
		if err := m.store.Save(&next); err != nil {
			return &Error{Code: CodeCfgUpdate}
		}
	}
	m.cfg = next
	m.publish()
	m.notify()
	return nil
}

// Watch calls fn with the current configuration now and with every configuration that
// becomes current afterwards, in order, until the returned cancel function is called.
// fn runs while the Manager's lock is held: it must be quick and must not call the
// Manager (it may hand work to other goroutines that do).
func (m *Manager) Watch(fn func(View)) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextWID
	m.nextWID++
	m.watchers[id] = fn
	fn(m.view())
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers, id)
	}
}

// view returns a View of the current configuration. Called with mu held.
func (m *Manager) view() View {
	ids := make(map[string]uint64, len(m.ruleIDs))
	for k, v := range m.ruleIDs {
		ids[k] = v
	}
	return View{Config: m.cfg.Clone(), ruleIDs: ids}
}

// notify hands the current configuration to every watcher. Called with mu held.
func (m *Manager) notify() {
	if len(m.watchers) == 0 {
		return
	}
	ids := make([]int, 0, len(m.watchers))
	for id := range m.watchers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		m.watchers[id](m.view())
	}
}

// SetServerHealth records a health check's verdict on server serverID of rule instance
// ruleID (a SnapRule.ID / View.RuleID) and, if that changes the server's state, publishes a
// new snapshot in which the server is enabled only if the administrator enabled it and it
// is healthy. The verdict is transient: it is not stored, the configuration (show-server)
// does not change, and it is forgotten when the rule or the server is disabled, removed or
// deleted, or ilbd restarts. A verdict on a rule instance or server that no longer exists
// or is disabled is ignored. It reports whether a new snapshot was published.
func (m *Manager) SetServerHealth(ruleID uint64, serverID string, up bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.healthApplies(ruleID, serverID) {
		return false
	}
	if m.down[ruleID][serverID] == !up {
		return false
	}
	if up {
		delete(m.down[ruleID], serverID)
		if len(m.down[ruleID]) == 0 {
			delete(m.down, ruleID)
		}
	} else {
		if m.down[ruleID] == nil {
			m.down[ruleID] = map[string]bool{}
		}
		m.down[ruleID][serverID] = true
	}
	m.publish()
	return true
}

// healthApplies reports whether the rule instance exists and is enabled and has the server,
// enabled, in its group. Called with mu held.
func (m *Manager) healthApplies(ruleID uint64, serverID string) bool {
	for i := range m.cfg.Rules {
		r := &m.cfg.Rules[i]
		if m.ruleIDs[strings.ToLower(r.Name)] != ruleID {
			continue
		}
		if !r.Enabled {
			return false
		}
		g := m.cfg.Group(r.ServerGroup)
		if g == nil {
			return false
		}
		for _, s := range g.Servers {
			if s.ID == serverID {
				return s.Enabled
			}
		}
		return false
	}
	return false
}

// publish compiles the configuration into a new snapshot. Called with mu held (or before
// the Manager is shared).
func (m *Manager) publish() {
	m.gen++
	live := make(map[string]uint64, len(m.cfg.Rules))
	for _, r := range m.cfg.Rules {
		key := strings.ToLower(r.Name)
		id, ok := m.ruleIDs[key]
		if !ok {
			m.nextID++
			id = m.nextID
		}
		live[key] = id
	}
	m.ruleIDs = live
	for id, servers := range m.down {
		for sid := range servers {
			if !m.healthApplies(id, sid) {
				delete(servers, sid)
			}
		}
		if len(servers) == 0 {
			delete(m.down, id)
		}
	}
	rs := compileRules(&m.cfg, func(name string) uint64 { return live[strings.ToLower(name)] })
	for i := range rs {
		if down := m.down[rs[i].ID]; down != nil {
			for j := range rs[i].Servers {
				if down[rs[i].Servers[j].ID] {
					rs[i].Servers[j].Enabled = false
				}
			}
		}
	}
	m.snap.Store(NewSnapshot(m.gen, rs))
}

// Compile builds the data-plane snapshot of a configuration. ruleID names each rule instance.
func Compile(c *Config, gen uint64, ruleID func(name string) uint64) *Snapshot {
	return NewSnapshot(gen, compileRules(c, ruleID))
}

// compileRules converts the configuration's rules to their data-plane form, in creation order.
func compileRules(c *Config, ruleID func(name string) uint64) []SnapRule {
	groups := make(map[string]*ServerGroup, len(c.Groups))
	for i := range c.Groups {
		groups[c.Groups[i].Name] = &c.Groups[i]
	}
	out := make([]SnapRule, 0, len(c.Rules))
	for _, r := range c.Rules {
		sr := SnapRule{
			ID: ruleID(r.Name), Name: r.Name, Enabled: r.Enabled, VIP: r.VIP, Proto: r.Proto,
			MinPort: r.MinPort, MaxPort: r.MaxPort, Algo: r.Algo, Topo: r.Topo,
			ConnDrain:      time.Duration(r.ConnDrain) * time.Second,
			NATTimeout:     EffectiveNATTimeout(&r),
			PersistTimeout: EffectivePersistTimeout(&r),
		}
		if r.Sticky {
			sr.PMaskBits = r.PMaskBits
		}
		if r.Topo == TopoNAT {
			sr.ProxySrc, _ = ProxySrcList(r.ProxySrcStart, r.ProxySrcEnd)
		}
		if g := groups[r.ServerGroup]; g != nil {
			sr.Servers = make([]SnapServer, len(g.Servers))
			for j, sv := range g.Servers {
				sr.Servers[j] = SnapServer{ID: sv.ID, Addr: sv.Addr, MinPort: sv.MinPort, MaxPort: sv.MaxPort, Enabled: sv.Enabled}
			}
		}
		out = append(out, sr)
	}
	return out
}

// EffectiveNATTimeout is the NAT idle timeout in force: the configured value, or the
// kernel default for NAT and HALF-NAT rules (DSR keeps no connections).
func EffectiveNATTimeout(r *Rule) time.Duration {
	switch {
	case r.NATTimeout != 0:
		return time.Duration(r.NATTimeout) * time.Second
	case r.Topo == TopoDSR:
		return 0
	case r.Proto == ProtoUDP:
		return DefaultNATTimeoutUDP
	default:
		return DefaultNATTimeoutTCP
	}
}

// EffectivePersistTimeout is the persistence timeout in force for sticky rules.
func EffectivePersistTimeout(r *Rule) time.Duration {
	switch {
	case r.PersistTimeout != 0:
		return time.Duration(r.PersistTimeout) * time.Second
	case r.Sticky:
		return DefaultPersistTimeout
	default:
		return 0
	}
}
