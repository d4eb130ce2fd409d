package rules

import (
	"cmp"
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

	snap atomic.Pointer[Snapshot]
}

// NewManager loads the stored configuration (if store is non-nil) and publishes its snapshot.
func NewManager(store *Store) (*Manager, error) {
	m := &Manager{store: store, ruleIDs: map[string]uint64{}}
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
	return nil
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
	m.snap.Store(Compile(&m.cfg, m.gen, func(name string) uint64 { return live[strings.ToLower(name)] }))
}

// Compile builds the data-plane snapshot of a configuration. ruleID names each rule instance.
func Compile(c *Config, gen uint64, ruleID func(name string) uint64) *Snapshot {
	s := &Snapshot{Generation: gen, ByVIP: map[VIPKey][]int{}}
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
		if g := c.Group(r.ServerGroup); g != nil {
			for _, sv := range g.Servers {
				sr.Servers = append(sr.Servers, SnapServer{
					ID: sv.ID, Addr: sv.Addr, MinPort: sv.MinPort, MaxPort: sv.MaxPort, Enabled: sv.Enabled,
				})
			}
		}
		key := KeyOf(r.VIP, r.Proto)
		s.ByVIP[key] = append(s.ByVIP[key], len(s.Rules))
		s.Rules = append(s.Rules, sr)
	}
	for _, idx := range s.ByVIP {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(s.Rules[a].MinPort, s.Rules[b].MinPort) })
	}
	return s
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
