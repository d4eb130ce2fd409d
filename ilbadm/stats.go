package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
)

// The field lists of show-statistics (A/ilbadm_stats.c).
const (
	statStdFields        = "PKT_P,BYTES_P,PKT_U,BYTES_U,PKT_D,BYTES_D"
	statVerboseFields    = "PKT_P,BYTES_P,PKT_U,BYTES_U,PKT_D,BYTES_D,ICMP_P,ICMP_D,ICMP2BIG_P,ICMP2BIG_D,NOMEMP_D,NOPORTP_D"
	statItemRuleFields   = "SERVERNAME,PKT_P,BYTES_P"
	statItemServerFields = "RULENAME,PKT_P,BYTES_P"
	statTimeFormat       = "2006-01-02:15.04.05" // strftime("%F:%H.%M.%S")
	statDefaultInterval  = 1
	statCountForever     = -1
)

// statOpts is a parsed show-statistics command line.
type statOpts struct {
	rule, server        string
	itemize, delta, abs bool
	interval, count     int
}

// showStatistics: ilbadm show-statistics [[-p] -o field[,...]] [-tdAvi]
// [-r rulename|-s servername] [interval [count]]
//
// The first sample prints absolute totals; later ones the change per second (default),
// over the interval (-d), or absolute values (-A). A value that cannot be computed
// reliably because rules or servers changed between samples prints as "?".
func showStatistics(e *env, args []string) error {
	g := compat.NewGetopt(args, ":tdAr:s:ivo:p")
	o := statOpts{interval: statDefaultInterval, count: 1}
	fieldnames, fields := statStdFields, compat.StatFields
	var rOpt, sOpt, oOpt, pOpt, tOpt, vOpt bool
	var flags compat.OfmtFlags
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 't':
			tOpt = true
		case 'd':
			o.delta = true
		case 'A':
			o.abs = true
		case 'r':
			o.rule, rOpt = g.Optarg, true
		case 's':
			o.server, sOpt = g.Optarg, true
		case 'i':
			o.itemize = true
		case 'o':
			fieldnames, oOpt = g.Optarg, true
		case 'p':
			flags, pOpt = compat.OfmtParsable, true
		case 'v':
			fieldnames, vOpt = statVerboseFields, true
		case ':':
			return e.failf("missing option-argument detected for %c", g.Optopt)
		default:
			return e.fail(g.BadOption())
		}
	}
	switch {
	case sOpt && rOpt:
		return e.failf("options -s and -r are mutually exclusive")
	case o.itemize && !(sOpt || rOpt):
		return e.failf("option -i requires either -r or -s")
	case o.itemize && vOpt:
		return e.failf("option -i and -v are mutually exclusive")
	}
	if o.itemize {
		if !oOpt {
			fieldnames = statItemServerFields
			if rOpt {
				fieldnames = statItemRuleFields
			}
		}
		fields = compat.StatItemizedFields
	}
	if pOpt {
		switch {
		case !oOpt:
			return e.failf("option -p requires -o")
		case vOpt:
			return e.failf("option -o and -v are mutually exclusive")
		case strings.EqualFold(fieldnames, "all"):
			return e.failf("option -p requires explicit field names")
		}
	}
	if tOpt {
		if vOpt {
			fieldnames = "all"
		} else {
			fieldnames += ",TIME"
		}
	}
	if o.abs && o.delta {
		return e.failf("options -d and -A are mutually exclusive")
	}
	if ops := g.Operands(); len(ops) > 0 {
		if o.interval = compat.Atoi(ops[0]); o.interval < 1 {
			return e.failf("illegal interval spec %s", ops[0])
		}
		o.count = statCountForever
		if len(ops) > 1 {
			if o.count = compat.Atoi(ops[1]); o.count < 1 {
				return e.failf("illegal count spec %s", ops[1])
			}
		}
	}
	out, cerr := compat.NewOfmtList(e.stdout, fields, fieldnames, flags, e.termRows())
	if cerr != nil {
		return e.fail(cerr)
	}
	var prev *statSample
	for n := 0; ; n++ {
		// A connection per sample: an interval may be longer than ilbd keeps an idle
		// connection open.
		st, err := e.statistics()
		if err != nil {
			return err
		}
		cur, ok := o.sample(st)
		if !ok {
			return e.fail(compat.AdmENORule)
		}
		// The first sample is always absolute, as vmstat's first line is.
		p := &statPrinter{opts: &o, cur: cur, prev: prev, abs: o.abs || prev == nil}
		p.print(out)
		if o.count != statCountForever && n+1 >= o.count {
			return nil
		}
		time.Sleep(time.Duration(o.interval) * time.Second)
		prev = cur
	}
}

