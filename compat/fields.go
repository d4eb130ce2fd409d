package compat

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// show-rule templates (A/ilbadm_rules.c rfields_v4/rfields_v6).
var (
	RuleFieldsV4 = ruleFields(33, 16)
	RuleFieldsV6 = ruleFields(39, 39)
)

// ruleFields builds the show-rule template with the family-dependent widths.
func ruleFields(proxyW, vipW int) []Field {
	return []Field{
		{"RULENAME", 20}, {"STATUS", 7}, {"PORT", 10}, {"PROTOCOL", 5}, {"LBALG", 12},
		{"TYPE", 8}, {"PROXY-SRC", proxyW}, {"PMASK", 6}, {"HC-NAME", 20}, {"HC-PORT", 8},
		{"CONN-DRAIN", 11}, {"NAT-TIMEOUT", 12}, {"PERSIST-TIMEOUT", 16}, {"SERVERGROUP", 15},
		{"VIP", vipW}, {"SERVERS", 20},
	}
}

// Field lists of show-rule.
const (
	RuleDefaultFields = "RULENAME,STATUS,LBALG,TYPE,PROTOCOL,VIP,PORT"
	RuleFullFields    = "RULENAME,STATUS,PORT,PROTOCOL,LBALG,TYPE,PROXY-SRC,PMASK,HC-NAME,HC-PORT,CONN-DRAIN,NAT-TIMEOUT,PERSIST-TIMEOUT,SERVERGROUP,VIP,SERVERS"
)

// RuleFields returns the show-rule template for a table whose first rule has this
// VIP: ilbadm picks the widths once, from the first rule printed.
func RuleFields(vip netip.Addr) []Field {
	if vip.Is4() {
		return RuleFieldsV4
	}
	return RuleFieldsV6
}

// show-servergroup templates (A/ilbadm_sg.c sgfields_v4/v6).
var (
	SGFieldsV4 = []Field{{"SGNAME", 15}, {"SERVERID", 20}, {"MINPORT", 8}, {"MAXPORT", 8}, {"IP_ADDRESS", 15}}
	SGFieldsV6 = []Field{{"SGNAME", 15}, {"SERVERID", 20}, {"MINPORT", 8}, {"MAXPORT", 8}, {"IP_ADDRESS", 39}}
)

// SGDefaultFields is show-servergroup's field list.
const SGDefaultFields = "SGNAME,SERVERID,MINPORT,MAXPORT,IP_ADDRESS"

// SGFields returns the template ilbadm opens for the first server printed (nil for
// an empty group). Solaris swaps the families: an IPv4 server gets the IPv6 widths
// and anything else the IPv4 ones (spec §7 item 8); only IP_ADDRESS differs.
func SGFields(first *rules.Server) []Field {
	if first != nil && first.Addr.Is4() {
		return SGFieldsV6
	}
	return SGFieldsV4
}

// show-server templates (A/ilbadm_rules.c ssfields_v4/v6).
var (
	ServerFieldsV4 = serverFields(16)
	ServerFieldsV6 = serverFields(39)
)

// serverFields builds the show-server template.
func serverFields(addrW int) []Field {
	return []Field{
		{"SERVERID", 20}, {"ADDRESS", addrW}, {"PORT", 5}, {"RULENAME", 20}, {"STATUS", 7},
		{"SERVERGROUP", 15}, {"HOSTNAME", 20},
	}
}

// ServerDefaultFields is show-server's default field list.
const ServerDefaultFields = "SERVERID,ADDRESS,PORT,RULENAME,STATUS,SERVERGROUP"

// ServerFields returns the show-server template for a table whose first rule has this VIP.
func ServerFields(vip netip.Addr) []Field {
	if vip.Is4() {
		return ServerFieldsV4
	}
	return ServerFieldsV6
}

// Health-check templates (A/ilbadm_hc.c hc_fields, hc_results); both print "all".
var (
	HCFields       = []Field{{"HCNAME", 14}, {"TIMEOUT", 8}, {"COUNT", 8}, {"INTERVAL", 9}, {"DEF_PING", 9}, {"TEST", 32}}
	HCResultFields = []Field{{"RULENAME", 14}, {"HCNAME", 14}, {"SERVERID", 14}, {"STATUS", 9}, {"FAIL", 5}, {"LAST", 9}, {"NEXT", 9}, {"RTT", 6}}
)

// show-statistics templates (A/ilbadm_stats.c).
var (
	StatFields = []Field{
		{"PKT_P", 8}, {"BYTES_P", 10}, {"PKT_U", 8}, {"BYTES_U", 10}, {"PKT_D", 8}, {"BYTES_D", 10},
		{"ICMP_P", 8}, {"ICMP_D", 8}, {"ICMP2BIG_P", 11}, {"ICMP2BIG_D", 11}, {"NOMEMP_D", 8},
		{"NOPORTP_D", 8}, {"NOMEMB_D", 8}, {"NOPORTB_D", 8}, {"TIME", 15},
	}
	StatItemizedFields = []Field{{"RULENAME", 20}, {"SERVERNAME", 20}, {"PKT_P", 8}, {"BYTES_P", 10}, {"TIME", 15}}
)

// AlgoName is the canonical lbalg name ("roundrobin", ...) from the algorithm registry, "" if
// unknown.
func AlgoName(a rules.Algo) string { return a.String() }

// TopoName is the canonical type name ("DSR", "NAT", "HALF-NAT"), "" if unknown.
func TopoName(t rules.Topo) string {
	for _, n := range topoNames {
		if n.topo == t {
			return n.name
		}
	}
	return ""
}

// ProtoName is the display name of a rule protocol ("TCP", "UDP"), "" otherwise.
func ProtoName(p uint8) string {
	switch p {
	case rules.ProtoTCP:
		return "TCP"
	case rules.ProtoUDP:
		return "UDP"
	}
	return ""
}

