package main

import (
	"strconv"
	"time"

	"github.com/ilbgo/ilb/api"
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
	cfg, err := e.config()
	if err != nil {
		return err
	}
	row := func(hc *rules.HealthCheck) error {
		out.Row(func(f string) (string, bool) { return compat.HCValue(hc, f) })
		return nil
	}
	return eachNamed(e, cfg.HealthChecks, args[1:], cfg.HealthCheck, compat.StatusENOENT, row)
}

// showHCResult: ilbadm show-hc-result [rule-name ...] — no options: every argument is a
// rule name (ilbadm_show_hc_result). Without names it lists every rule with a health
// check; with names, each rule's servers in the order given, stopping at the first rule
// that does not exist or has no health check ("rule does not have health check enabled")
// after printing the earlier ones.
func showHCResult(e *env, args []string) error {
	out, cerr := compat.NewOfmtList(e.stdout, compat.HCResultFields, "all", 0, e.termRows())
	if cerr != nil {
		return e.fail(cerr)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	names := args[1:]
	all := len(names) == 0
	if all {
		names = []string{""}
	}
	for _, n := range names {
		if n == "" && !all {
			// An empty name is no rule (the protocol reads it as "every rule").
			return e.fail(compat.StatusRuleNoHC)
		}
		rs, err := c.HCResults(n)
		if err != nil {
			return e.fail(err)
		}
		for i := range rs {
			out.Row(func(f string) (string, bool) { return hcResultValue(&rs[i], f) })
		}
	}
	return nil
}

// hcResultValue renders one show-hc-result field (A/ilbadm_hc.c ilbadm_print_hc_result):
// times are local HH:MM:SS; NEXT is empty while the server is disabled.
func hcResultValue(r *api.HCResult, field string) (string, bool) {
	clock := func(sec int64) string { return time.Unix(sec, 0).Format("15:04:05") }
	switch field {
	case "RULENAME":
		return r.Rule, true
	case "HCNAME":
		return r.HCName, true
	case "SERVERID":
		return r.ServerID, true
	case "STATUS":
		return r.Status, true
	case "FAIL":
		return strconv.FormatUint(uint64(r.Fail), 10), true
	case "LAST":
		return clock(r.Last), true
	case "NEXT":
		if r.Status == "disabled" {
			return "", true
		}
		return clock(r.Next), true
	case "RTT":
		return strconv.FormatUint(uint64(r.RTT), 10), true
	}
	return "", false
}
