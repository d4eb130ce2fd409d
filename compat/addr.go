package compat

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resolver hooks; tests replace them so that no name service is needed.
var (
	// lookupHost resolves a host name to its addresses (getaddrinfo without AI_NUMERICHOST).
	lookupHost = func(name string) ([]netip.Addr, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	}
	// lookupAddr returns the names of an address (getipnodebyaddr).
	lookupAddr = func(a netip.Addr) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return net.DefaultResolver.LookupAddr(ctx, a.String())
	}
	// Database files read for service and protocol names.
	servicesFile  = "/etc/services"
	protocolsFile = "/etc/protocols"
)

// parseNumericAddr parses a numeric IPv4 or IPv6 address (getaddrinfo with
// AI_NUMERICHOST). Zoned addresses are refused: no ILB object can use one.
func parseNumericAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

// matchOneHost is i_match_onehost: a numeric address, or (unless numericOnly) a host
// name resolved to its first address. numeric reports which of the two matched.
func matchOneHost(s string, numericOnly bool) (a netip.Addr, numeric bool, st AdmStatus) {
	if a, ok := parseNumericAddr(s); ok {
		return a, true, AdmOK
	}
	if numericOnly || s == "" {
		return netip.Addr{}, false, AdmInvalAddr
	}
	addrs, err := lookupHost(s)
	if err != nil || len(addrs) == 0 || !addrs[0].IsValid() {
		return netip.Addr{}, false, AdmInvalAddr
	}
	return addrs[0].Unmap().WithZone(""), false, AdmOK
}

// cStrtol is strtol/strtoll(s, &end, 10): optional leading white space and sign,
// then decimal digits. n is the number of bytes consumed (0 if no digits), and the
// value saturates at the int64 limits as strtoll does on overflow.
func cStrtol(s string) (v int64, n int) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var u uint64
	over := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if u > (math.MaxUint64-d)/10 {
			over = true
		} else {
			u = u*10 + d
		}
		i++
	}
	if i == start {
		return 0, 0
	}
	switch {
	case !neg && (over || u > math.MaxInt64):
		return math.MaxInt64, i
	case neg && (over || u > 1<<63):
		return math.MinInt64, i
	case neg:
		return -int64(u), i
	}
	return int64(u), i
}

// isDigit is isdigit(3C) for the C locale.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// atoi is atoi(3C) for a string that starts with a digit, saturating instead of
// wrapping (the C behaviour on overflow is undefined).
func atoi(s string) int64 {
	v, _ := cStrtol(s)
	return v
}

// services is the services database: name and aliases to port. The first entry for
// a name wins, whatever its protocol, as getservbyname(name, NULL) does.
var services struct {
	once  sync.Once
	exact map[string]int
	fold  map[string]int
}

// loadServices reads /etc/services once.
func loadServices() {
	services.exact = map[string]int{}
	services.fold = map[string]int{}
	f, err := os.Open(servicesFile)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		num, _, ok := strings.Cut(fs[1], "/")
		if !ok {
			continue
		}
		p, err := strconv.Atoi(num)
		if err != nil || p < 0 || p > 65535 {
			continue
		}
		for _, name := range append([]string{fs[0]}, fs[2:]...) {
			if _, dup := services.exact[name]; !dup {
				services.exact[name] = p
			}
			l := strings.ToLower(name)
			if _, dup := services.fold[l]; !dup {
				services.fold[l] = p
			}
		}
	}
}

// lookupService returns the port of a service name, or -1 (getservbyname(name, NULL)).
// Matching is exact first, then case-insensitive (a harmless superset), then Go's
// built-in table for systems without /etc/services.
func lookupService(name string) int {
	if name == "" {
		return -1
	}
	services.once.Do(loadServices)
	if p, ok := services.exact[name]; ok {
		return p
	}
	if p, ok := services.fold[strings.ToLower(name)]; ok {
		return p
	}
	// net.LookupPort also parses numbers; only hand it names that start with a letter.
	c := name[0] | 0x20
	if c < 'a' || c > 'z' {
		return -1
	}
	for _, network := range []string{"tcp", "udp"} {
		if p, err := net.LookupPort(network, name); err == nil && p > 0 && p <= 65535 {
			return p
		}
	}
	return -1
}

// protocols is the protocol database: names and aliases (lower-cased) to numbers.
var protocols struct {
	once   sync.Once
	byName map[string]int
	byNum  map[int]string
}

