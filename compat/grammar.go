package compat

import (
	"strings"
)

// Key is one keyword of a key=value option: its name and an (undocumented) alias.
// Both are matched case-insensitively and as whole words (A/ilbadm_subr.c i_match_key).
type Key struct {
	Name, Alias string
	// ManAlias is an alias only the manual documents (pmask's "stickiness"); accepted too,
	// so that scripts written from the manual run (spec policy 2).
	ManAlias string
}

// KV is one parsed item of an option string.
type KV struct {
	Key   int    // index into the key table
	Typed string // the key as typed; for value-list continuation items, the item itself
	Value string
}

// Key tables of ilbadm (A/ilbadm_rules.c, A/ilbadm_sg.c, A/ilbadm_hc.c). The index
// constants below name their entries.
var (
	incomingKeys = []Key{{Name: "vip", Alias: ""}, {Name: "port", Alias: ""}, {Name: "protocol", Alias: "prot"}}
	methodKeys   = []Key{{Name: "lbalg", Alias: "algo"}, {Name: "type", Alias: "topo"}, {Name: "proxy-src", Alias: "nat-src"}, {Name: "pmask", Alias: "persist", ManAlias: "stickiness"}}
	outgoingKeys = []Key{{Name: "servergroup", Alias: "sg"}}
	hcRuleKeys   = []Key{{Name: "hc-name", Alias: "hcn"}, {Name: "hc-port", Alias: "hcp"}}
	timerKeys    = []Key{{Name: "conn-drain", Alias: ""}, {Name: "nat-timeout", Alias: ""}, {Name: "persist-timeout", Alias: ""}}
	serverKeys   = []Key{{Name: "server", Alias: "servers"}}
	serverIDKeys = []Key{{Name: "server", Alias: ""}}
	hcKeys       = []Key{{Name: "hc-test", Alias: "hc-test"}, {Name: "hc-count", Alias: "hc-count"}, {Name: "hc-timeout", Alias: "hc-tout"}, {Name: "hc-interval", Alias: "hc-intl"}}
)

// Indexes into the key tables.
const (
	keyVIP, keyPort, keyProtocol              = 0, 1, 2
	keyAlgo, keyType, keyProxySrc, keyPMask   = 0, 1, 2, 3
	keyHCName, keyHCPort                      = 0, 1
	keyConnDrain, keyNATTimeout, keyPersistTO = 0, 1, 2
	keyHCTest, keyHCCount, keyHCTimeout       = 0, 1, 2
	keyHCInterval                             = 3
)

// matchKey returns the index of typed in keys, or -1. An empty typed key matches a
// key whose alias is empty, exactly like the C comparison against "".
func matchKey(typed string, keys []Key) int {
	for i, k := range keys {
		if strings.EqualFold(typed, k.Name) || strings.EqualFold(typed, k.Alias) ||
			(k.ManAlias != "" && strings.EqualFold(typed, k.ManAlias)) {
			return i
		}
	}
	return -1
}

// valError is a failed value: lines already printed by the value parser (pre),
// followed by "<key>: <text of st>". When pre is non-empty st is AdmLibErr,
// which is how ilbadm ends up printing "<key>: library error".
type valError struct {
	pre []string
	st  AdmStatus
}

// admErr is a value error that only carries a status.
func admErr(st AdmStatus) *valError { return &valError{st: st} }

// libErr is a value error whose message the parser printed itself.
func libErr(format string, a ...any) *valError {
	return &valError{pre: []string{Errorf(format, a...).Lines[0]}, st: AdmLibErr}
}

// cli renders the value error the way i_parse_optstring prints it.
func (v *valError) cli(typed string) *CLIError {
	l := append([]string(nil), v.pre...)
	return lines(append(l, typed+": "+v.st.String())...)
}

