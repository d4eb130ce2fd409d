package rules

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The methods below are ilbd's validation of configuration changes (spec §1.4, §5.3), with
// Solaris' failure codes. Each works on a Config that the caller may throw away on failure:
// the Manager applies them to a copy and publishes only complete, valid results.

// Clone returns a deep copy.
func (c *Config) Clone() Config {
	n := Config{
		Groups:       slices.Clone(c.Groups),
		HealthChecks: slices.Clone(c.HealthChecks),
		Rules:        slices.Clone(c.Rules),
	}
	for i := range n.Groups {
		n.Groups[i].Servers = slices.Clone(n.Groups[i].Servers)
	}
	return n
}

// Group returns the named server group (names are case-sensitive, as in ilbd) or nil.
func (c *Config) Group(name string) *ServerGroup {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return &c.Groups[i]
		}
	}
	return nil
}

// Rule returns the named rule or nil. Rule names are matched case-insensitively, as the
// manual documents (a listed deviation: Solaris' ilbd compared them case-sensitively).
func (c *Config) Rule(name string) *Rule {
	for i := range c.Rules {
		if strings.EqualFold(c.Rules[i].Name, name) {
			return &c.Rules[i]
		}
	}
	return nil
}

// HealthCheck returns the named health check (case-insensitive, as in ilbd) or nil.
func (c *Config) HealthCheck(name string) *HealthCheck {
	for i := range c.HealthChecks {
		if strings.EqualFold(c.HealthChecks[i].Name, name) {
			return &c.HealthChecks[i]
		}
	}
	return nil
}

// groupInUse reports whether any rule uses the group.
func (c *Config) groupInUse(name string) bool {
	for i := range c.Rules {
		if c.Rules[i].ServerGroup == name {
			return true
		}
	}
	return false
}

// CreateServerGroup adds an empty group.
func (c *Config) CreateServerGroup(name string) error {
	if len(name) > MaxGroupName {
		return fail(CodeNameTooLong)
	}
	if name == "" {
		return fail(CodeEINVAL)
	}
	if c.Group(name) != nil {
		return fail(CodeSGExists)
	}
	c.Groups = append(c.Groups, ServerGroup{Name: name, LastID: -1})
	return nil
}

// DeleteServerGroup removes a group that no rule uses (it may still contain servers).
func (c *Config) DeleteServerGroup(name string) error {
	g := c.Group(name)
	if g == nil {
		return fail(CodeSGUnavail)
	}
	if c.groupInUse(name) {
		return fail(CodeSGInUse)
	}
	c.Groups = slices.DeleteFunc(c.Groups, func(g ServerGroup) bool { return g.Name == name })
	return nil
}

// AddServer adds one enabled server to a group and returns its new ID.
func (c *Config) AddServer(group string, s ServerSpec) (string, error) {
	if len(group) > MaxGroupName {
		return "", fail(CodeNameTooLong)
	}
	g := c.Group(group)
	if g == nil {
		return "", fail(CodeENOENT)
	}
	if !s.Addr.IsValid() || s.MinPort > s.MaxPort || (s.MinPort == 0) != (s.MaxPort == 0) {
		return "", fail(CodeEINVAL)
	}
	s.Addr = s.Addr.Unmap()
	if len(g.Servers) > 0 && g.Servers[0].Addr.Is4() != s.Addr.Is4() {
		return "", fail(CodeMismatchH)
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.ServerGroup != group {
			continue
		}
		if r.VIP.Is4() != s.Addr.Is4() {
			return "", fail(CodeMismatchH)
		}
		if err := checkServerForRule(r, s); err != nil {
			return "", err
		}
	}
	if len(g.Servers) >= MaxServers {
		return "", fail(CodeSGFull)
	}
	for _, old := range g.Servers {
		if old.Addr == s.Addr {
			return "", fail(CodeEEXIST)
		}
	}
	id := g.allocID()
	srv := Server{ID: id, Addr: s.Addr, MinPort: s.MinPort, MaxPort: s.MaxPort, Enabled: true}
	at, _ := slices.BinarySearchFunc(g.Servers, s.Addr, func(e Server, a netip.Addr) int { return e.Addr.Compare(a) })
	g.Servers = slices.Insert(g.Servers, at, srv)
	return id, nil
}