// loadProtocols reads /etc/protocols once; tcp and udp are always known.
func loadProtocols() {
	protocols.byName = map[string]int{}
	protocols.byNum = map[int]string{}
	if f, err := os.Open(protocolsFile); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			fs := strings.Fields(line)
			if len(fs) < 2 {
				continue
			}
			p, err := strconv.Atoi(fs[1])
			if err != nil || p < 0 || p > 255 {
				continue
			}
			for _, name := range append([]string{fs[0]}, fs[2:]...) {
				l := strings.ToLower(name)
				if _, dup := protocols.byName[l]; !dup {
					protocols.byName[l] = p
				}
			}
			if _, dup := protocols.byNum[p]; !dup {
				protocols.byNum[p] = fs[0]
			}
		}
		f.Close()
	}
	for name, p := range map[string]int{"tcp": 6, "udp": 17} {
		if _, ok := protocols.byName[name]; !ok {
			protocols.byName[name] = p
		}
		if _, ok := protocols.byNum[p]; !ok {
			protocols.byNum[p] = name
		}
	}
}

// LookupProtocol returns the number of a protocol name (getprotobyname; matched
// case-insensitively, so "tcp", "TCP" and "Tcp" all work).
func LookupProtocol(name string) (uint8, bool) {
	protocols.once.Do(loadProtocols)
	p, ok := protocols.byName[strings.ToLower(name)]
	return uint8(p), ok
}

// ProtocolDBName returns the protocol database name of a number ("tcp", "udp"), as
// export-config prints it (getprotobynumber), or "" if unknown.
func ProtocolDBName(p uint8) string {
	protocols.once.Do(loadProtocols)
	return protocols.byNum[int(p)]
}

// parsePort is i_parseport: a string starting with a digit is read with strtol (trailing
// garbage ignored); anything else is a service name. It returns -1 for an unknown name.
func parsePort(s string) (port int64, isName bool) {
	if s != "" && isDigit(s[0]) {
		return atoi(s), false
	}
	return int64(lookupService(s)), true
}

// parsePortSpec parses "p" or "p-q" after a host (or a rule's numeric port=) the way
// i_match_hostorip does; hi is 0 when no range was given.
func parsePortSpec(spec string) (lo, hi uint16, ve *valError) {
	p1s, p2s, isRange := strings.Cut(spec, "-")
	p1, name := parsePort(p1s)
	if p1 == -1 || p1 == 0 || p1 > 65535 {
		return 0, 0, libErr("invalid port value %s specified", p1s)
	}
	if !isRange {
		return uint16(p1), 0, nil
	}
	if name {
		return 0, 0, libErr("ranges are only allowed for numeric ports")
	}
	p2, name2 := parsePort(p2s)
	if p2 == -1 || p2 <= p1 || p2 > 65535 || name2 {
		return 0, 0, libErr("invalid port value %s specified", p2s)
	}
	return uint16(p1), uint16(p2), nil
}

// ParsePortRange parses a rule's port= value: "N", "N-M" (numeric) or a service name.
// hi equals lo for a single port. Errors are the exact ilbadm messages for key "port".
func ParsePortRange(val string) (lo, hi uint16, err *CLIError) {
	lo, hi, ve := parseRulePort(val)
	if ve != nil {
		return 0, 0, ve.cli("port")
	}
	return lo, hi, nil
}

// parseRulePort is i_store_val's ILB_KEY_PORT case.
func parseRulePort(val string) (lo, hi uint16, ve *valError) {
	if val != "" && isDigit(val[0]) {
		lo, hi, ve = parsePortSpec(val)
		if ve != nil {
			return 0, 0, ve
		}
	} else {
		p := lookupService(val)
		if p <= 0 {
			return 0, 0, admErr(AdmENOService)
		}
		lo = uint16(p)
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi, nil
}

// parseVIP is i_store_val's ILB_KEY_VIP case: numeric only; IPv6 bare or in
// brackets; brackets around IPv4 are refused.
func parseVIP(val string) (netip.Addr, *valError) {
	s := val
	bracket := false
	if strings.HasPrefix(s, "[") {
		// Anything after the closing bracket is ignored, as in the C code.
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, admErr(AdmInvalSyntax)
		}
		s = s[1:end]
		bracket = true
	}
	a, _, st := matchOneHost(s, true)
	if st != AdmOK {
		return netip.Addr{}, admErr(st)
	}
	if bracket && !a.Is6() {
		return netip.Addr{}, libErr("use of '[]' only valid with IPv6 addresses")
	}
	return a, nil
}

// ParseVIP parses a vip= value; errors are the exact ilbadm messages for key "vip".
func ParseVIP(val string) (netip.Addr, *CLIError) {
	a, ve := parseVIP(val)
	if ve != nil {
		return netip.Addr{}, ve.cli("vip")
	}
	return a, nil
}

// hostSpec is the result of i_match_hostorip: an address or an address range, and
// for servers a port range.
type hostSpec struct {
	ip1, ip2         netip.Addr // ip2 is valid only for a range
	isRange          bool
	minPort, maxPort uint16
}

// Flags of matchHostOrIP (A/ilbadm.h OPT_*).
const (
	optIPRange = 1 << iota
	optPorts
	optNAT
	optNumericOnly
	optServer // the ILB_KEY_SERVER keyword: unbracketed IPv6 is a syntax error
)

