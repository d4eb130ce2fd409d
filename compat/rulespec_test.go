package compat

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// ip parses an address for test tables.
func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestCreateRuleValid(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want rules.Rule
	}{
		{
			// MAN Example 1, with the -p the code requires for pmask.
			"manual example 1",
			[]string{"-e", "-p", "-i", "vip=81.0.0.10,port=5000-5009,protocol=tcp",
				"-m", "lbalg=rr,type=NAT,proxy-src=60.0.0.101-60.0.0.104,pmask=24",
				"-h", "hc-name=hc1",
				"-t", "conn-drain=180,nat-timeout=180,persist-timeout=180",
				"-o", "servergroup=sg1", "rule1"},
			rules.Rule{Name: "rule1", Enabled: true, VIP: ip("81.0.0.10"), Proto: rules.ProtoTCP,
				MinPort: 5000, MaxPort: 5009, Algo: rules.AlgoRoundRobin, Topo: rules.TopoNAT,
				ProxySrcStart: ip("60.0.0.101"), ProxySrcEnd: ip("60.0.0.104"), Sticky: true, PMaskBits: 24,
				HCName: "hc1", ConnDrain: 180, NATTimeout: 180, PersistTimeout: 180, ServerGroup: "sg1"},
		},
		{
			"manual example 1, default timers",
			strings.Fields("-e -i vip=81.0.0.10,port=5000 -m lbalg=rr,type=NAT,proxy-src=60.0.0.105 -o servergroup=sg1 rule1"),
			rules.Rule{Name: "rule1", Enabled: true, VIP: ip("81.0.0.10"), Proto: rules.ProtoTCP,
				MinPort: 5000, MaxPort: 5000, Algo: rules.AlgoRoundRobin, Topo: rules.TopoNAT,
				ProxySrcStart: ip("60.0.0.105"), ProxySrcEnd: ip("60.0.0.105"), ServerGroup: "sg1"},
		},
		{
			"manual example 2 half-nat",
			strings.Fields("-e -i vip=81.0.0.10,port=5000-5009 -m lbalg=rr,type=h -o servergroup=sg1 rule1"),
			rules.Rule{Name: "rule1", Enabled: true, VIP: ip("81.0.0.10"), Proto: rules.ProtoTCP,
				MinPort: 5000, MaxPort: 5009, Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "sg1"},
		},
		{
			"manual example 3 DSR",
			strings.Fields("-e -i vip=81.0.0.10,port=80 -m lbalg=hash-ip-port,type=DSR -o servergroup=websg webrule"),
			rules.Rule{Name: "webrule", Enabled: true, VIP: ip("81.0.0.10"), Proto: rules.ProtoTCP,
				MinPort: 80, MaxPort: 80, Algo: rules.AlgoHashIPPort, Topo: rules.TopoDSR, ServerGroup: "websg"},
		},
		{
			"manual example 3 ftp-data service name",
			strings.Fields("-e -p -i vip=81.0.0.10,port=ftp-data -m lbalg=hash-ip-port,type=DSR,pmask=24 -o servergroup=ftpgroup ftpdatarule"),
			rules.Rule{Name: "ftpdatarule", Enabled: true, VIP: ip("81.0.0.10"), Proto: rules.ProtoTCP,
				MinPort: 20, MaxPort: 20, Algo: rules.AlgoHashIPPort, Topo: rules.TopoDSR, Sticky: true, PMaskBits: 24,
				ServerGroup: "ftpgroup"},
		},
		{
			"missing lbalg is roundrobin, disabled by default, udp, http",
			strings.Fields("-i vip=192.0.2.1,port=http,protocol=UDP -m type=dsr -o sg=g r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoUDP, MinPort: 80, MaxPort: 80,
				Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR, ServerGroup: "g"},
		},
		{
			"-p default mask v4, no port, hc-port N",
			strings.Fields("-p -i vip=192.0.2.1 -m lbalg=hip,type=HALF-NAT -h hcn=h,hcp=8080 -o sg=g r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, Algo: rules.AlgoHashIP,
				Topo: rules.TopoHalfNAT, Sticky: true, PMaskBits: 32, HCName: "h", HCPort: 8080, ServerGroup: "g"},
		},
		{
			"ipv6 bare, -p default /128, hash-ip-vip, hc-port any",
			strings.Fields("-p -i vip=2001:db8::10,port=443,prot=Tcp -m algo=hipv,topo=d -h hc-name=h,hc-port=any -o sg=g6 r6"),
			rules.Rule{Name: "r6", VIP: ip("2001:db8::10"), Proto: rules.ProtoTCP, MinPort: 443, MaxPort: 443,
				Algo: rules.AlgoHashIPVIP, Topo: rules.TopoDSR, Sticky: true, PMaskBits: 128, HCName: "h", ServerGroup: "g6"},
		},
		{
			"ipv6 bracketed, v6 proxy-src bare range, pmask /64",
			[]string{"-p", "-i", "vip=[2001:db8::10],port=80", "-m", "type=NAT,proxy-src=2001:db8::1-2001:db8::4,pmask=/64,lbalg=roundrobin",
				"-o", "servergroup=g6", "r6"},
			rules.Rule{Name: "r6", VIP: ip("2001:db8::10"), Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
				Algo: rules.AlgoRoundRobin, Topo: rules.TopoNAT, ProxySrcStart: ip("2001:db8::1"), ProxySrcEnd: ip("2001:db8::4"),
				Sticky: true, PMaskBits: 64, ServerGroup: "g6"},
		},
		{
			"v6 proxy-src bracketed range",
			[]string{"-i", "vip=2001:db8::10", "-m", "type=n,proxy-src=[2001:db8::1]-[2001:db8::2]", "-o", "sg=g", "r"},
			rules.Rule{Name: "r", VIP: ip("2001:db8::10"), Proto: rules.ProtoTCP, Algo: rules.AlgoRoundRobin, Topo: rules.TopoNAT,
				ProxySrcStart: ip("2001:db8::1"), ProxySrcEnd: ip("2001:db8::2"), ServerGroup: "g"},
		},
		{
			"repeated options and keys overwrite",
			strings.Fields("-i vip=192.0.2.1,port=80 -i vip=192.0.2.2,port=81,port=82 -m type=DSR,type=HALF-NAT -o sg=a -o sg=b -t nat-timeout=0 r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.2"), Proto: rules.ProtoTCP, MinPort: 82, MaxPort: 82,
				Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "b"},
		},
		{
			"timers strtoll semantics",
			strings.Fields("-i vip=192.0.2.1 -m type=DSR -t conn-drain=10s,nat-timeout=abc,persist-timeout=+7 -o sg=g r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR,
				ConnDrain: 10, PersistTimeout: 7, ServerGroup: "g"},
		},
		{
			"numeric port ignores trailing garbage, leading zeros",
			strings.Fields("-i vip=192.0.2.1,port=0080x -m type=DSR -o sg=g r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
				Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR, ServerGroup: "g"},
		},
		{
			"proxy-src is dropped when the final type is not NAT",
			strings.Fields("-i vip=192.0.2.1 -m type=NAT,proxy-src=10.0.0.1 -m type=DSR -o sg=g r"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR, ServerGroup: "g"},
		},
		{
			"operands after the name are ignored, options after it too",
			strings.Fields("-i vip=192.0.2.1 -m type=DSR -o sg=g r extra -e"),
			rules.Rule{Name: "r", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR, ServerGroup: "g"},
		},
		{
			"19-char name",
			strings.Fields("-i vip=192.0.2.1 -m type=DSR -o sg=g abcdefghijklmnopqrs"),
			rules.Rule{Name: "abcdefghijklmnopqrs", VIP: ip("192.0.2.1"), Proto: rules.ProtoTCP, Algo: rules.AlgoRoundRobin, Topo: rules.TopoDSR, ServerGroup: "g"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CreateRule(tt.argv)
			if err != nil {
				t.Fatalf("unexpected error %q", err.Lines)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCreateRuleErrors(t *testing.T) {
	const ok = "-i vip=192.0.2.1,port=80 -m lbalg=rr,type=DSR -o servergroup=sg1 r1"
	tests := []struct {
		name string
		argv []string
		want []string
	}{
		{"no name", strings.Fields("-i vip=192.0.2.1 -m type=DSR -o sg=g"),
			[]string{"missing mandatory arguments - please refer to 'ilbadm create-rule' subcommand description in ilbadm(1M)"}},
		{"nothing", nil,
			[]string{"missing mandatory arguments - please refer to 'ilbadm create-rule' subcommand description in ilbadm(1M)"}},
		{"name too long", strings.Fields("-i vip=192.0.2.1 -m type=DSR -o sg=g abcdefghijklmnopqrst"),
			[]string{"rule name abcdefghijklmnopqrst is too long - must not exceed 19 chars"}},
		{"no vip", strings.Fields("-i port=80 -m type=DSR -o sg=g r"), []string{"address family is invalid"}},
		{"no servergroup", strings.Fields("-i vip=192.0.2.1 -m type=DSR r"), []string{"servergroup name missing"}},
		{"no type", strings.Fields("-i vip=192.0.2.1 -m lbalg=rr -o sg=g r"), []string{"lbalg or type is unspecified"}},
		{"no -m", strings.Fields("-i vip=192.0.2.1 -o sg=g r"), []string{"lbalg or type is unspecified"}},
		{"NAT without proxy-src", strings.Fields("-i vip=192.0.2.1 -m type=NAT -o sg=g r"),
			[]string{"proxy-src is either missing or its address family does not match that of the VIP address"}},
		{"NAT proxy-src family mismatch", strings.Fields("-i vip=192.0.2.1 -m type=NAT,proxy-src=2001:db8::1 -o sg=g r"),
			[]string{"proxy-src is either missing or its address family does not match that of the VIP address"}},
		{"proxy-src before type=NAT", strings.Fields("-i vip=192.0.2.1 -m proxy-src=10.0.0.1,type=NAT -o sg=g r"),
			[]string{"proxy-src: proxy-src not allowed"}},
		{"proxy-src alias before type", strings.Fields("-i vip=192.0.2.1 -m nat-src=10.0.0.1,type=NAT -o sg=g r"),
			[]string{"nat-src: proxy-src not allowed"}},
		{"proxy-src with HALF-NAT", strings.Fields("-i vip=192.0.2.1 -m type=HALF-NAT,proxy-src=10.0.0.1 -o sg=g r"),
			[]string{"proxy-src: proxy-src not allowed"}},
		{"proxy-src host name", strings.Fields("-i vip=192.0.2.1 -m type=NAT,proxy-src=localhost -o sg=g r"),
			[]string{"proxy-src: address is invalid"}},
		{"pmask before vip", strings.Fields("-p -m lbalg=rr,type=DSR,pmask=24 -i vip=192.0.2.1 -o sg=g r"),
			[]string{"option 'pmask' requires that VIP be specified first", "pmask: library error"}},
		{"pmask alias before vip", strings.Fields("-p -m persist=24 -i vip=192.0.2.1 -o sg=g r"),
			[]string{"option 'pmask' requires that VIP be specified first", "persist: library error"}},
		{"pmask without -p (manual example 3 ftprule)", strings.Fields("-e -i vip=81.0.0.10,port=ftp -m lbalg=hash-ip-port,type=DSR,pmask=24 -o servergroup=ftpgroup ftprule"),
			[]string{"use of stickymask requires -p option"}},
		{"-p without vip", strings.Fields("-p -m type=DSR -o sg=g r"), []string{"trouble seting default persistence mask"}},
		{"pmask 0", strings.Fields("-p -i vip=192.0.2.1 -m type=DSR,pmask=0 -o sg=g r"),
			[]string{"invalid pmask provided (AF mismatch?)", "pmask: library error"}},
		{"pmask 33 v4", strings.Fields("-p -i vip=192.0.2.1 -m type=DSR,pmask=/33 -o sg=g r"),
			[]string{"invalid pmask provided (AF mismatch?)", "pmask: library error"}},
		{"pmask garbage", strings.Fields("-p -i vip=192.0.2.1 -m type=DSR,pmask=24x -o sg=g r"),
			[]string{"invalid pmask provided", "pmask: library error"}},
		{"pmask non-numeric", strings.Fields("-p -i vip=192.0.2.1 -m type=DSR,pmask=/ -o sg=g r"),
			[]string{"invalid pmask provided", "pmask: library error"}},
		{"port 70000", strings.Fields("-i vip=10.0.0.1,port=70000 -m type=DSR -o sg=g r"),
			[]string{"invalid port value 70000 specified", "port: library error"}},
		{"port 0", strings.Fields("-i vip=10.0.0.1,port=0 -m type=DSR -o sg=g r"),
			[]string{"invalid port value 0 specified", "port: library error"}},
		{"port range reversed", strings.Fields("-i vip=10.0.0.1,port=90-80 -m type=DSR -o sg=g r"),
			[]string{"invalid port value 80 specified", "port: library error"}},
		{"port range equal", strings.Fields("-i vip=10.0.0.1,port=80-80 -m type=DSR -o sg=g r"),
			[]string{"invalid port value 80 specified", "port: library error"}},
		{"port range with name", strings.Fields("-i vip=10.0.0.1,port=80-http -m type=DSR -o sg=g r"),
			[]string{"invalid port value http specified", "port: library error"}},
		{"unknown service", strings.Fields("-i vip=10.0.0.1,port=nosuchservice -m type=DSR -o sg=g r"),
			[]string{"port: servicename does not exist in nameservices"}},
		{"service range", strings.Fields("-i vip=10.0.0.1,port=http-https -m type=DSR -o sg=g r"),
			[]string{"port: servicename does not exist in nameservices"}},
		{"bracketed ipv4 vip", strings.Fields("-i vip=[10.0.0.1] -m type=DSR -o sg=g r"),
			[]string{"use of '[]' only valid with IPv6 addresses", "vip: library error"}},
		{"unclosed bracket vip", strings.Fields("-i vip=[2001:db8::1 -m type=DSR -o sg=g r"),
			[]string{"vip: syntax failure - refer to ilbadm(1M)"}},
		{"host name vip", strings.Fields("-i vip=localhost -m type=DSR -o sg=g r"),
			[]string{"vip: address is invalid"}},
		{"empty vip", strings.Fields("-i vip= -m type=DSR -o sg=g r"), []string{"vip: missing value"}},
		{"unknown protocol", strings.Fields("-i vip=10.0.0.1,protocol=foo -m type=DSR -o sg=g r"),
			[]string{"protocol: protocol does not exist in protocol database"}},
		{"numeric protocol", strings.Fields("-i vip=10.0.0.1,protocol=6 -m type=DSR -o sg=g r"),
			[]string{"protocol: protocol does not exist in protocol database"}},
		{"bad lbalg", strings.Fields("-i vip=10.0.0.1 -m lbalg=random,type=DSR -o sg=g r"),
			[]string{"lbalg: LB algorithm is invalid"}},
		{"bad type", strings.Fields("-i vip=10.0.0.1 -m lbalg=rr,type=full -o sg=g r"),
			[]string{"type: operation type is invalid"}},
		{"hc-port ALL", strings.Fields("-i vip=10.0.0.1 -m type=DSR -h hc-name=h,hc-port=ALL -o sg=g r"),
			[]string{"hc-port: invalid value  - refer to ilbadm(1M)"}},
		{"hc-port 0", strings.Fields("-i vip=10.0.0.1 -m type=DSR -h hc-name=h,hc-port=0 -o sg=g r"),
			[]string{"illegal number for hcport 0", "hc-port: library error"}},
		{"hc-port 65536", strings.Fields("-i vip=10.0.0.1 -m type=DSR -h hcp=65536 -o sg=g r"),
			[]string{"illegal number for hcport 65536", "hcp: library error"}},
		{"conn-drain 0", strings.Fields("-i vip=10.0.0.1 -m type=DSR -t conn-drain=0 -o sg=g r"),
			[]string{"conn-drain: invalid value  - refer to ilbadm(1M)"}},
		{"persist-timeout non-numeric", strings.Fields("-i vip=10.0.0.1 -m type=DSR -t persist-timeout=x -o sg=g r"),
			[]string{"persist-timeout: invalid value  - refer to ilbadm(1M)"}},
		{"nat-timeout negative", strings.Fields("-i vip=10.0.0.1 -m type=DSR -t nat-timeout=-1 -o sg=g r"),
			[]string{"nat-timeout: invalid value  - refer to ilbadm(1M)"}},
		{"timer too big", strings.Fields("-i vip=10.0.0.1 -m type=DSR -t nat-timeout=4294967296 -o sg=g r"),
			[]string{"nat-timeout: invalid value  - refer to ilbadm(1M)"}},
		{"bad keyword", strings.Fields("-i vip=10.0.0.1,foo=bar -m type=DSR -o sg=g r"), []string{"bad keyword foo"}},
		{"keyword of another option", strings.Fields("-i lbalg=rr -m type=DSR -o sg=g r"), []string{"bad keyword lbalg"}},
		{"missing =", strings.Fields("-i vip -m type=DSR -o sg=g r"), []string{"vip: assignment '=' missing"}},
		{"empty name", []string{"-i", "vip=192.0.2.1", "-m", "type=DSR", "-o", "sg=g", ""}, []string{"invalid argument(s) - see man page"}},
		{"option after the name is ignored", append(strings.Fields(ok), "-x"), nil},
		{"unknown option before name", strings.Fields("-e -x " + ok), []string{"bad or misplaced option -x"}},
		{"unknown grouped option", strings.Fields("-xe " + ok), []string{"bad or misplaced option create-rule"}},
		{"missing option argument", strings.Fields("-i vip=10.0.0.1 -m type=DSR -o sg=g -i"),
			[]string{"missing option-argument for i"}},
		{"first error wins: value before grammar", strings.Fields("-i port=70000,foo -m type=DSR -o sg=g r"),
			[]string{"invalid port value 70000 specified", "port: library error"}},
		{"first error wins: option order", strings.Fields("-m type=bogus -i vip=bogus -o sg=g r"),
			[]string{"type: operation type is invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CreateRule(tt.argv)
			var got []string
			if err != nil {
				got = err.Lines
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCreateRuleArgvName(t *testing.T) {
	_, err := CreateRuleArgv([]string{"create-rl", "-z"})
	if err == nil || err.Error() != "bad or misplaced option -z" {
		t.Errorf("got %v", err)
	}
	_, err = CreateRuleArgv([]string{"CREATE-RL", "-ze"})
	if err == nil || err.Error() != "bad or misplaced option CREATE-RL" {
		t.Errorf("got %v", err)
	}
}

func TestParsePortRangeAndVIP(t *testing.T) {
	for _, tt := range []struct {
		in       string
		min, max uint16
		err      string
	}{
		{"80", 80, 80, ""},
		{"5000-5009", 5000, 5009, ""},
		{"65535", 65535, 65535, ""},
		{"http", 80, 80, ""},
		{"HTTP", 80, 80, ""}, // case-insensitive superset of getservbyname
		{"www", 80, 80, ""},  // alias
		{"65536", 0, 0, "invalid port value 65536 specified\nport: library error"},
		{"99999999999999999999999", 0, 0, "invalid port value 99999999999999999999999 specified\nport: library error"},
		{"80-", 0, 0, "invalid port value  specified\nport: library error"},
		{"-80", 0, 0, "port: servicename does not exist in nameservices"},
	} {
		min, max, err := ParsePortRange(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || min != tt.min || max != tt.max {
			t.Errorf("%q: %d-%d %v", tt.in, min, max, err)
		}
	}
	for _, tt := range []struct{ in, want, err string }{
		{"10.0.0.1", "10.0.0.1", ""},
		{"2001:db8::1", "2001:db8::1", ""},
		{"[2001:db8::1]", "2001:db8::1", ""},
		{"[2001:db8::1]junk", "2001:db8::1", ""}, // ignored, as in C
		{"[10.0.0.1]", "", "use of '[]' only valid with IPv6 addresses\nvip: library error"},
		{"10.0.0.256", "", "vip: address is invalid"},
		{"fe80::1%eth0", "", "vip: address is invalid"},
		{"[fe80::1", "", "vip: syntax failure - refer to ilbadm(1M)"},
	} {
		a, err := ParseVIP(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || a.String() != tt.want {
			t.Errorf("%q: %v %v", tt.in, a, err)
		}
	}
}

func TestLookupProtocol(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint8
		ok   bool
	}{
		{"tcp", 6, true}, {"TCP", 6, true}, {"Tcp", 6, true}, {"udp", 17, true}, {"UDP", 17, true},
		{"icmp", 1, true}, // passes ilbadm; ilbd rejects it
		{"6", 0, false}, {"", 0, false}, {"nope", 0, false},
	} {
		got, ok := LookupProtocol(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q: %d %v", tt.in, got, ok)
		}
	}
	if ProtocolDBName(6) != "tcp" || ProtocolDBName(17) != "udp" {
		t.Errorf("ProtocolDBName")
	}
}

func TestCStrtol(t *testing.T) {
	for _, tt := range []struct {
		in   string
		v    int64
		used int
	}{
		{"12", 12, 2}, {" \t+12x", 12, 5}, {"-3", -3, 2}, {"x", 0, 0}, {"", 0, 0}, {"+", 0, 0},
		{"99999999999999999999", 1<<63 - 1, 20}, {"-99999999999999999999", -1 << 63, 21},
	} {
		v, used := cStrtol(tt.in)
		if v != tt.v || used != tt.used {
			t.Errorf("%q: %d %d", tt.in, v, used)
		}
	}
}