// allocID takes the next free server number after the last one allocated, so IDs grow
// monotonically (a removed server's ID is not reused until the numbers wrap).
func (g *ServerGroup) allocID() string {
	used := make(map[string]bool, len(g.Servers))
	for _, s := range g.Servers {
		used[s.ID] = true
	}
	for i := 1; i <= MaxServers; i++ {
		n := (g.LastID + i) % MaxServers
		id := "_" + g.Name + "." + strconv.Itoa(n)
		if !used[id] {
			g.LastID = n
			return id
		}
	}
	return "" // unreachable: callers check MaxServers first
}

// checkServerForRule applies ilbd's port-compatibility rules for a server joining a group
// that a rule already uses (D/ilbd_sg.c i_check_srv2rules).
func checkServerForRule(r *Rule, s ServerSpec) error {
	if s.MinPort == 0 {
		return nil
	}
	ruleRange := r.MaxPort > r.MinPort
	if s.MaxPort == s.MinPort {
		switch {
		case r.Topo == TopoDSR && ruleRange:
			return fail(CodeInvalSrvr)
		case r.Topo == TopoDSR && r.MinPort != s.MinPort:
			return fail(CodeBadPort)
		case r.HCPort != 0 && r.HCPort != s.MinPort:
			return fail(CodeBadPort)
		}
		return nil
	}
	switch {
	case r.Topo == TopoDSR && !ruleRange:
		return fail(CodeInvalSrvr)
	case r.Topo == TopoDSR && (r.MinPort != s.MinPort || r.MaxPort != s.MaxPort):
		return fail(CodeBadPort)
	case r.Topo != TopoDSR && ruleRange && r.MaxPort-r.MinPort != s.MaxPort-s.MinPort:
		return fail(CodeInvalSrvr)
	case r.Topo != TopoDSR && !ruleRange:
		// Passes ilbd on Solaris but the kernel refuses a range behind a single rule port.
		return fail(CodeEINVAL)
	case r.HCPort != 0 && (r.HCPort < s.MinPort || r.HCPort > s.MaxPort):
		return fail(CodeBadPort)
	}
	return nil
}

// RemoveServer removes a server (by ID) from a group.
func (c *Config) RemoveServer(group, id string) error {
	g := c.Group(group)
	if g == nil {
		return fail(CodeSGUnavail)
	}
	i := slices.IndexFunc(g.Servers, func(s Server) bool { return s.ID == id })
	if i < 0 {
		return fail(CodeSrvUnavail)
	}
	g.Servers = slices.Delete(g.Servers, i, i+1)
	return nil
}

// GroupOfServerID returns the group name encoded in a server ID ("_<group>.<n>").
func GroupOfServerID(id string) (string, bool) {
	dot := strings.LastIndexByte(id, '.')
	if !strings.HasPrefix(id, "_") || dot < 1 {
		return "", false
	}
	return id[1:dot], true
}

// SetServerEnabled enables or disables a server in its group for every rule using it.
func (c *Config) SetServerEnabled(id string, enabled bool) error {
	name, ok := GroupOfServerID(id)
	if !ok {
		return fail(CodeENOENT)
	}
	g := c.Group(name)
	if g == nil {
		return fail(CodeENOENT)
	}
	i := slices.IndexFunc(g.Servers, func(s Server) bool { return s.ID == id })
	if i < 0 {
		return fail(CodeENOENT)
	}
	if !c.groupInUse(name) {
		return fail(CodeInvalEnbSrvr)
	}
	g.Servers[i].Enabled = enabled
	return nil
}