// statistics takes one sample of ilbd's counters.
func (e *env) statistics() (*api.Statistics, error) {
	c, err := e.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	st, err := c.Statistics()
	if err != nil {
		return nil, e.fail(err)
	}
	return st, nil
}

// statSample is the part of one statistics sample that the command line selected.
type statSample struct {
	rules []selectedRule
}

// selectedRule is a rule instance with the servers the command line selected.
type selectedRule struct {
	api.RuleStatistics
}

// sample selects the rules (-r, compared case-insensitively like kstat names) and the
// servers (-s); ok is false when -r names no rule.
func (o *statOpts) sample(st *api.Statistics) (*statSample, bool) {
	s := &statSample{}
	for _, r := range st.Rules {
		if o.rule != "" && !strings.EqualFold(r.Name, o.rule) {
			continue
		}
		if o.server != "" {
			var keep []api.ServerStatistics
			for _, sv := range r.Servers {
				if strings.EqualFold(sv.ID, o.server) {
					keep = append(keep, sv)
				}
			}
			r.Servers = keep
		}
		s.rules = append(s.rules, selectedRule{r})
	}
	if o.rule != "" && len(s.rules) == 0 {
		return nil, false
	}
	return s, true
}

// statPrinter prints one sample.
type statPrinter struct {
	opts      *statOpts
	cur, prev *statSample
	abs       bool
	// item is the (rule, server) row being printed in itemized mode.
	item struct{ rule, server int }
}

func (p *statPrinter) print(out *compat.Ofmt) {
	if !p.opts.itemize {
		out.Row(p.value)
		return
	}
	if p.opts.rule != "" {
		// One line per server of the named rule.
		for ri, r := range p.cur.rules {
			for si := range r.Servers {
				p.item.rule, p.item.server = ri, si
				out.Row(p.value)
			}
			break // Solaris prints the first instance of the name only
		}
		return
	}
	// One line per rule that has the named server.
	for ri, r := range p.cur.rules {
		if len(r.Servers) == 0 {
			continue
		}
		p.item.rule, p.item.server = ri, 0
		out.Row(p.value)
	}
}

// rate turns a difference into what the options ask for: per second by default.
func (p *statPrinter) rate(v uint64) string {
	if !p.abs && !p.opts.delta {
		v /= uint64(p.opts.interval)
	}
	return strconv.FormatUint(v, 10)
}

func (p *statPrinter) value(field string) (string, bool) {
	switch field = strings.ToUpper(field); field {
	case "TIME":
		return time.Now().Format(statTimeFormat), true
	case "PKT_P", "BYTES_P":
		bytes := field == "BYTES_P"
		if p.opts.itemize {
			return p.itemValue(bytes)
		}
		v := processed(p.cur, bytes)
		if p.abs {
			return p.rate(v), true
		}
		if !sameServers(p.cur, p.prev) {
			return "", false
		}
		return p.rate(v - processed(p.prev, bytes)), true
	case "RULENAME":
		return p.cur.rules[p.item.rule].Name, true
	case "SERVERNAME":
		return p.cur.rules[p.item.rule].Servers[p.item.server].ID, true
	}
	get := ruleCounter(field)
	if get == nil {
		return "", false
	}
	var v uint64
	for _, r := range p.cur.rules {
		v += get(&r.RuleStatistics)
	}
	if p.abs {
		return p.rate(v), true
	}
	if !sameRules(p.cur, p.prev) {
		return "", false
	}
	for _, r := range p.prev.rules {
		v -= get(&r.RuleStatistics)
	}
	return p.rate(v), true
}

// itemValue is a single server's processed counter in itemized mode.
func (p *statPrinter) itemValue(bytes bool) (string, bool) {
	r := p.cur.rules[p.item.rule]
	sv := r.Servers[p.item.server]
	v := serverCounter(sv, bytes)
	if p.abs {
		return p.rate(v), true
	}
	for _, pr := range p.prev.rules {
		if pr.Instance != r.Instance {
			continue
		}
		for _, ps := range pr.Servers {
			if ps.ID == sv.ID {
				return p.rate(v - serverCounter(ps, bytes)), true
			}
		}
	}
	return p.rate(v), false
}