// seconds prints a timer as %u.
func seconds(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// durSeconds prints a default timer in seconds.
func durSeconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// RuleValue renders one show-rule field of r; serverIDs are the IDs of the rule's
// group in order. Timers show what ilbd reports: a NAT-TIMEOUT of 0 becomes the kernel
// default (120 TCP / 60 otherwise) for NAT and HALF-NAT rules, a PERSIST-TIMEOUT of 0
// becomes 60 for sticky rules. ok=false ("?") for a rule without port and for an
// unknown protocol, algorithm or type.
func RuleValue(r *rules.Rule, serverIDs []string, field string) (string, bool) {
	if r == nil {
		return "", false
	}
	switch strings.ToUpper(field) {
	case "RULENAME":
		return r.Name, true
	case "STATUS":
		if r.Enabled {
			return "E", true
		}
		return "D", true
	case "PORT":
		s := FormatPortRange(r.MinPort, r.MaxPort)
		return s, s != ""
	case "PROTOCOL":
		s := ProtoName(r.Proto)
		return s, s != ""
	case "LBALG":
		s := AlgoName(r.Algo)
		return s, s != ""
	case "TYPE":
		s := TopoName(r.Topo)
		return s, s != ""
	case "PROXY-SRC":
		s := FormatAddr(r.ProxySrcStart)
		if s != "" && r.ProxySrcEnd.IsValid() {
			s += "-" + FormatAddr(r.ProxySrcEnd)
		}
		return s, true
	case "PMASK":
		if !r.Sticky {
			return "", true
		}
		return "/" + strconv.Itoa(r.PMaskBits), true
	case "HC-NAME":
		return r.HCName, true
	case "HC-PORT":
		switch {
		case r.HCName == "":
			return "", true
		case r.HCPort != 0:
			return strconv.Itoa(int(r.HCPort)), true
		}
		return "ANY", true
	case "CONN-DRAIN":
		return seconds(r.ConnDrain), true
	case "NAT-TIMEOUT":
		if r.NATTimeout == 0 && (r.Topo == rules.TopoNAT || r.Topo == rules.TopoHalfNAT) {
			if r.Proto == rules.ProtoTCP {
				return durSeconds(rules.DefaultNATTimeoutTCP), true
			}
			return durSeconds(rules.DefaultNATTimeoutUDP), true
		}
		return seconds(r.NATTimeout), true
	case "PERSIST-TIMEOUT":
		if r.PersistTimeout == 0 && r.Sticky {
			return durSeconds(rules.DefaultPersistTimeout), true
		}
		return seconds(r.PersistTimeout), true
	case "SERVERGROUP":
		return r.ServerGroup, true
	case "VIP":
		return FormatAddr(r.VIP), true
	case "SERVERS":
		return strings.Join(serverIDs, ","), true
	}
	return "", false
}

// SGValue renders one show-servergroup field; s is nil for an empty group, which
// prints one row with only SGNAME filled.
func SGValue(groupName string, s *rules.Server, field string) (string, bool) {
	f := strings.ToUpper(field)
	if f == "SGNAME" {
		return groupName, true
	}
	if s == nil {
		switch f {
		case "SERVERID", "MINPORT", "MAXPORT", "IP_ADDRESS":
			return "", true
		}
		return "", false
	}
	switch f {
	case "SERVERID":
		return s.ID, true
	case "MINPORT":
		if s.MinPort == 0 {
			return "", true
		}
		return strconv.Itoa(int(s.MinPort)), true
	case "MAXPORT":
		p := s.MaxPort
		if p == 0 {
			// A single port is stored with MaxPort == MinPort; be lenient with 0.
			p = s.MinPort
		}
		if p == 0 {
			return "", true
		}
		return strconv.Itoa(int(p)), true
	case "IP_ADDRESS":
		return FormatAddr(s.Addr), true
	}
	return "", false
}

// ServerValue renders one show-server field for server s of group groupName used by
// rule ruleName. PORT is "?" when the server has no port of its own; HOSTNAME is the
// reverse lookup of the address, empty if it has no name.
func ServerValue(ruleName, groupName string, s *rules.Server, field string) (string, bool) {
	if s == nil {
		return "", false
	}
	switch strings.ToUpper(field) {
	case "SERVERID":
		return s.ID, true
	case "ADDRESS":
		return FormatAddr(s.Addr), true
	case "PORT":
		p := FormatPortRange(s.MinPort, s.MaxPort)
		return p, p != ""
	case "RULENAME":
		return ruleName, true
	case "STATUS":
		if s.Enabled {
			return "E", true
		}
		return "D", true
	case "SERVERGROUP":
		return groupName, true
	case "HOSTNAME":
		return HostName(s.Addr), true
	}
	return "", false
}

// HostName returns the name of an address by reverse lookup, or "" if it has none.
func HostName(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	names, err := lookupAddr(a)
	if err != nil || len(names) == 0 {
		return ""
	}
	return strings.TrimSuffix(names[0], ".")
}

// HCValue renders one show-healthcheck field.
func HCValue(hc *rules.HealthCheck, field string) (string, bool) {
	if hc == nil {
		return "", false
	}
	switch strings.ToUpper(field) {
	case "HCNAME":
		return hc.Name, true
	case "TIMEOUT":
		return strconv.Itoa(hc.Timeout), true
	case "COUNT":
		return strconv.Itoa(hc.Count), true
	case "INTERVAL":
		return strconv.Itoa(hc.Interval), true
	case "DEF_PING":
		if hc.DefPing {
			return "Y", true
		}
		return "N", true
	case "TEST":
		return hc.Test, true
	}
	return "", false
}
