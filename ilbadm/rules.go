package main

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// createRule: ilbadm create-rule [-e] [-p] -i ... -m ... [-h ...] [-t ...] -o ... name
func createRule(e *env, args []string) error {
	r, cerr := compat.CreateRuleArgv(args)
	if cerr != nil {
		return e.fail(cerr)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return e.fail(c.CreateRule(r))
}

// deleteRule: ilbadm delete-rule -a | name ...
func deleteRule(e *env, args []string) error {
	g := compat.NewGetopt(args, ":a")
	all := false
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		if c != 'a' {
			return e.fail(g.BadOption())
		}
		all = true
	}
	names := g.Operands()
	switch {
	case all && len(names) > 0:
		return e.failf("invalid/incompatible keywords - refer to ilbadm(%s)", compat.ManSection)
	case !all && len(names) == 0:
		return e.failf("usage: delete-rule -a | name")
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if all {
		return e.fail(c.DeleteRule(""))
	}
	for _, n := range names {
		if err := c.DeleteRule(n); err != nil {
			return e.fail(err)
		}
	}
	return nil
}

// enableRule: ilbadm enable-rule [name ...]; no name means every rule.
func enableRule(e *env, args []string) error { return xableRule(e, args[1:], true) }

// disableRule: ilbadm disable-rule [name ...]; no name means every rule.
func disableRule(e *env, args []string) error { return xableRule(e, args[1:], false) }

// xableRule tries every name and reports every failure (Solaris reported only the last
// one: a listed fix).
func xableRule(e *env, names []string, enable bool) error {
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	do := c.DisableRule
	if enable {
		do = c.EnableRule
	}
	if len(names) == 0 {
		return e.fail(do(""))
	}
	var failed error
	for _, n := range names {
		if err := do(n); err != nil {
			failed = e.fail(err)
		}
	}
	return failed
}

// showRule: ilbadm show-rule [-e|-d] [-f |[-p] -o key[,key ...]] [name ...]
func showRule(e *env, args []string) error {
	g := compat.NewGetopt(args, ":fpedo:")
	var full, parsable, onlyEnabled, onlyDisabled bool
	fields := ""
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 'f':
			full = true
		case 'p':
			parsable = true
		case 'e':
			onlyEnabled, onlyDisabled = true, false
		case 'd':
			onlyEnabled, onlyDisabled = false, true
		case 'o':
			fields = g.Optarg
		case ':':
			return e.failf("missing option argument for %c", g.Optopt)
		default:
			return e.fail(g.BadOption())
		}
	}
	switch {
	case full && fields != "":
		return e.failf("options -o and -f are mutually exclusive")
	case parsable && fields == "":
		return e.failf("option -p requires -o")
	case parsable && strings.EqualFold(fields, "all"):
		return e.failf("option -p requires explicit field names for -o")
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}

	var flags compat.OfmtFlags
	switch {
	case full:
		flags, fields = compat.OfmtMultiline, compat.RuleFullFields
	case parsable:
		flags = compat.OfmtParsable
	}
	table := &lazyTable{e: e, fields: fields, defaults: compat.RuleDefaultFields, flags: flags}
	emit := func(r *rules.Rule) error {
		if (onlyEnabled && !r.Enabled) || (onlyDisabled && r.Enabled) {
			return nil
		}
		ids := serverIDs(cfg.Group(r.ServerGroup))
		return table.row(compat.RuleFields(r.VIP), func(f string) (string, bool) { return compat.RuleValue(r, ids, f) })
	}
	// Named rules print in the order given; an unknown name stops the listing there.
	return eachNamed(e, cfg.Rules, g.Operands(), cfg.Rule, compat.StatusENOENT, emit)
}

// serverIDs lists a group's server IDs in order (none for a missing group).
func serverIDs(sg *rules.ServerGroup) []string {
	if sg == nil {
		return nil
	}
	ids := make([]string, len(sg.Servers))
	for i, s := range sg.Servers {
		ids[i] = s.ID
	}
	return ids
}

// termRows is the terminal height used to repeat table headers; 0 (meaning 24) when
// stdout is not a terminal.
func (e *env) termRows() int {
	f, ok := e.stdout.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Row == 0 {
		return 0
	}
	return int(ws.Row)
}