func serverCounter(s api.ServerStatistics, bytes bool) uint64 {
	if bytes {
		return s.BytesProcessed
	}
	return s.PktProcessed
}

// processed sums the selected servers' counters over the selected rules.
func processed(s *statSample, bytes bool) uint64 {
	var v uint64
	for _, r := range s.rules {
		for _, sv := range r.Servers {
			v += serverCounter(sv, bytes)
		}
	}
	return v
}

// sameRules reports whether two samples hold the same rule instances, so that their
// rule counters can be subtracted.
func sameRules(a, b *statSample) bool {
	if len(a.rules) != len(b.rules) {
		return false
	}
	for i := range a.rules {
		if a.rules[i].Instance != b.rules[i].Instance {
			return false
		}
	}
	return true
}

// sameServers reports whether two samples hold the same servers in the same rules.
func sameServers(a, b *statSample) bool {
	if !sameRules(a, b) {
		return false
	}
	for i := range a.rules {
		as, bs := a.rules[i].Servers, b.rules[i].Servers
		if len(as) != len(bs) {
			return false
		}
		for j := range as {
			if as[j].ID != bs[j].ID {
				return false
			}
		}
	}
	return true
}

// ruleCounter returns the accessor of a rule-level field.
func ruleCounter(field string) func(*api.RuleStatistics) uint64 {
	switch field {
	case "PKT_U":
		return func(r *api.RuleStatistics) uint64 { return r.PktNotProcessed }
	case "BYTES_U":
		return func(r *api.RuleStatistics) uint64 { return r.BytesNotProcessed }
	case "PKT_D":
		return func(r *api.RuleStatistics) uint64 { return r.PktDropped }
	case "BYTES_D":
		return func(r *api.RuleStatistics) uint64 { return r.BytesDropped }
	case "ICMP_P":
		return func(r *api.RuleStatistics) uint64 { return r.ICMPEchoProcessed }
	case "ICMP_D":
		return func(r *api.RuleStatistics) uint64 { return r.ICMPDropped }
	case "ICMP2BIG_P":
		return func(r *api.RuleStatistics) uint64 { return r.ICMPTooBigProcessed }
	case "ICMP2BIG_D":
		return func(r *api.RuleStatistics) uint64 { return r.ICMPTooBigDropped }
	case "NOMEMP_D":
		return func(r *api.RuleStatistics) uint64 { return r.NoMemPktDropped }
	case "NOPORTP_D":
		return func(r *api.RuleStatistics) uint64 { return r.NoPortPktDropped }
	case "NOMEMB_D":
		return func(r *api.RuleStatistics) uint64 { return r.NoMemBytesDropped }
	case "NOPORTB_D":
		return func(r *api.RuleStatistics) uint64 { return r.NoPortBytesDropped }
	}
	return nil
}

// showNAT: ilbadm show-nat [count]
func showNAT(e *env, args []string) error { return showTable(e, args, true) }

// showPersist: ilbadm show-persist [count]
func showPersist(e *env, args []string) error { return showTable(e, args, false) }

// showTable prints the NAT or persistence table, or at most count entries of it.
func showTable(e *env, args []string, nat bool) error {
	max := 0
	switch len(args) {
	case 1:
	case 2:
		if max = compat.Atoi(args[1]); max < 1 {
			return e.fail(compat.AdmEINVAL)
		}
	default:
		return e.fail(compat.AdmEINVAL)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if nat {
		entries, err := c.NAT(max)
		if err != nil {
			return e.fail(err)
		}
		for _, n := range entries {
			fmt.Fprintf(e.stdout, "%4s: %s > %s >>> %s > %s\n", natProto(n.Proto),
				dotPort(n.Client), dotPort(n.VIP), dotPort(n.NATSrc), dotPort(n.Server))
		}
		return nil
	}
	entries, err := c.Persist(max)
	if err != nil {
		return e.fail(err)
	}
	for _, p := range entries {
		fmt.Fprintf(e.stdout, "%s: %s --> %s\n", p.Rule, p.Client.Unmap(), p.Server.Unmap())
	}
	return nil
}

func natProto(p uint8) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	}
	return "Unknown"
}

// dotPort prints an endpoint as Solaris does: address, a dot, the decimal port.
func dotPort(ap netip.AddrPort) string {
	return ap.Addr().Unmap().String() + "." + strconv.Itoa(int(ap.Port()))
}
