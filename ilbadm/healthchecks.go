package main

import (
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// createHealthCheck: ilbadm create-healthcheck [-n] -h hc-test=value[,hc-timeout=value]
// [,hc-count=value][,hc-interval=value] hcname
func createHealthCheck(e *env, args []string) error {
	hc, cerr := compat.CreateHealthCheckArgv(args)
	if cerr != nil {
		return e.fail(cerr)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	// ilbd checks the name (case-insensitively) and that an external test exists and
	// is executable: it runs the probes.
	return e.fail(c.CreateHealthCheck(hc))
}

// deleteHealthCheck: ilbadm delete-healthcheck hcname ... (no options: every argument
// is a name, as in ilbadm_destroy_hc). It stops at the first failure.
func deleteHealthCheck(e *env, args []string) error {
	if len(args) < 2 {
		return e.failf("usage: ilbadm delete-healthcheck hc-name ...")
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	for _, n := range args[1:] {
		if err := c.DeleteHealthCheck(n); err != nil {
			return e.fail(err)
		}
	}
	return nil
}

// showHealthCheck: ilbadm show-healthcheck [hcname ...] — no options, always every
// field; named checks print in the order given and an unknown name stops the listing.
func showHealthCheck(e *env, args []string) error {
	// Solaris opens the table before it contacts ilbd (the header still waits for the
	// first row).
	out, cerr := compat.NewOfmtList(e.stdout, compat.HCFields, "all", 0, e.termRows())
	if cerr != nil {
		return e.fail(cerr)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	cfg, err := c.Config()
	if err != nil {
		return e.fail(err)
	}
	row := func(hc *rules.HealthCheck) {
		out.Row(func(f string) (string, bool) { return compat.HCValue(hc, f) })
	}
	names := args[1:]
	if len(names) == 0 {
		for i := range cfg.HealthChecks {
			row(&cfg.HealthChecks[i])
		}
		return nil
	}
	for _, n := range names {
		hc := cfg.HealthCheck(n)
		if hc == nil {
			return e.fail(compat.StatusENOENT)
		}
		row(hc)
	}
	return nil
}