// parseOpts walks arg like i_parse_optstring: items are separated by ','; each item
// is key=value, except that in a value list every item after the first assignment is
// another value for the same key. store is called for every item in order, so value
// errors surface in command-line order, interleaved with grammar errors. Empty values
// are rejected before store is called ("<key>: missing value").
func parseOpts(arg string, keys []Key, valueList bool, store func(kv KV) *valError) *CLIError {
	rest := arg
	key := -1
	assigned := false
	// The C loop stops when the remaining string is empty, so one trailing comma is
	// harmless while an empty item in the middle is parsed (and fails).
	for rest != "" {
		item, next, found := strings.Cut(rest, ",")
		if !found {
			next = ""
		}
		rest = next

		var kv KV
		if valueList && assigned {
			kv = KV{Key: key, Typed: item, Value: item}
		} else {
			typed, val, ok := strings.Cut(item, "=")
			if !ok {
				return Errorf("%s: %s", item, AdmAssignReq)
			}
			assigned = true
			key = matchKey(typed, keys)
			if key < 0 {
				return Errorf("bad keyword %s", typed)
			}
			kv = KV{Key: key, Typed: typed, Value: val}
		}
		if kv.Value == "" {
			return Errorf("%s: %s", kv.Typed, AdmNoKeywordVal)
		}
		if store != nil {
			if ve := store(kv); ve != nil {
				return ve.cli(kv.Typed)
			}
		}
	}
	return nil
}

// ParseOptString parses a key=value[,key=value...] option argument (spec §1.2) against
// keys and returns the items in order. With valueList (the -s server=a,b,c form) every
// item after the first assignment is another value of the first key; its Typed is the
// item itself. Errors (exact texts): "<item>: assignment '=' missing", "bad keyword
// <key>", "<key>: missing value". Later items do not replace earlier ones here; the
// caller applies them in order, so later occurrences win.
func ParseOptString(arg string, keys []Key, valueList bool) ([]KV, *CLIError) {
	var out []KV
	err := parseOpts(arg, keys, valueList, func(kv KV) *valError {
		out = append(out, kv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Getopt is Solaris getopt(3C) over one subcommand's argv (argv[0] is the subcommand
// as typed), for an optstring that starts with ':'. It does not permute: the first
// operand ends option parsing, as on Solaris.
type Getopt struct {
	argv []string
	opts string
	// Optind is the index of the next argv element to process (1 at the start).
	Optind int
	// Optopt is the option character last seen.
	Optopt byte
	// Optarg is the argument of the option just returned.
	Optarg string
	sp     int // position inside argv[Optind]
}

// NewGetopt starts parsing argv (argv[0] = subcommand) with optstring, e.g. ":ei:m:o:t:h:p".
func NewGetopt(argv []string, optstring string) *Getopt {
	return &Getopt{argv: argv, opts: optstring, Optind: 1, sp: 1}
}

// Next returns the next option character, '?' for an unknown one, ':' for a missing
// option argument, or ok=false at the end of the options.
func (g *Getopt) Next() (c byte, ok bool) {
	if g.sp == 1 {
		if g.Optind >= len(g.argv) {
			return 0, false
		}
		a := g.argv[g.Optind]
		if len(a) < 2 || a[0] != '-' {
			return 0, false
		}
		if a == "--" {
			g.Optind++
			return 0, false
		}
	}
	a := g.argv[g.Optind]
	c = a[g.sp]
	g.Optopt = c
	g.Optarg = ""
	i := strings.IndexByte(g.opts, c)
	if c == ':' || i < 0 {
		g.sp++
		if g.sp >= len(a) {
			g.Optind++
			g.sp = 1
		}
		return '?', true
	}
	if i+1 < len(g.opts) && g.opts[i+1] == ':' {
		if g.sp+1 < len(a) {
			g.Optarg = a[g.sp+1:]
			g.Optind++
		} else {
			g.Optind++
			if g.Optind >= len(g.argv) {
				g.sp = 1
				return ':', true
			}
			g.Optarg = g.argv[g.Optind]
			g.Optind++
		}
		g.sp = 1
		return c, true
	}
	g.sp++
	if g.sp >= len(a) {
		g.sp = 1
		g.Optind++
	}
	return c, true
}

// BadOption is the error ilbadm prints for an unknown option: it names
// argv[optind-1], which is the element getopt last finished (unknown_opt).
func (g *Getopt) BadOption() *CLIError {
	i := g.Optind - 1
	if i < 0 || i >= len(g.argv) {
		return ErrBadOption("")
	}
	return ErrBadOption(g.argv[i])
}

// Operands returns the arguments after the options.
func (g *Getopt) Operands() []string {
	if g.Optind >= len(g.argv) {
		return nil
	}
	return g.argv[g.Optind:]
}