// CreateRule validates a rule against the whole configuration and appends it.
func (c *Config) CreateRule(r Rule) error {
	if r.Name == "" || len(r.Name) > MaxRuleName {
		return fail(CodeEINVAL)
	}
	for i := range c.Rules {
		if c.Rules[i].Name == r.Name {
			return fail(CodeDupRule)
		}
	}
	g := c.Group(r.ServerGroup)
	if g == nil {
		return fail(CodeSGUnavail)
	}
	if len(g.Servers) == 0 {
		return fail(CodeSGEmpty)
	}
	r.VIP = r.VIP.Unmap()
	if g.Servers[0].Addr.Is4() != r.VIP.Is4() {
		return fail(CodeMismatchSG)
	}
	if r.HCName != "" {
		hc := c.HealthCheck(r.HCName)
		if hc == nil {
			return fail(CodeENOHCInfo)
		}
		test := strings.ToUpper(hc.Test)
		if (test == "TCP" && r.Proto != ProtoTCP) || (test == "UDP" && r.Proto != ProtoUDP) {
			return fail(CodeRuleHCMismatch)
		}
	}
	for _, s := range g.Servers {
		if err := checkRulePort(&r, &s); err != nil {
			return err
		}
	}
	if err := validateRule(&r); err != nil {
		return err
	}
	for i := range c.Rules {
		if overlaps(&c.Rules[i], &r) {
			return fail(CodeEEXIST)
		}
	}
	c.Rules = append(c.Rules, r)
	return nil
}

// checkRulePort is ilbd's check of a new rule's ports against one server of its group
// (D/ilbd_sg.c ilbd_sg_check_rule_port).
func checkRulePort(r *Rule, s *Server) error {
	if r.HCPort != 0 {
		lo, hi := s.MinPort, s.MaxPort
		if lo == 0 {
			lo, hi = r.MinPort, r.MaxPort
		}
		if lo != 0 && (r.HCPort < lo || r.HCPort > hi) {
			return fail(CodeBadSG)
		}
	}
	if s.MinPort == 0 {
		return nil
	}
	if r.Topo == TopoDSR {
		if s.MinPort != r.MinPort || s.MaxPort != r.MaxPort {
			return fail(CodeBadSG)
		}
		return nil
	}
	if s.MaxPort != s.MinPort && s.MaxPort-s.MinPort != r.MaxPort-r.MinPort {
		return fail(CodeBadSG)
	}
	return nil
}

// validateRule is the kernel's validation of a rule (K/ilb.c ilb_rule_add): failures are EINVAL.
func validateRule(r *Rule) error {
	v := r.VIP
	switch {
	case !v.IsValid(), v.IsUnspecified(), v.IsLoopback(), v.IsMulticast():
		return fail(CodeEINVAL)
	case v.Is4() && v == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fail(CodeEINVAL)
	case v.Is4In6():
		return fail(CodeEINVAL)
	}
	if r.Proto != ProtoTCP && r.Proto != ProtoUDP {
		return fail(CodeEINVAL)
	}
	if r.MinPort > r.MaxPort || (r.MinPort == 0) != (r.MaxPort == 0) {
		return fail(CodeEINVAL)
	}
	if r.Topo < TopoDSR || r.Topo > TopoHalfNAT {
		return fail(CodeEINVAL)
	}
	if err := ValidateAlgo(r); err != nil {
		return err
	}
	if r.Topo == TopoNAT {
		if _, err := ProxySrcList(r.ProxySrcStart, r.ProxySrcEnd); err != nil {
			return err
		}
		if r.ProxySrcStart.Is4() != v.Is4() {
			return fail(CodeEINVAL)
		}
	} else if r.ProxySrcStart.IsValid() {
		return fail(CodeEINVAL)
	}
	bits := 32
	if v.Is6() {
		bits = 128
	}
	if r.Sticky && (r.PMaskBits < 1 || r.PMaskBits > bits) {
		return fail(CodeEINVAL)
	}
	return nil
}

