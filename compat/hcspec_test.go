package compat

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

func TestCreateHealthCheck(t *testing.T) {
	tests := []struct {
		args string
		want rules.HealthCheck
		err  string
	}{
		// MAN Example 1 and 7.
		{"-h hc-test=tcp,hc-timeout=2,hc-count=3,hc-interval=10 hc1",
			rules.HealthCheck{Name: "hc1", Test: "tcp", Timeout: 2, Count: 3, Interval: 10, DefPing: true}, ""},
		{"-h hc-timeout=3,hc-count=2,hc-interval=8,hc-test=tcp hc1",
			rules.HealthCheck{Name: "hc1", Test: "tcp", Timeout: 3, Count: 2, Interval: 8, DefPing: true}, ""},
		{"-h hc-test=PING hc2", rules.HealthCheck{Name: "hc2", Test: "PING", Timeout: 5, Count: 3, Interval: 30, DefPing: true}, ""},
		{"-n -h hc-test=/opt/probe,hc-tout=1,hc-intl=9 hc3",
			rules.HealthCheck{Name: "hc3", Test: "/opt/probe", Timeout: 1, Count: 3, Interval: 9}, ""},
		// Each -h starts again from the defaults.
		{"-h hc-test=tcp,hc-count=9 -h hc-test=udp h", rules.HealthCheck{Name: "h", Test: "udp", Timeout: 5, Count: 3, Interval: 30, DefPing: true}, ""},

		{"-h hc-timeout=3 hc1", rules.HealthCheck{}, "hc-test: missing"},
		{"-h hc-test=tcp,hc-count=x hc1", rules.HealthCheck{}, "hc-count: invalid value  - refer to ilbadm(1M)"},
		{"-h hc-test=tcp,hc-tout=-1 hc1", rules.HealthCheck{}, "hc-tout: invalid value  - refer to ilbadm(1M)"},
		{"-h hc-test=tcp,hc-bogus=1 hc1", rules.HealthCheck{}, "bad keyword hc-bogus"},
		{"-x -h hc-test=tcp hc1", rules.HealthCheck{}, "bad argument ?"},
		{"-h", rules.HealthCheck{}, "bad argument :"},
		{"-h hc-test=tcp", rules.HealthCheck{}, "usage: ilbadm create-healthcheck [-n] -h hc-test=val[,hc-timeout=val][,hc-count=va][,hc-interval=val]  hc-name"},
		{"-h hc-test=tcp abcdefghijklmnopqrst", rules.HealthCheck{}, "health check object name abcdefghijklmnopqrst is too long - must not exceed 19 chars"},
		{"-n -h hc-test=Udp h", rules.HealthCheck{}, "cannot disable default PING for this test"},
		{"-n -h hc-test=ping h", rules.HealthCheck{}, "cannot disable default PING for this test"},
		{"-h hc-test=tcp,hc-timeout=10,hc-count=3,hc-interval=30 h", rules.HealthCheck{}, "invalid argument(s) - see man page"},
		{"h", rules.HealthCheck{}, "hc-test: missing"},
	}
	for _, tt := range tests {
		got, err := CreateHealthCheck(strings.Fields(tt.args))
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %+v %v, want %+v", tt.args, got, err, tt.want)
		}
	}
}
