package compat

import (
	"math"
	"strings"

	"github.com/ilbgo/ilb/rules"
)

// Health-check defaults of ilbadm (A/ilbadm_hc.c ILBADM_DEF_HC_*).
const (
	DefaultHCCount    = 3
	DefaultHCInterval = 30 // seconds
	DefaultHCTimeout  = 5  // seconds
)

// CreateHealthCheck parses the arguments that follow create-healthcheck (see
// CreateHealthCheckArgv).
func CreateHealthCheck(args []string) (rules.HealthCheck, *CLIError) {
	return CreateHealthCheckArgv(append([]string{"create-healthcheck"}, args...))
}

// CreateHealthCheckArgv parses create-healthcheck's argv (argv[0] = subcommand) like
// ilbadm_create_hc: getopt ":h:n"; each -h starts again from the defaults; then the
// name checks, the default-ping check, and libilb's interval > timeout*count check.
func CreateHealthCheckArgv(argv []string) (rules.HealthCheck, *CLIError) {
	hc := rules.HealthCheck{DefPing: true}
	seenH := false
	g := NewGetopt(argv, ":h:n")
	for {
		c, ok := g.Next()
		if !ok {
			break
		}
		switch c {
		case 'h':
			seenH = true
			hc.Count, hc.Interval, hc.Timeout, hc.Test = DefaultHCCount, DefaultHCInterval, DefaultHCTimeout, ""
			err := parseOpts(g.Optarg, hcKeys, false, func(kv KV) *valError {
				if kv.Key == keyHCTest {
					hc.Test = kv.Value
					return nil
				}
				if !isDigit(kv.Value[0]) {
					return admErr(AdmEINVAL)
				}
				v := int(min(atoi(kv.Value), math.MaxInt32))
				switch kv.Key {
				case keyHCCount:
					hc.Count = v
				case keyHCTimeout:
					hc.Timeout = v
				case keyHCInterval:
					hc.Interval = v
				}
				return nil
			})
			if err != nil {
				return rules.HealthCheck{}, err
			}
			if hc.Test == "" {
				return rules.HealthCheck{}, Errorf("hc-test: missing")
			}
		case 'n':
			hc.DefPing = false
		default:
			// '?' and ':' are printed as the character getopt returned.
			return rules.HealthCheck{}, Errorf("bad argument %c", c)
		}
	}
	ops := g.Operands()
	if len(ops) == 0 {
		return rules.HealthCheck{}, Errorf("usage: ilbadm create-healthcheck [-n] -h hc-test=val[,hc-timeout=val][,hc-count=va][,hc-interval=val]  hc-name")
	}
	if len(ops[0]) > maxHCName {
		return rules.HealthCheck{}, ErrHCNameTooLong(ops[0])
	}
	hc.Name = ops[0]
	// Without -h Solaris sends an uninitialised structure; we report the missing test.
	if !seenH {
		return rules.HealthCheck{}, Errorf("hc-test: missing")
	}
	if (strings.EqualFold(hc.Test, "UDP") || strings.EqualFold(hc.Test, "PING")) && !hc.DefPing {
		return rules.HealthCheck{}, Errorf("cannot disable default PING for this test")
	}
	// libilb (client side) refuses an interval that does not exceed timeout*count.
	if int64(hc.Interval) <= int64(hc.Timeout)*int64(hc.Count) {
		return rules.HealthCheck{}, StatusError(StatusEINVAL)
	}
	return hc, nil
}