// ProxySrcList expands a proxy-src range (at most MaxProxySrc addresses).
func ProxySrcList(start, end netip.Addr) ([]netip.Addr, error) {
	if !start.IsValid() || !end.IsValid() || start.Is4() != end.Is4() || end.Less(start) {
		return nil, fail(CodeEINVAL)
	}
	var out []netip.Addr
	for a := start; ; a = a.Next() {
		if a.IsLoopback() || a.IsMulticast() || a.IsUnspecified() ||
			(a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
			return nil, fail(CodeEINVAL)
		}
		out = append(out, a)
		if len(out) > MaxProxySrc {
			return nil, fail(CodeEINVAL)
		}
		if a == end {
			return out, nil
		}
	}
}

// overlaps is the kernel's duplicate test: a rule name equal ignoring case, or the same
// family and protocol with intersecting ports on the same (or an unspecified) VIP.
func overlaps(a, b *Rule) bool {
	if strings.EqualFold(a.Name, b.Name) {
		return true
	}
	if a.VIP.Is4() != b.VIP.Is4() || a.Proto != b.Proto {
		return false
	}
	if a.VIP != b.VIP && !a.VIP.IsUnspecified() && !b.VIP.IsUnspecified() {
		return false
	}
	alo, ahi := portSpan(a)
	blo, bhi := portSpan(b)
	return alo <= bhi && blo <= ahi
}

func portSpan(r *Rule) (uint16, uint16) {
	if r.MinPort == 0 {
		return 1, 65535
	}
	return r.MinPort, r.MaxPort
}

// DeleteRule removes the named rule.
func (c *Config) DeleteRule(name string) error {
	i := slices.IndexFunc(c.Rules, func(r Rule) bool { return strings.EqualFold(r.Name, name) })
	if i < 0 {
		return fail(CodeENORule)
	}
	c.Rules = slices.Delete(c.Rules, i, i+1)
	return nil
}

// SetRuleEnabled enables or disables the named rule; already in that state is success.
func (c *Config) SetRuleEnabled(name string, enabled bool) error {
	r := c.Rule(name)
	if r == nil {
		return fail(CodeENORule)
	}
	r.Enabled = enabled
	return nil
}

// CreateHealthCheck adds a health check (names compared case-insensitively).
func (c *Config) CreateHealthCheck(h HealthCheck) error {
	if h.Name == "" || len(h.Name) > MaxHCName {
		return fail(CodeEINVAL)
	}
	if c.HealthCheck(h.Name) != nil {
		return fail(CodeEEXIST)
	}
	// interval > timeout*count (libilb), tested without multiplying: a client other
	// than ilbadm may send any numbers.
	if h.Timeout < 0 || h.Count < 0 || h.Interval <= 0 ||
		(h.Count > 0 && h.Timeout > (h.Interval-1)/h.Count) || len(h.Test) > MaxHCTest {
		return fail(CodeEINVAL)
	}
	switch strings.ToUpper(h.Test) {
	case "PING", "TCP", "UDP":
	default:
		if !strings.HasPrefix(h.Test, "/") {
			return fail(CodeEINVAL)
		}
	}
	c.HealthChecks = append(c.HealthChecks, h)
	return nil
}

// DeleteHealthCheck removes a health check that no rule uses.
func (c *Config) DeleteHealthCheck(name string) error {
	if c.HealthCheck(name) == nil {
		return fail(CodeENOENT)
	}
	for i := range c.Rules {
		if strings.EqualFold(c.Rules[i].HCName, name) {
			return fail(CodeInUse)
		}
	}
	c.HealthChecks = slices.DeleteFunc(c.HealthChecks, func(h HealthCheck) bool { return strings.EqualFold(h.Name, name) })
	return nil
}
