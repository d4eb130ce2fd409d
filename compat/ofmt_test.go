package compat

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// table opens an ofmt on a builder, failing the test on error.
func table(t *testing.T, tmpl []Field, list, defaults string, flags OfmtFlags, rows int) (*Ofmt, *strings.Builder) {
	t.Helper()
	var b strings.Builder
	o, err := NewOfmt(&b, tmpl, list, defaults, flags, rows)
	if err != nil {
		t.Fatalf("NewOfmt: %v", err)
	}
	return o, &b
}

// ruleRow returns a Row callback for a rule.
func ruleRow(r *rules.Rule, ids ...string) func(string) (string, bool) {
	return func(f string) (string, bool) { return RuleValue(r, ids, f) }
}

func TestOfmtWorkedExample(t *testing.T) {
	r1 := &rules.Rule{Name: "rule1", Enabled: true, VIP: ip("10.0.0.10"), Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
		Algo: rules.AlgoRoundRobin, Topo: rules.TopoNAT, ServerGroup: "sg1"}
	web := &rules.Rule{Name: "webtcp", Enabled: true, VIP: ip("203.0.113.10"), Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
		Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "sg1"}
	o, b := table(t, RuleFields(r1.VIP), "", RuleDefaultFields, 0, 0)
	o.Row(ruleRow(r1))
	o.Row(ruleRow(web))
	want := "RULENAME            STATUS LBALG       TYPE    PROTOCOL VIP         PORT\n" +
		"rule1               E      roundrobin  NAT     TCP  10.0.0.10       80\n" +
		// HALF-NAT fills TYPE's 8 columns: it overflows by one, and TCP gives that
		// column back (width 5 shrinks to 4), so VIP starts where it does for NAT.
		"webtcp              E      roundrobin  HALF-NAT TCP 203.0.113.10    80\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	lines := strings.Split(b.String(), "\n")
	if strings.Index(lines[1], "10.0.0.10") != strings.Index(lines[2], "203.0.113.10") {
		t.Errorf("VIP columns not aligned")
	}
}

