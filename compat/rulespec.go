package compat

import (
	"math"
	"net/netip"
	"strings"

	"github.com/ilbgo/ilb/rules"
)

// Limits of the model, restated here for the message texts.
const (
	maxRuleName          = rules.MaxRuleName
	maxGroupName         = rules.MaxGroupName
	maxHCName            = rules.MaxHCName
	rulesMaxAddressRange = rules.MaxAddressRange
)

// ParseAlgo matches an lbalg value (full name or alias, case-insensitive) in the algorithm
// registry (rules/algorithms.go).
func ParseAlgo(s string) (rules.Algo, bool) { return rules.ParseAlgo(s) }

// ParseTopo matches a type value (full name or alias, case-insensitive).
func ParseTopo(s string) (rules.Topo, bool) {
	for _, t := range topoNames {
		if strings.EqualFold(s, t.name) || strings.EqualFold(s, t.alias) {
			return t.topo, true
		}
	}
	return 0, false
}

// topoNames are A/ilbadm_subr.c topo_types; the algorithms' names are in their registry.
var topoNames = []struct {
	topo        rules.Topo
	name, alias string
}{
	{rules.TopoDSR, "DSR", "d"},
	{rules.TopoNAT, "NAT", "n"},
	{rules.TopoHalfNAT, "HALF-NAT", "h"},
}

// ruleData is the rule being built from the command line, like ilb_rule_data_t.
type ruleData struct {
	r         rules.Rule
	haveVIP   bool
	sticky    bool // a pmask was given
	pmaskBits int
	haveProxy bool
}

// parsePMask is ilbadm_set_netmask: "N" or "/N", 1..32 (IPv4) or 1..128 (IPv6).
func parsePMask(val string, v4 bool) (int, *valError) {
	s := strings.TrimPrefix(val, "/")
	n, used := cStrtol(s)
	if used == 0 || used != len(s) {
		return 0, libErr("invalid pmask provided")
	}
	maxBits := int64(128)
	if v4 {
		maxBits = 32
	}
	if n < 1 || n > maxBits {
		return 0, libErr("invalid pmask provided (AF mismatch?)")
	}
	return int(n), nil
}

// parseTimer is the -t keys' strtoll parsing: trailing garbage is ignored and a
// non-numeric value reads as 0; the value must lie in lo..UINT_MAX.
func parseTimer(val string, lo int64) (uint32, *valError) {
	v, _ := cStrtol(val)
	if v < lo || v > math.MaxUint32 {
		return 0, admErr(AdmEINVAL)
	}
	return uint32(v), nil
}

// store applies one key of option opt (-i, -m, -o, -h or -t), as i_store_val does.
func (rd *ruleData) store(opt byte, kv KV) *valError {
	r := &rd.r
	switch opt {
	case 'i':
		switch kv.Key {
		case keyVIP:
			a, ve := parseVIP(kv.Value)
			if ve != nil {
				return ve
			}
			r.VIP, rd.haveVIP = a, true
		case keyPort:
			lo, hi, ve := parseRulePort(kv.Value)
			if ve != nil {
				return ve
			}
			r.MinPort, r.MaxPort = lo, hi
		case keyProtocol:
			p, ok := LookupProtocol(kv.Value)
			if !ok {
				return admErr(AdmENOProto)
			}
			r.Proto = p
		}
	case 'm':
		switch kv.Key {
		case keyAlgo:
			a, ok := ParseAlgo(kv.Value)
			if !ok {
				return admErr(AdmInvalAlg)
			}
			r.Algo = a
		case keyType:
			t, ok := ParseTopo(kv.Value)
			if !ok {
				// The C code stores the bad value first; the rule is abandoned anyway.
				return admErr(AdmInvalOper)
			}
			r.Topo = t
		case keyProxySrc:
			// proxy-src is only valid once type=NAT has been seen (left of it).
			if r.Topo != rules.TopoNAT {
				return admErr(AdmInvalProxy)
			}
			h, ve := matchHostOrIP(kv.Value, optNumericOnly|optIPRange|optNAT)
			if ve != nil {
				return ve
			}
			r.ProxySrcStart, r.ProxySrcEnd = h.ip1, h.ip1
			if h.isRange {
				r.ProxySrcEnd = h.ip2
			}
			rd.haveProxy = true
		case keyPMask:
			rd.sticky = true
			// The mask's family comes from the VIP, so vip must be parsed before it.
			if !rd.haveVIP {
				return libErr("option 'pmask' requires that VIP be specified first")
			}
			n, ve := parsePMask(kv.Value, r.VIP.Is4())
			if ve != nil {
				return ve
			}
			rd.pmaskBits = n
		}
	case 'o':
		r.ServerGroup = kv.Value
	case 'h':
		switch kv.Key {
		case keyHCName:
			r.HCName = kv.Value
		case keyHCPort:
			switch {
			case isDigit(kv.Value[0]):
				p := atoi(kv.Value)
				if p < 1 || p > 65535 {
					return libErr("illegal number for hcport %s", kv.Value)
				}
				r.HCPort = uint16(p)
			case strings.EqualFold(kv.Value, "ANY"):
				r.HCPort = 0
			default:
				return admErr(AdmEINVAL)
			}
		}
	case 't':
		var err *valError
		switch kv.Key {
		case keyConnDrain:
			r.ConnDrain, err = parseTimer(kv.Value, 1)
		case keyNATTimeout:
			r.NATTimeout, err = parseTimer(kv.Value, 0)
		case keyPersistTO:
			r.PersistTimeout, err = parseTimer(kv.Value, 1)
		}
		return err
	}
	return nil
}

