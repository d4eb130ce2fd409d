package compat

import (
	"strings"

	"github.com/ilbgo/ilb/rules"
)

// ParseServers parses one -s option argument of create-servergroup or add-server:
// "server=hostspec[:portspec][,hostspec[:portspec]...]" (key server, alias servers,
// matched case-insensitively). A hostspec is an IPv4 address, an IPv4 range a-b, a
// bracketed IPv6 address or range [a]-[b], or a host name (resolved now, first
// address). A portspec is a port, a numeric range p-q or a service name. Ranges are
// expanded to one server per address (at most 256). A single port has MaxPort ==
// MinPort; no port leaves both 0. Errors are the exact ilbadm messages (spec §1.3).
func ParseServers(optarg string) ([]rules.ServerSpec, *CLIError) {
	var out []rules.ServerSpec
	err := parseOpts(optarg, serverKeys, true, func(kv KV) *valError {
		specs, ve := parseServer(kv.Value)
		if ve != nil {
			return ve
		}
		out = append(out, specs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseServer parses one server value into one or more server specs.
func parseServer(val string) ([]rules.ServerSpec, *valError) {
	h, ve := matchHostOrIP(val, optIPRange|optPorts|optServer)
	if ve != nil {
		return nil, ve
	}
	if !h.isRange {
		return []rules.ServerSpec{{Addr: h.ip1, MinPort: h.minPort, MaxPort: h.maxPort}}, nil
	}
	// Solaris forgets an IPv6 range that is followed by a single port and adds only
	// the first address; we expand every range.
	addrs, ve := expandRange(h.ip1, h.ip2)
	if ve != nil {
		return nil, ve
	}
	out := make([]rules.ServerSpec, len(addrs))
	for i, a := range addrs {
		out[i] = rules.ServerSpec{Addr: a, MinPort: h.minPort, MaxPort: h.maxPort}
	}
	return out, nil
}

// ParseServerIDs parses remove-server's -s argument "server=_sg.1[,_sg.2...]". The key
// has no "servers" alias here, and every value must be a server ID (start with '_'),
// otherwise "server: server ID is invalid".
func ParseServerIDs(optarg string) ([]string, *CLIError) {
	var out []string
	err := parseOpts(optarg, serverIDKeys, true, func(kv KV) *valError {
		if !IsServerID(kv.Value) {
			return admErr(AdmInvalSrvID)
		}
		out = append(out, kv.Value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IsServerID reports whether s has the form of a server ID: it starts with '_'
// (ILB_SRVID_PREFIX), which is all Solaris checks.
func IsServerID(s string) bool { return strings.HasPrefix(s, "_") }

// ServerIDGroup returns the group name of a server ID "_<group>.<n>": the text between
// the leading '_' and the last '.'. ok is false if s is not of that form.
func ServerIDGroup(id string) (group string, ok bool) {
	if !IsServerID(id) {
		return "", false
	}
	i := strings.LastIndexByte(id, '.')
	if i < 1 {
		return "", false
	}
	return id[1:i], true
}

// ParseServerRefs parses remove-server's -s argument as ilbadm accepts it:
// "server=<ref>[,<ref>...]", each a server ID (all Solaris accepts) or, as the manual
// documents (spec policy 2), an address ("[...]" optional for IPv6) or a host name for
// the caller to look up in the group. The key has no "servers" alias. Anything that
// cannot be one of these is "<item>: server ID is invalid", as on Solaris.
func ParseServerRefs(optarg string) ([]string, *CLIError) {
	var out []string
	err := parseOpts(optarg, serverIDKeys, true, func(kv KV) *valError {
		if !IsServerID(kv.Value) && !isAddrOrHostName(kv.Value) {
			return admErr(AdmInvalSrvID)
		}
		out = append(out, kv.Value)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isAddrOrHostName reports whether s is a numeric address, optionally bracketed, or
// has the syntax of a host name (letters, digits, '-' and '.').
func isAddrOrHostName(s string) bool {
	if _, ok := parseNumericAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); ok {
		return true
	}
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
