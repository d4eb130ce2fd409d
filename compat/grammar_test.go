package compat

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseOptString(t *testing.T) {
	tests := []struct {
		name      string
		arg       string
		keys      []Key
		valueList bool
		want      []KV
		err       string
	}{
		{"simple", "vip=10.0.0.1,port=80,protocol=udp", incomingKeys, false,
			[]KV{{0, "vip", "10.0.0.1"}, {1, "port", "80"}, {2, "protocol", "udp"}}, ""},
		{"alias and case", "PROT=tcp,VIP=1.2.3.4", incomingKeys, false,
			[]KV{{2, "PROT", "tcp"}, {0, "VIP", "1.2.3.4"}}, ""},
		{"method aliases", "algo=rr,topo=n,nat-src=1.1.1.1,persist=24", methodKeys, false,
			[]KV{{0, "algo", "rr"}, {1, "topo", "n"}, {2, "nat-src", "1.1.1.1"}, {3, "persist", "24"}}, ""},
		{"repeated keys kept in order", "port=80,port=81", incomingKeys, false,
			[]KV{{1, "port", "80"}, {1, "port", "81"}}, ""},
		{"value contains =", "sg=a=b", outgoingKeys, false, []KV{{0, "sg", "a=b"}}, ""},
		{"trailing comma ignored", "sg=x,", outgoingKeys, false, []KV{{0, "sg", "x"}}, ""},
		{"empty arg", "", outgoingKeys, false, nil, ""},
		{"missing =", "vip=1.2.3.4,port", incomingKeys, false, nil, "port: assignment '=' missing"},
		{"empty middle item", "vip=1.2.3.4,,port=80", incomingKeys, false, nil, ": assignment '=' missing"},
		{"bad keyword", "vip=1.2.3.4,foo=1", incomingKeys, false, nil, "bad keyword foo"},
		{"stickiness is the manual's alias of pmask", "stickiness=24", methodKeys, false, []KV{{3, "stickiness", "24"}}, ""},
		{"prefix is not a match", "proto=tcp", incomingKeys, false, nil, "bad keyword proto"},
		{"empty value", "vip=", incomingKeys, false, nil, "vip: missing value"},
		{"empty value alias as typed", "PROT=", incomingKeys, false, nil, "PROT: missing value"},
		{"empty key matches empty alias", "=x", incomingKeys, false, []KV{{0, "", "x"}}, ""},
		{"empty key without empty alias", "=x", outgoingKeys, false, nil, "bad keyword "},
		{"value list", "server=1.1.1.1,2.2.2.2,x=y", serverKeys, true,
			[]KV{{0, "server", "1.1.1.1"}, {0, "2.2.2.2", "2.2.2.2"}, {0, "x=y", "x=y"}}, ""},
		{"value list alias", "SERVERS=a", serverKeys, true, []KV{{0, "SERVERS", "a"}}, ""},
		{"value list needs =", "1.1.1.1,2.2.2.2", serverKeys, true, nil, "1.1.1.1: assignment '=' missing"},
		{"value list empty item", "server=a,,b", serverKeys, true, nil, ": missing value"},
		{"value list bad key", "srv=a", serverKeys, true, nil, "bad keyword srv"},
		{"serverID has no servers alias", "servers=_a.1", serverIDKeys, true, nil, "bad keyword servers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOptString(tt.arg, tt.keys, tt.valueList)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %q", err.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// getoptRun runs Getopt to completion and records what it returned.
func getoptRun(argv []string, opts string) (trace []string, ops []string, bad string) {
	g := NewGetopt(argv, opts)
	for {
		c, ok := g.Next()
		if !ok {
			break
		}
		switch c {
		case '?':
			return trace, nil, g.BadOption().Error()
		case ':':
			return trace, nil, ErrMissingOptArg(g.Optopt).Error()
		}
		trace = append(trace, string(c)+"="+g.Optarg)
	}
	return trace, g.Operands(), ""
}

func TestGetopt(t *testing.T) {
	tests := []struct {
		argv  string
		trace string
		ops   string
		bad   string
	}{
		{"create-rule -e -p -i a -m b name", "e= p= i=a m=b", "name", ""},
		{"create-rule -ep -ia name x", "e= p= i=a", "name x", ""},
		{"create-rule -i -m name", "i=-m", "name", ""},
		{"create-rule name -e", "", "name -e", ""},
		{"create-rule -- -e", "", "-e", ""},
		{"create-rule - -e", "", "- -e", ""},
		{"create-rule -e -x name", "e=", "", "bad or misplaced option -x"},
		{"create-rule -ex name", "e=", "", "bad or misplaced option -ex"},
		// An unknown letter that is not the last of its element leaves optind alone,
		// so Solaris names the previous argv element.
		{"create-rule -xe name", "", "", "bad or misplaced option create-rule"},
		{"create-rule -e -xe name", "e=", "", "bad or misplaced option -e"},
		{"create-rule -e -:", "e=", "", "bad or misplaced option -:"},
		{"create-rule -e -i", "e=", "", "missing option-argument for i"},
	}
	for _, tt := range tests {
		trace, ops, bad := getoptRun(strings.Fields(tt.argv), ":ei:m:o:t:h:p")
		if strings.Join(trace, " ") != tt.trace || strings.Join(ops, " ") != tt.ops || bad != tt.bad {
			t.Errorf("%q: trace %q ops %q bad %q; want %q %q %q", tt.argv, trace, ops, bad, tt.trace, tt.ops, tt.bad)
		}
	}
}