// CreateRule parses the arguments that follow the create-rule subcommand (see
// CreateRuleArgv) and returns the rule as ilbadm would send it to ilbd.
func CreateRule(args []string) (rules.Rule, *CLIError) {
	return CreateRuleArgv(append([]string{"create-rule"}, args...))
}

// CreateRuleArgv parses create-rule's argv (argv[0] is the subcommand as typed, which
// Solaris may name in "bad or misplaced option"). It follows ilbadm_create_rule and
// i_check_rule_spec: getopt ":ei:m:o:t:h:p" without permutation, options parsed and
// applied in command-line order (so proxy-src needs type=NAT and pmask needs vip to
// their left; repeated options and keys overwrite), then the checks in Solaris order:
// rule name present, pmask/-p, name length, vip, servergroup, type, proxy-src family.
// Deviations (spec policies 2 and 3): a missing lbalg means roundrobin; -p without
// pmask makes the rule sticky with /32 or /128; proxy-src is dropped unless the final
// type is NAT.
func CreateRuleArgv(argv []string) (rules.Rule, *CLIError) {
	rd := &ruleData{r: rules.Rule{Proto: rules.ProtoTCP}}
	pOpt := false
	g := NewGetopt(argv, ":ei:m:o:t:h:p")
	for {
		c, ok := g.Next()
		if !ok {
			break
		}
		var keys []Key
		switch c {
		case 'e':
			rd.r.Enabled = true
			continue
		case 'p':
			pOpt = true
			continue
		case 'i':
			keys = incomingKeys
		case 'm':
			keys = methodKeys
		case 'o':
			keys = outgoingKeys
		case 't':
			keys = timerKeys
		case 'h':
			// Giving -h at all means "probe any port" unless hc-port=N is given;
			// HCPort 0 already means ANY. (Solaris keeps an earlier hc-port=N
			// across a later -h, and so do we.)
			keys = hcRuleKeys
		case ':':
			return rules.Rule{}, ErrMissingOptArg(g.Optopt)
		default:
			return rules.Rule{}, g.BadOption()
		}
		if err := parseOpts(g.Optarg, keys, false, func(kv KV) *valError { return rd.store(c, kv) }); err != nil {
			return rules.Rule{}, err
		}
	}

	ops := g.Operands()
	if len(ops) == 0 {
		return rules.Rule{}, ErrCreateRuleUsage()
	}
	r := &rd.r
	if pOpt {
		if !rd.sticky {
			// The default mask needs the VIP's family.
			if !rd.haveVIP {
				return rules.Rule{}, Errorf("trouble seting default persistence mask")
			}
			rd.pmaskBits = 128
			if r.VIP.Is4() {
				rd.pmaskBits = 32
			}
		}
		r.Sticky, r.PMaskBits = true, rd.pmaskBits
	} else if rd.sticky {
		return rules.Rule{}, Errorf("use of stickymask requires -p option")
	}
	name := ops[0]
	if len(name) > maxRuleName {
		return rules.Rule{}, ErrRuleNameTooLong(name)
	}
	r.Name = name

	// i_check_rule_spec.
	if !rd.haveVIP {
		return rules.Rule{}, AdmError(AdmInvalAF)
	}
	if r.ServerGroup == "" {
		return rules.Rule{}, AdmError(AdmENOSGName)
	}
	if r.Topo == 0 {
		return rules.Rule{}, Errorf("lbalg or type is unspecified")
	}
	if r.Algo == 0 {
		r.Algo = rules.AlgoRoundRobin
	}
	if r.Topo == rules.TopoNAT {
		if !rd.haveProxy || r.ProxySrcStart.Is4() != r.VIP.Is4() {
			return rules.Rule{}, Errorf("proxy-src is either missing or its address family does not match that of the VIP address")
		}
	} else {
		r.ProxySrcStart, r.ProxySrcEnd = netip.Addr{}, netip.Addr{}
	}
	// libilb's ilb_create_rule (client side) refuses an empty name.
	if r.Name == "" {
		return rules.Rule{}, StatusError(StatusEINVAL)
	}
	return *r, nil
}