func TestOfmtOverflowChain(t *testing.T) {
	tmpl := []Field{{"A", 4}, {"B", 4}, {"C", 4}, {"D", 4}}
	o, b := table(t, tmpl, "", "", 0, 0)
	vals := map[string]string{"A": "aaaaaaa", "B": "b", "C": "cc", "D": "dd"}
	o.Row(func(f string) (string, bool) { return vals[f], true })
	// aaaaaaa overflows by 4; B (1 char) gives back 3, C gives back 1 (keeping its
	// value), D is last and unpadded.
	want := "A   B   C   D\naaaaaaa b cc dd\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	// A value exactly as wide as its column also overflows (>=).
	o, b = table(t, tmpl, "A,B", "", 0, 0)
	o.Row(func(f string) (string, bool) { return map[string]string{"A": "aaaa", "B": "b"}[f], true })
	if want := "A   B\naaaa b\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestOfmtHeaderRepetition(t *testing.T) {
	for _, tt := range []struct {
		rows    int
		n       int
		headers []int // data row numbers (1-based) preceded by a header
	}{
		{0, 70, []int{1, 24, 47, 70}},
		{24, 48, []int{1, 24, 47}},
		{5, 10, []int{1, 5, 9}},
	} {
		o, b := table(t, []Field{{"N", 5}}, "", "", 0, tt.rows)
		for i := 1; i <= tt.n; i++ {
			o.Row(func(string) (string, bool) { return fmt.Sprint(i), true })
		}
		var got []int
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		for i, l := range lines {
			if l == "N" {
				var next int
				fmt.Sscan(lines[i+1], &next)
				got = append(got, next)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.headers) {
			t.Errorf("rows=%d: headers before %v, want %v", tt.rows, got, tt.headers)
		}
	}
	// No header in parsable or multiline mode, however many rows.
	o, b := table(t, []Field{{"N", 5}}, "N", "", OfmtParsable, 0)
	for i := 0; i < 30; i++ {
		o.Row(func(string) (string, bool) { return "x", true })
	}
	if strings.Contains(b.String(), "N") {
		t.Errorf("parsable output has a header")
	}
}

func TestOfmtParsable(t *testing.T) {
	r6 := &rules.Rule{Name: "rule6", VIP: ip("2001:db8::10"), MinPort: 80, MaxPort: 80}
	r1 := &rules.Rule{Name: "rule1", VIP: ip("10.0.0.10"), MinPort: 80, MaxPort: 80, HCName: `a\b`}
	tests := []struct {
		list string
		r    *rules.Rule
		want string
	}{
		{"rulename,vip,port", r1, "rule1:10.0.0.10:80\n"},          // §2.2
		{"rulename,vip,port", r6, "rule6:2001\\:db8\\:\\:10:80\n"}, // §2.2
		{"VIP", r6, "2001:db8::10\n"},                              // one field: no escaping
		{"hc-name,vip", r1, "a\\\\b:10.0.0.10\n"},                  // backslash escaped
		{"hc-name", r1, "a\\b\n"},                                  // ... but not alone
		{"rulename,proxy-src,pmask", r1, "rule1::\n"},              // empty stays empty
		{"rulename,protocol", r1, "rule1:?\n"},                     // cannot determine
		{"pmask", r1, "\n"},                                        // single empty field
		{"rulename,,vip,", r1, "rule1:10.0.0.10\n"},                // strtok skips empties
		{"RuleName,Rulename", r1, "rule1:rule1\n"},                 // repeats allowed
	}
	for _, tt := range tests {
		o, b := table(t, RuleFieldsV6, tt.list, "", OfmtParsable, 0)
		o.Row(ruleRow(tt.r))
		if b.String() != tt.want {
			t.Errorf("%q: got %q, want %q", tt.list, b.String(), tt.want)
		}
	}
}

func TestOfmtUndefAndUnknown(t *testing.T) {
	r := &rules.Rule{Name: "noport", VIP: ip("192.0.2.1"), Proto: 1, Algo: 9, Topo: rules.TopoDSR, ServerGroup: "g"}
	o, b := table(t, RuleFieldsV4, "RULENAME,PORT,PROTOCOL,LBALG,PROXY-SRC,PMASK,HC-NAME,HC-PORT,SERVERS,TYPE", "", 0, 0)
	o.Row(ruleRow(r))
	want := "RULENAME            PORT      PROTOCOL LBALG   PROXY-SRC                        PMASK HC-NAME             HC-PORT SERVERS             TYPE\n" +
		"noport              ?         ?    ?           --                               --    --                  --      --                  DSR\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	// A nil callback prints "?" everywhere.
	o, b = table(t, []Field{{"A", 3}, {"B", 3}}, "", "", 0, 0)
	o.Row(nil)
	if b.String() != "A  B\n?  ?\n" {
		t.Errorf("got %q", b.String())
	}
}

func TestOfmtMultiline(t *testing.T) {
	r := &rules.Rule{Name: "rule1", Enabled: true, VIP: ip("80.0.0.2"), Proto: rules.ProtoTCP, MinPort: 80, MaxPort: 80,
		Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, HCName: "hc1", ServerGroup: "sg1"}
	o, b := table(t, RuleFields(r.VIP), RuleFullFields, "", OfmtMultiline, 0)
	o.Row(ruleRow(r, "_sg1.0", "_sg1.1"))
	rec := "       RULENAME: rule1\n" +
		"         STATUS: E\n" +
		"           PORT: 80\n" +
		"       PROTOCOL: TCP\n" +
		"          LBALG: roundrobin\n" +
		"           TYPE: HALF-NAT\n" +
		"      PROXY-SRC: --\n" +
		"          PMASK: --\n" +
		"        HC-NAME: hc1\n" +
		"        HC-PORT: ANY\n" +
		"     CONN-DRAIN: 0\n" +
		"    NAT-TIMEOUT: 120\n" +
		"PERSIST-TIMEOUT: 0\n" +
		"    SERVERGROUP: sg1\n" +
		"            VIP: 80.0.0.2\n" +
		"        SERVERS: _sg1.0,_sg1.1\n"
	if b.String() != rec {
		t.Errorf("got\n%s\nwant\n%s", b.String(), rec)
	}
	// Records are separated by one empty line; the width follows the longest selected name.
	sticky := &rules.Rule{Name: "r2", Sticky: true, PMaskBits: 24, Proto: rules.ProtoUDP, Topo: rules.TopoNAT,
		ProxySrcStart: ip("10.0.0.1"), ProxySrcEnd: ip("10.0.0.1"), HCName: "h", HCPort: 8080}
	o, b = table(t, RuleFieldsV4, "pmask,nat-timeout,persist-timeout,proxy-src,hc-port,port", "", OfmtMultiline, 0)
	o.Row(ruleRow(r))
	o.Row(ruleRow(sticky))
	want := "          PMASK: --\n    NAT-TIMEOUT: 120\nPERSIST-TIMEOUT: 0\n      PROXY-SRC: --\n        HC-PORT: ANY\n           PORT: 80\n" +
		"\n" +
		"          PMASK: /24\n    NAT-TIMEOUT: 60\nPERSIST-TIMEOUT: 60\n      PROXY-SRC: 10.0.0.1-10.0.0.1\n        HC-PORT: 8080\n           PORT: ?\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	o, b = table(t, RuleFieldsV4, "vip,port", "", OfmtMultiline, 0)
	o.Row(ruleRow(r))
	if want := " VIP: 80.0.0.2\nPORT: 80\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestOfmtShowServergroup(t *testing.T) {
	// §2.3 (header confirmed by ORA-SG).
	g := []rules.Server{
		{ID: "_webgroup.0", Addr: ip("192.168.89.11"), Enabled: true},
		{ID: "_webgroup.1", Addr: ip("192.168.89.12"), Enabled: true},
		{ID: "_webgroup.2", Addr: ip("192.168.89.13"), Enabled: true},
	}
	o, b := table(t, SGFields(&g[0]), "", SGDefaultFields, 0, 0)
	for i := range g {
		o.Row(func(f string) (string, bool) { return SGValue("webgroup", &g[i], f) })
	}
	o.Row(func(f string) (string, bool) { return SGValue("emptygroup", nil, f) })
	ported := rules.Server{ID: "_sg3.10", Addr: ip("1.1.1.15"), MinPort: 9001, MaxPort: 9001}
	o.Row(func(f string) (string, bool) { return SGValue("sg3", &ported, f) })
	ranged := rules.Server{ID: "_sg4.0", Addr: ip("1.1.1.1"), MinPort: 9001, MaxPort: 9006}
	o.Row(func(f string) (string, bool) { return SGValue("sg4", &ranged, f) })
	want := "SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\n" +
		"webgroup       _webgroup.0         --      --      192.168.89.11\n" +
		"webgroup       _webgroup.1         --      --      192.168.89.12\n" +
		"webgroup       _webgroup.2         --      --      192.168.89.13\n" +
		"emptygroup     --                  --      --      --\n" +
		"sg3            _sg3.10             9001    9001    1.1.1.15\n" +
		"sg4            _sg4.0              9001    9006    1.1.1.1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// Solaris' family swap: the IPv4 group gets the 39-column IP_ADDRESS.
	if SGFields(&g[0])[4].Width != 39 || SGFields(nil)[4].Width != 15 {
		t.Errorf("SGFields quirk")
	}
	o, b = table(t, SGFields(&g[0]), "ip_address,sgname", "", 0, 0)
	o.Row(func(f string) (string, bool) { return SGValue("webgroup", &g[0], f) })
	if want := "IP_ADDRESS" + strings.Repeat(" ", 29) + "SGNAME\n192.168.89.11" + strings.Repeat(" ", 26) + "webgroup\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestOfmtShowServer(t *testing.T) {
	old := lookupAddr
	defer func() { lookupAddr = old }()
	lookupAddr = func(a netip.Addr) ([]string, error) {
		if a == ip("35.0.0.10") {
			return []string{"web0.example.com."}, nil
		}
		return nil, errors.New("not found")
	}
	ss := []rules.Server{
		{ID: "_sg1.0", Addr: ip("35.0.0.10"), MinPort: 80, MaxPort: 80, Enabled: true},
		{ID: "_sg1.2", Addr: ip("35.0.0.12"), MinPort: 80, MaxPort: 80},
		{ID: "_sg1.3", Addr: ip("35.0.0.13")},
	}
	o, b := table(t, ServerFields(ip("10.0.0.1")), "", ServerDefaultFields, 0, 0)
	for i := range ss {
		o.Row(func(f string) (string, bool) { return ServerValue("rule1", "sg1", &ss[i], f) })
	}
	want := "SERVERID            ADDRESS         PORT RULENAME            STATUS SERVERGROUP\n" +
		"_sg1.0              35.0.0.10       80   rule1               E      sg1\n" +
		"_sg1.2              35.0.0.12       80   rule1               D      sg1\n" +
		"_sg1.3              35.0.0.13       ?    rule1               D      sg1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	o, b = table(t, ServerFieldsV4, "serverid,hostname", "", OfmtParsable, 0)
	for i := range ss[:2] {
		o.Row(func(f string) (string, bool) { return ServerValue("rule1", "sg1", &ss[i], f) })
	}
	if want := "_sg1.0:web0.example.com\n_sg1.2:\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestOfmtHealthCheckAndStats(t *testing.T) {
	// MAN Example 8 (matches the code widths).
	hcs := []rules.HealthCheck{
		{Name: "hc1", Timeout: 2, Count: 1, Interval: 10, DefPing: true, Test: "tcp"},
		{Name: "hc2", Timeout: 2, Count: 1, Interval: 10, Test: "/usr/local/bin/probe"},
	}
	o, b := table(t, HCFields, "all", "", 0, 0)
	for i := range hcs {
		o.Row(func(f string) (string, bool) { return HCValue(&hcs[i], f) })
	}
	want := "HCNAME        TIMEOUT COUNT   INTERVAL DEF_PING TEST\n" +
		"hc1           2       1       10       Y        tcp\n" +
		"hc2           2       1       10       N        /usr/local/bin/probe\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// MAN Example 10, show-stats -o BYTES_D,TIME.
	o, b = table(t, StatFields, "BYTES_D,TIME", "", 0, 0)
	o.Row(func(f string) (string, bool) {
		return map[string]string{"BYTES_D": "196", "TIME": "2009-07-20:16.14.25"}[f], true
	})
	if want := "BYTES_D   TIME\n196       2009-07-20:16.14.25\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	o, b = table(t, StatItemizedFields, "SERVERNAME,PKT_P,BYTES_P", "", 0, 0)
	o.Row(func(f string) (string, bool) {
		return map[string]string{"SERVERNAME": "_sg1.0", "PKT_P": "0", "BYTES_P": "0"}[f], true
	})
	if want := "SERVERNAME          PKT_P   BYTES_P\n_sg1.0              0       0\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestOfmtAll(t *testing.T) {
	o, b := table(t, SGFieldsV4, "ALL", SGDefaultFields, 0, 0)
	o.Row(func(f string) (string, bool) { return f, true })
	if want := "SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\nSGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\n"; b.String() != want {
		t.Errorf("got %q", b.String())
	}
	if got := len(o.Fields()); got != 5 {
		t.Errorf("all selected %d fields", got)
	}
	// No list and no defaults is every field too.
	o, _ = table(t, RuleFieldsV4, "", "", 0, 0)
	if len(o.Fields()) != 16 {
		t.Errorf("default all: %d", len(o.Fields()))
	}
}

func TestOfmtErrors(t *testing.T) {
	tests := []struct {
		list  string
		flags OfmtFlags
		exact bool
		want  string
	}{
		{"rulename,foo", 0, false, "ofmt_open failed: ignoring unknown output field: `foo'"},
		{"rulename,foo,bar", 0, false, "ofmt_open failed: ignoring unknown output fields: `foo' `bar'"},
		{"foo,vip", OfmtParsable, false, "ofmt_open failed: unknown output field: `foo'"},
		{"foo,vip,bar", OfmtParsable, false, "ofmt_open failed: unknown output fields: `foo' `bar'"},
		{"foo,bar", 0, false, "ofmt_open failed: no valid output fields"},
		{",", 0, false, "ofmt_open failed: no valid output fields"},
		{"all", OfmtParsable, false, "ofmt_open failed: output field `all' invalid in parsable mode"},
		{"", OfmtParsable, false, "ofmt_open failed: output fields must be specified in parsable mode"},
		{"vip", OfmtParsable | OfmtMultiline, false, "ofmt_open failed: multiline mode incompatible with parsable mode"},
		{"", 0, true, "ofmt_open failed: Not enough space"},
		{"", OfmtParsable, true, "ofmt_open failed: output fields must be specified in parsable mode"},
		// ilbadm's 80-byte buffer cuts ofmt's text (after the prefix) at 79 bytes.
		{"vip,aaaaaaaaaa,bbbbbbbbbb,cccccccccc,dddddddddd", 0, false,
			"ofmt_open failed: ignoring unknown output fields: `aaaaaaaaaa' `bbbbbbbbbb' `cccccccccc' `ddddddd"},
	}
	for _, tt := range tests {
		var err *CLIError
		if tt.exact {
			_, err = NewOfmtList(nil, RuleFieldsV4, tt.list, tt.flags, 0)
		} else {
			_, err = NewOfmt(nil, RuleFieldsV4, tt.list, "", tt.flags, 0)
		}
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v, want %q", tt.list, err, tt.want)
		}
	}
	if _, err := NewOfmt(nil, nil, "a", "", 0, 0); err == nil || err.Error() != "ofmt_open failed: no template provided for fields" {
		t.Errorf("no template: %v", err)
	}
}