// matchHostOrIP parses ip[-ip][:port[-port]] like i_match_hostorip; IPv6 addresses
// must be bracketed when ports are possible.
func matchHostOrIP(val string, flags int) (hostSpec, *valError) {
	var h hostSpec
	rangeOK := flags&optIPRange != 0
	portsOK := flags&optPorts != 0
	numericOnly := flags&optNumericOnly != 0

	if flags&optServer != 0 && strings.Contains(val, ":") && !strings.HasPrefix(val, "[") {
		if a, err := netip.ParseAddr(val); err == nil && a.Is6() && a.Zone() == "" {
			// V6 addresses must be enclosed within brackets for servers.
			return h, admErr(AdmInvalSyntax)
		}
	}

	rest := val // what follows the address part, searched for the port separator
	v6 := false
	if strings.HasPrefix(val, "[") {
		v6 = true
		var ve *valError
		if h.ip1, rest, ve = bracketed(val); ve != nil {
			return h, ve
		}
		if strings.HasPrefix(rest, "-") {
			if !rangeOK {
				return h, libErr("port ranges not allowed")
			}
			if !strings.HasPrefix(rest[1:], "[") {
				return h, admErr(AdmInvalSyntax)
			}
			if h.ip2, rest, ve = bracketed(rest[1:]); ve != nil {
				return h, ve
			}
			h.isRange = true
		}
	}

	host := val
	if colon := strings.IndexByte(rest, ':'); colon >= 0 && portsOK {
		if !v6 {
			host = val[:colon]
		}
		var ve *valError
		if h.minPort, h.maxPort, ve = parsePortSpec(rest[colon+1:]); ve != nil {
			return h, ve
		}
		if h.maxPort < h.minPort {
			h.maxPort = h.minPort
		}
	}
	if !v6 {
		// 1. a numeric address; 2. a numeric range a-b; 3. a host name (which may
		// contain '-'), unless only numeric addresses are allowed.
		a, _, st := matchOneHost(host, true)
		switch {
		case st == AdmOK:
			h.ip1 = a
		default:
			done := false
			if l, r, ok := strings.Cut(host, "-"); ok && rangeOK {
				a2, _, st2 := matchOneHost(r, true)
				a1, _, st1 := matchOneHost(l, true)
				if st2 == AdmOK && st1 == AdmOK {
					h.ip1, h.ip2, h.isRange, done = a1, a2, true, true
				}
			}
			if !done {
				a, _, st := matchOneHost(host, numericOnly)
				if st != AdmOK {
					return h, admErr(st)
				}
				h.ip1 = a
			}
		}
	}
	return h, nil
}

// bracketed parses "[v6addr]..." and returns the address and what follows ']'.
func bracketed(s string) (netip.Addr, string, *valError) {
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return netip.Addr{}, "", admErr(AdmInvalSyntax)
	}
	inner := s[1:end]
	// Host names are not allowed inside brackets (address is invalid); unlike the C
	// code we do not resolve them first only to refuse them.
	a, ok := parseNumericAddr(inner)
	if !ok {
		return netip.Addr{}, "", admErr(AdmInvalAddr)
	}
	if !a.Is6() {
		return netip.Addr{}, "", admErr(AdmInvalAF)
	}
	return a, s[end+1:], nil
}

// expandRange is i_expand_iprange: every address of ip1..ip2 (at most 256).
func expandRange(ip1, ip2 netip.Addr) ([]netip.Addr, *valError) {
	if ip1.Is4() != ip2.Is4() {
		return nil, libErr("IP address mismatch")
	}
	switch c := ip1.Compare(ip2); {
	case c == 0:
		return []netip.Addr{ip1}, nil
	case c > 0:
		return nil, libErr("starting IP address is must be less than ending ip address in ip range specification")
	}
	out := []netip.Addr{ip1}
	for a := ip1; a != ip2; {
		if len(out) > rulesMaxAddressRange-1 {
			return nil, admErr(AdmTooManyIPAddr)
		}
		a = a.Next()
		out = append(out, a)
	}
	return out, nil
}

// FormatAddr prints an address as Solaris' ip2str(V6_ADDRONLY) does: IPv6 without
// brackets, the unspecified address as "", and the BIND inet_ntop forms for
// IPv4-compatible and v4-mapped IPv6 addresses.
func FormatAddr(a netip.Addr) string {
	if !a.IsValid() || a.IsUnspecified() {
		return ""
	}
	a = a.WithZone("")
	if a.Is6() && !a.Is4In6() {
		b := a.As16()
		zero := true
		for _, x := range b[:12] {
			if x != 0 {
				zero = false
				break
			}
		}
		if zero && (b[12] != 0 || b[13] != 0) {
			return "::" + netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}).String()
		}
	}
	return a.String()
}

// FormatPortRange prints a port range as show-rule and show-server do: "N", "N-M",
// or "" when there is no port.
func FormatPortRange(lo, hi uint16) string {
	switch {
	case lo == 0:
		return ""
	case hi > lo:
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return strconv.Itoa(int(lo))
}
