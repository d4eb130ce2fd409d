package compat

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// stubResolver replaces the name service for one test.
func stubResolver(t *testing.T, hosts map[string]string) {
	t.Helper()
	old := lookupHost
	t.Cleanup(func() { lookupHost = old })
	lookupHost = func(name string) ([]netip.Addr, error) {
		if a, ok := hosts[name]; ok {
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		}
		return nil, errors.New("no such host")
	}
}

// srv builds a ServerSpec for test tables.
func srv(a string, min, max uint16) rules.ServerSpec {
	return rules.ServerSpec{Addr: netip.MustParseAddr(a), MinPort: min, MaxPort: max}
}

func TestParseServers(t *testing.T) {
	stubResolver(t, map[string]string{"web-1.example": "192.0.2.50", "v6host": "2001:db8::50", "a-1": "192.0.2.77"})
	tests := []struct {
		name string
		arg  string
		want []rules.ServerSpec
		err  []string
	}{
		{"ipv4", "server=192.0.2.1", []rules.ServerSpec{srv("192.0.2.1", 0, 0)}, nil},
		{"servers alias, several (manual example 3)", "servers=60.0.0.9,60.0.0.10",
			[]rules.ServerSpec{srv("60.0.0.9", 0, 0), srv("60.0.0.10", 0, 0)}, nil},
		{"port ranges (manual example 1)", "server=60.0.0.10:6000-6009,60.0.0.11:7000-7009",
			[]rules.ServerSpec{srv("60.0.0.10", 6000, 6009), srv("60.0.0.11", 7000, 7009)}, nil},
		{"ports (manual example 2)", "server=60.0.0.10:6000,60.0.0.11:7000",
			[]rules.ServerSpec{srv("60.0.0.10", 6000, 6000), srv("60.0.0.11", 7000, 7000)}, nil},
		{"v4 range with port", "server=192.0.2.1-192.0.2.3:80",
			[]rules.ServerSpec{srv("192.0.2.1", 80, 80), srv("192.0.2.2", 80, 80), srv("192.0.2.3", 80, 80)}, nil},
		{"v4 range crossing an octet", "SERVER=192.0.2.255-192.0.3.0",
			[]rules.ServerSpec{srv("192.0.2.255", 0, 0), srv("192.0.3.0", 0, 0)}, nil},
		{"range of one", "server=192.0.2.1-192.0.2.1", []rules.ServerSpec{srv("192.0.2.1", 0, 0)}, nil},
		{"256 addresses is the maximum", "server=10.0.0.0-10.0.0.255", nil, nil},
		{"v6 bracketed", "server=[2001:db8::1]", []rules.ServerSpec{srv("2001:db8::1", 0, 0)}, nil},
		{"v6 bracketed with port", "server=[2001:db8::1]:8080", []rules.ServerSpec{srv("2001:db8::1", 8080, 8080)}, nil},
		{"v6 range", "server=[2001:db8::ff]-[2001:db8::101]",
			[]rules.ServerSpec{srv("2001:db8::ff", 0, 0), srv("2001:db8::100", 0, 0), srv("2001:db8::101", 0, 0)}, nil},
		{"v6 range with single port (Solaris adds only the first)", "server=[2001:db8::1]-[2001:db8::2]:80",
			[]rules.ServerSpec{srv("2001:db8::1", 80, 80), srv("2001:db8::2", 80, 80)}, nil},
		{"v6 range with port range", "server=[2001:db8::1]-[2001:db8::2]:80-81",
			[]rules.ServerSpec{srv("2001:db8::1", 80, 81), srv("2001:db8::2", 80, 81)}, nil},
		{"service name", "server=192.0.2.1:http", []rules.ServerSpec{srv("192.0.2.1", 80, 80)}, nil},
		{"host name", "server=web-1.example:https", []rules.ServerSpec{srv("192.0.2.50", 443, 443)}, nil},
		{"host name with dash and digit part", "server=a-1", []rules.ServerSpec{srv("192.0.2.77", 0, 0)}, nil},
		{"v6 host name", "server=v6host", []rules.ServerSpec{srv("2001:db8::50", 0, 0)}, nil},
		{"mixed families across items", "server=192.0.2.1,[2001:db8::1]",
			[]rules.ServerSpec{srv("192.0.2.1", 0, 0), srv("2001:db8::1", 0, 0)}, nil},

		{"unbracketed v6", "server=2001:db8::1", nil, []string{"server: syntax failure - refer to ilbadm(1M)"}},
		{"unbracketed v6, alias as typed", "servers=2001:db8::1", nil, []string{"servers: syntax failure - refer to ilbadm(1M)"}},
		{"unbracketed v6 as 2nd value", "server=192.0.2.1,2001:db8::1", nil,
			[]string{"2001:db8::1: syntax failure - refer to ilbadm(1M)"}},
		{"unbracketed v6 range", "server=2001:db8::1-2001:db8::2", nil,
			[]string{"invalid port value db8::1 specified", "server: library error"}},
		{"unclosed bracket", "server=[2001:db8::1", nil, []string{"server: syntax failure - refer to ilbadm(1M)"}},
		{"v4 in brackets", "server=[192.0.2.1]", nil, []string{"server: address family is invalid"}},
		{"host name in brackets", "server=[web-1.example]", nil, []string{"server: address is invalid"}},
		{"v6 range second part unbracketed", "server=[2001:db8::1]-10.0.0.1", nil,
			[]string{"server: syntax failure - refer to ilbadm(1M)"}},
		{"mixed family range", "server=10.0.0.1-[2001:db8::1]", nil,
			[]string{"invalid port value db8::1] specified", "server: library error"}},
		{"range too large", "server=10.0.0.0-10.0.1.0", nil,
			[]string{"server: address range contains more than 255 IP addresses"}},
		{"v6 range too large", "server=[2001:db8::]-[2001:db8::1:0]", nil,
			[]string{"server: address range contains more than 255 IP addresses"}},
		{"start after end", "server=10.0.0.5-10.0.0.1", nil,
			[]string{"starting IP address is must be less than ending ip address in ip range specification", "server: library error"}},
		{"v6 start after end", "server=[2001:db8::5]-[2001:db8::1]", nil,
			[]string{"starting IP address is must be less than ending ip address in ip range specification", "server: library error"}},
		{"port 0", "server=192.0.2.1:0", nil, []string{"invalid port value 0 specified", "server: library error"}},
		{"port 65536", "server=192.0.2.1:65536", nil, []string{"invalid port value 65536 specified", "server: library error"}},
		{"empty port", "server=192.0.2.1:", nil, []string{"invalid port value  specified", "server: library error"}},
		{"port range reversed", "server=192.0.2.1:90-80", nil, []string{"invalid port value 80 specified", "server: library error"}},
		{"range with service name", "server=192.0.2.1:http-90", nil,
			[]string{"ranges are only allowed for numeric ports", "server: library error"}},
		{"range ending in service name", "server=192.0.2.1:80-http", nil,
			[]string{"invalid port value http specified", "server: library error"}},
		{"unknown service", "server=192.0.2.1:nosuch", nil, []string{"invalid port value nosuch specified", "server: library error"}},
		{"unknown host", "server=nosuch.example", nil, []string{"server: address is invalid"}},
		{"unknown host 2nd value", "server=192.0.2.1,nosuch", nil, []string{"nosuch: address is invalid"}},
		{"bad v4", "server=192.0.2.256", nil, []string{"server: address is invalid"}},
		{"missing value", "server=", nil, []string{"server: missing value"}},
		{"bad keyword", "host=192.0.2.1", nil, []string{"bad keyword host"}},
		{"no assignment", "192.0.2.1", nil, []string{"192.0.2.1: assignment '=' missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseServers(tt.arg)
			if tt.err != nil {
				if err == nil || !reflect.DeepEqual(err.Lines, tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %q", err.Lines)
			}
			if tt.want == nil {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	got, err := ParseServers("server=10.0.0.0-10.0.0.255:80")
	if err != nil || len(got) != 256 || got[255].Addr != netip.MustParseAddr("10.0.0.255") || got[255].MinPort != 80 {
		t.Errorf("256-address range: %d %v", len(got), err)
	}
}

func TestParseServersLocalhost(t *testing.T) {
	// The real resolver: localhost comes from /etc/hosts.
	got, err := ParseServers("server=localhost:80")
	if err != nil {
		t.Skipf("no resolver for localhost: %v", err)
	}
	if len(got) != 1 || !got[0].Addr.IsLoopback() || got[0].MinPort != 80 || got[0].MaxPort != 80 {
		t.Errorf("got %v", got)
	}
}

func TestParseServerIDs(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want []string
		err  string
	}{
		{"server=_sg1.0", []string{"_sg1.0"}, ""},
		{"server=_sg1.0,_sg1.2", []string{"_sg1.0", "_sg1.2"}, ""},
		{"SERVER=_sg1.0", []string{"_sg1.0"}, ""},
		{"=_sg1.0", []string{"_sg1.0"}, ""}, // the empty alias matches an empty key
		{"servers=_sg1.0", nil, "bad keyword servers"},
		{"server=10.0.0.1", nil, "server: server ID is invalid"},
		{"server=_sg1.0,sg1.1", nil, "sg1.1: server ID is invalid"},
		{"server=", nil, "server: missing value"},
	} {
		got, err := ParseServerIDs(tt.arg)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %v %v", tt.arg, got, err)
		}
	}
	for _, tt := range []struct{ id, group string }{{"_sg1.0", "sg1"}, {"_a.b.12", "a.b"}, {"_x", ""}, {"sg.1", ""}} {
		g, ok := ServerIDGroup(tt.id)
		if g != tt.group || ok != (tt.group != "") {
			t.Errorf("ServerIDGroup(%q) = %q %v", tt.id, g, ok)
		}
	}
}

// remove-server also takes addresses and host names (spec policy 2); only values that
// cannot be either keep Solaris' "server ID is invalid".
func TestParseServerRefs(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want []string
		err  string
	}{
		{"server=_sg1.0,10.0.0.1,[2001:db8::1],2001:db8::2,web-1.example.com",
			[]string{"_sg1.0", "10.0.0.1", "[2001:db8::1]", "2001:db8::2", "web-1.example.com"}, ""},
		{"servers=_sg1.0", nil, "bad keyword servers"},
		{"server=_sg1.0,a/b", nil, "a/b: server ID is invalid"},
		{"server=10.0.0.1:80", nil, "server: server ID is invalid"},
		{"server=", nil, "server: missing value"},
	} {
		got, err := ParseServerRefs(tt.arg)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %v %v", tt.arg, got, err)
		}
	}
}

func TestFormatAddrAndPorts(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"},
		{"2001:db8::10", "2001:db8::10"},
		{"0.0.0.0", ""},
		{"::", ""},
		{"::ffff:10.0.0.1", "::ffff:10.0.0.1"},
		{"::10.0.0.1", "::10.0.0.1"},
		{"::1", "::1"},
		{"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
	} {
		if got := FormatAddr(netip.MustParseAddr(tt.in)); got != tt.want {
			t.Errorf("FormatAddr(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if FormatAddr(netip.Addr{}) != "" {
		t.Errorf("invalid address")
	}
	for _, tt := range []struct {
		min, max uint16
		want     string
	}{{0, 0, ""}, {80, 0, "80"}, {80, 80, "80"}, {80, 90, "80-90"}, {90, 80, "90"}} {
		if got := FormatPortRange(tt.min, tt.max); got != tt.want {
			t.Errorf("FormatPortRange(%d,%d) = %q", tt.min, tt.max, got)
		}
	}
}