func TestOfmtLongValues(t *testing.T) {
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("_sg1.%d", i)
	}
	r := &rules.Rule{Name: "r"}
	o, b := table(t, RuleFieldsV4, "servers", "", OfmtParsable, 0)
	o.Row(ruleRow(r, ids...))
	if got := len(strings.TrimSuffix(b.String(), "\n")); got != ofmtValueMax {
		t.Errorf("value length %d, want %d", got, ofmtValueMax)
	}
}

func TestRuleValueDefaults(t *testing.T) {
	for _, tt := range []struct {
		r     rules.Rule
		field string
		want  string
		ok    bool
	}{
		{rules.Rule{Topo: rules.TopoNAT, Proto: rules.ProtoTCP}, "NAT-TIMEOUT", "120", true},
		{rules.Rule{Topo: rules.TopoHalfNAT, Proto: rules.ProtoUDP}, "NAT-TIMEOUT", "60", true},
		{rules.Rule{Topo: rules.TopoDSR, Proto: rules.ProtoTCP}, "NAT-TIMEOUT", "0", true},
		{rules.Rule{Topo: rules.TopoNAT, NATTimeout: 5}, "nat-timeout", "5", true},
		{rules.Rule{Sticky: true}, "PERSIST-TIMEOUT", "60", true},
		{rules.Rule{Sticky: true, PersistTimeout: 7}, "PERSIST-TIMEOUT", "7", true},
		{rules.Rule{}, "PERSIST-TIMEOUT", "0", true},
		{rules.Rule{ConnDrain: 4294967295}, "CONN-DRAIN", "4294967295", true},
		{rules.Rule{MinPort: 5000, MaxPort: 5009}, "PORT", "5000-5009", true},
		{rules.Rule{}, "PORT", "", false},
		{rules.Rule{HCPort: 80}, "HC-PORT", "", true},
		{rules.Rule{ProxySrcStart: ip("2001:db8::1"), ProxySrcEnd: ip("2001:db8::4")}, "PROXY-SRC", "2001:db8::1-2001:db8::4", true},
		{rules.Rule{Algo: rules.AlgoHashIPVIP}, "LBALG", "hash-ip-vip", true},
		{rules.Rule{Topo: 7}, "TYPE", "", false},
		{rules.Rule{}, "NOSUCH", "", false},
	} {
		got, ok := RuleValue(&tt.r, nil, tt.field)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s of %+v = %q %v, want %q %v", tt.field, tt.r, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := RuleValue(nil, nil, "RULENAME"); ok {
		t.Errorf("nil rule")
	}
	if AlgoName(rules.AlgoHashIPPort) != "hash-ip-port" || TopoName(rules.TopoHalfNAT) != "HALF-NAT" || ProtoName(17) != "UDP" || ProtoName(1) != "" {
		t.Errorf("names")
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestOfmtWriteError(t *testing.T) {
	o, err := NewOfmt(failWriter{}, HCFields, "", "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	o.Row(nil)
	if o.Err() == nil {
		t.Errorf("write error not kept")
	}
}
