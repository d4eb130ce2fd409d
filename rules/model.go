package rules

import (
	"net/netip"
)

// Limits from Solaris (spec Appendix A).
const (
	MaxRuleName     = 19   // ILB_NAMESZ - 1
	MaxGroupName    = 14   // ILB_SGNAME_SZ - 1
	MaxHCName       = 19   // ILB_NAMESZ - 1
	MaxHCTest       = 1023 // MAXPATHLEN - 1: an external test's path
	MaxServers      = 1000 // MAX_SRVCOUNT per group
	MaxProxySrc     = 10   // ILB_MAX_NAT_SRC
	MaxAddressRange = 256  // addresses in one server range (MAX_IP_SPREAD + 1)
)

// Rule is one load-balancing rule as configured by the administrator.
// Timers hold what was configured: 0 means "the system default" (see Effective*).
type Rule struct {
	Name    string     `json:"name"`
	Enabled bool       `json:"enabled"`
	VIP     netip.Addr `json:"vip"`
	Proto   uint8      `json:"protocol"`
	// MinPort..MaxPort; both 0 when the rule has no port (every port).
	MinPort uint16 `json:"min_port"`
	MaxPort uint16 `json:"max_port"`
	Algo    Algo   `json:"algo"`
	Topo    Topo   `json:"topo"`
	// ProxySrcStart..ProxySrcEnd is the full-NAT source range; invalid (zero) when unused.
	ProxySrcStart netip.Addr `json:"proxy_src_start,omitzero"`
	ProxySrcEnd   netip.Addr `json:"proxy_src_end,omitzero"`
	// Sticky rules keep a client (address masked by PMaskBits) on one server.
	Sticky    bool `json:"sticky"`
	PMaskBits int  `json:"pmask_bits,omitempty"`
	// HCName is the health check, empty for none. HCPort 0 means ANY.
	HCName         string `json:"hc_name,omitempty"`
	HCPort         uint16 `json:"hc_port,omitempty"`
	ConnDrain      uint32 `json:"conn_drain,omitempty"`
	NATTimeout     uint32 `json:"nat_timeout,omitempty"`
	PersistTimeout uint32 `json:"persist_timeout,omitempty"`
	ServerGroup    string `json:"servergroup"`
}

// ServerGroup is a named, ordered (ascending address) set of servers.
type ServerGroup struct {
	Name    string   `json:"name"`
	Servers []Server `json:"servers"`
	// LastID is the most recently allocated server number; allocation continues after it
	// (Solaris' monotonic IDs), wrapping modulo MaxServers. -1 before the first allocation.
	LastID int `json:"last_id"`
}

// Server is one back-end server of a group.
type Server struct {
	ID      string     `json:"id"` // "_<group>.<n>"
	Addr    netip.Addr `json:"addr"`
	MinPort uint16     `json:"min_port,omitempty"` // 0 when no port was given
	MaxPort uint16     `json:"max_port,omitempty"`
	Enabled bool       `json:"enabled"`
}

// ServerSpec is a server as given to create-servergroup or add-server (before an ID exists).
type ServerSpec struct {
	Addr    netip.Addr `json:"addr"`
	MinPort uint16     `json:"min_port,omitempty"`
	MaxPort uint16     `json:"max_port,omitempty"`
}

// HealthCheck is a named health-check definition.
type HealthCheck struct {
	Name     string `json:"name"`
	Test     string `json:"test"` // PING, TCP, UDP (as typed) or an absolute path
	Timeout  int    `json:"timeout"`
	Count    int    `json:"count"`
	Interval int    `json:"interval"`
	DefPing  bool   `json:"def_ping"`
}

// Config is the whole configuration, each list in creation order.
type Config struct {
	Groups       []ServerGroup `json:"servergroups"`
	HealthChecks []HealthCheck `json:"healthchecks"`
	Rules        []Rule        `json:"rules"`
}
