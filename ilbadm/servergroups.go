package main

import (
	"errors"
	"net"
	"net/netip"
	"strings"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// parseServerOpts runs getopt ":s:" and parses every -s argument (they accumulate).
func parseServerOpts(e *env, args []string) ([]rules.ServerSpec, []string, bool, error) {
	g := compat.NewGetopt(args, ":s:")
	var specs []rules.ServerSpec
	seen := false
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 's':
			s, cerr := compat.ParseServers(g.Optarg)
			if cerr != nil {
				return nil, nil, false, e.fail(cerr)
			}
			specs = append(specs, s...)
			seen = true
		case ':':
			return nil, nil, false, e.failf("missing option-argument for %c", g.Optopt)
		default:
			return nil, nil, false, e.fail(g.BadOption())
		}
	}
	return specs, g.Operands(), seen, nil
}

// createServerGroup: ilbadm create-servergroup [-s server=hostspec[:portspec...]] groupname
func createServerGroup(e *env, args []string) error {
	specs, rest, _, err := parseServerOpts(e, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return e.failf("missing mandatory arguments - please refer to 'create-servergroup' subcommand  description in ilbadm(%s)", compat.ManSection)
	}
	name := rest[0]
	if len(name) > rules.MaxGroupName {
		return e.failf("servergroup name %s is too long - must not exceed %d chars", name, rules.MaxGroupName)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.CreateServerGroup(name); err != nil {
		return e.fail(err)
	}
	for _, s := range specs {
		if _, err := c.AddServer(name, s); err != nil {
			// Solaris removes the whole new group when one server cannot be added.
			e.failf("cannot add %s to %s: %s", s.Addr, name, err)
			c.DeleteServerGroup(name)
			return errSilent
		}
	}
	return nil
}

// addServer: ilbadm add-server -s server=value[,value ...] servergroup
func addServer(e *env, args []string) error {
	specs, rest, _, err := parseServerOpts(e, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return e.failf("missing mandatory arguments - please refer to 'add-server' subcommand description in ilbadm(%s)", compat.ManSection)
	}
	name := rest[0]
	if len(specs) == 0 {
		return nil
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var failed error
	for _, s := range specs {
		if _, err := c.AddServer(name, s); err != nil {
			failed = e.failf("cannot add %s to %s: %s", s.Addr, name, err)
		}
	}
	return failed
}

// removeServer: ilbadm remove-server -s server=value[,value ...] servergroup
func removeServer(e *env, args []string) error {
	g := compat.NewGetopt(args, ":s:")
	var targets []string
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 's':
			ids, cerr := compat.ParseServerRefs(g.Optarg)
			if cerr != nil {
				return e.fail(cerr)
			}
			targets = append(targets, ids...)
		case ':':
			return e.failf("missing option-argument for %c", g.Optopt)
		default:
			return e.fail(g.BadOption())
		}
	}
	rest := g.Operands()
	if len(targets) == 0 || len(rest) != 1 {
		return e.failf("mandatory argument(s) missing - refer to ilbadm(%s)", compat.ManSection)
	}
	name := rest[0]
	if len(name) > rules.MaxGroupName {
		return e.fail(compat.StatusNameTooLong) // before any lookup, as Solaris' ilbadm checks it
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	var failed error
	for _, t := range targets {
		id := t
		if !strings.HasPrefix(t, "_") {
			// An address or host name (the manual's form): find its ID in this group.
			cfg, err := c.Config()
			if err != nil {
				return e.fail(err)
			}
			if ids := serversMatching(cfg, t, name); len(ids) > 0 {
				id = ids[0]
			}
		}
		if err := c.RemoveServer(name, id); err != nil {
			failed = e.failf("cannot remove %s from %s: %s", t, name, err)
		}
	}
	return failed
}

// serversMatching returns the IDs of the servers whose address is addr (a literal or a
// host name), in the named group or, when group is empty, in every group.
func serversMatching(cfg *rules.Config, addr, group string) []string {
	a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
	if err != nil {
		ips, lerr := net.LookupIP(addr)
		if lerr != nil || len(ips) == 0 {
			return nil
		}
		a, _ = netip.AddrFromSlice(ips[0])
	}
	a = a.Unmap()
	var ids []string
	for _, g := range cfg.Groups {
		if group != "" && g.Name != group {
			continue
		}
		for _, s := range g.Servers {
			if s.Addr == a {
				ids = append(ids, s.ID)
			}
		}
	}
	return ids
}

// enableServer: ilbadm enable-server server ...
func enableServer(e *env, args []string) error { return xableServer(e, args[1:], true) }

// disableServer: ilbadm disable-server server ...
func disableServer(e *env, args []string) error { return xableServer(e, args[1:], false) }

// xableServer takes server IDs or, as the manual allows, addresses and host names.
func xableServer(e *env, targets []string, enable bool) error {
	if len(targets) == 0 {
		return e.failf("missing required argument (server specification)")
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	do := c.DisableServer
	if enable {
		do = c.EnableServer
	}
	var failed error
	for _, t := range targets {
		ids := []string{t}
		if !strings.HasPrefix(t, "_") {
			cfg, err := c.Config()
			if err != nil {
				return e.fail(err)
			}
			if ids = serversMatching(cfg, t, ""); len(ids) == 0 {
				return e.fail(compat.AdmInvalSrvID)
			}
		}
		for _, id := range ids {
			err := do(id)
			switch {
			case err == nil:
			case errors.Is(err, compat.StatusENOENT):
				failed = e.failf("%s: %s", compat.StatusENOENT, id)
			default:
				failed = e.fail(err)
			}
		}
	}
	return failed
}

// deleteServerGroup: ilbadm delete-servergroup groupname
func deleteServerGroup(e *env, args []string) error {
	if len(args) != 2 {
		return e.failf("usage:ilbadm delete-servergroup groupname")
	}
	if len(args[1]) > rules.MaxGroupName {
		return e.fail(compat.StatusNameTooLong)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return e.fail(c.DeleteServerGroup(args[1]))
}

// parseShowOpts runs getopt ":po:" for show-servergroup and show-server.
func parseShowOpts(e *env, args []string, explicitMsg string) (fields string, flags compat.OfmtFlags, rest []string, err error) {
	g := compat.NewGetopt(args, ":po:")
	parsable := false
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 'p':
			parsable = true
		case 'o':
			fields = g.Optarg
		case ':':
			return "", 0, nil, e.failf("missing option argument for %c", g.Optopt)
		default:
			return "", 0, nil, e.fail(g.BadOption())
		}
	}
	if parsable {
		if fields == "" {
			return "", 0, nil, e.failf("option -p requires -o")
		}
		if strings.EqualFold(fields, "all") {
			return "", 0, nil, e.failf("%s", explicitMsg)
		}
		flags = compat.OfmtParsable
	}
	return fields, flags, g.Operands(), nil
}

// showServerGroup: ilbadm show-servergroup [[-p] -o field[,field]] [name ...]
func showServerGroup(e *env, args []string) error {
	fields, flags, names, err := parseShowOpts(e, args, "option -p requires explicit field names for -o")
	if err != nil {
		return err
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	table := &lazyTable{e: e, fields: fields, defaults: compat.SGDefaultFields, flags: flags}
	row := func(g *rules.ServerGroup, s *rules.Server) error {
		return table.row(compat.SGFields(s), func(f string) (string, bool) { return compat.SGValue(g.Name, s, f) })
	}
	group := func(g *rules.ServerGroup) error {
		if len(g.Servers) == 0 {
			return row(g, nil)
		}
		for i := range g.Servers {
			if err := row(g, &g.Servers[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return eachNamed(e, cfg.Groups, names, cfg.Group, compat.StatusSGUnavail, group)
}

// showServer: ilbadm show-server [[-p] -o field[,field...]] [rulename ...]
func showServer(e *env, args []string) error {
	fields, flags, names, err := parseShowOpts(e, args, "option -p requires explicit  field names for -o")
	if err != nil {
		return err
	}
	cfg, err := e.config()
	if err != nil {
		return err
	}
	table := &lazyTable{e: e, fields: fields, defaults: compat.ServerDefaultFields, flags: flags}
	rule := func(r *rules.Rule) error {
		g := cfg.Group(r.ServerGroup)
		if g == nil {
			return nil
		}
		for i := range g.Servers {
			s := &g.Servers[i]
			if err := table.row(compat.ServerFields(r.VIP), func(f string) (string, bool) {
				return compat.ServerValue(r.Name, g.Name, s, f)
			}); err != nil {
				return err
			}
		}
		return nil
	}
	// Solaris walks the rules' servers and reports an unknown rule as the end of the walk.
	return eachNamed(e, cfg.Rules, names, cfg.Rule, compat.StatusENOENT, rule)
}
