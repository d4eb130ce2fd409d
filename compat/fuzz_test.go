package compat

import (
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// FuzzCreateRule checks that no argv makes CreateRule panic, and that accepted rules
// satisfy the invariants the rest of the system relies on.
func FuzzCreateRule(f *testing.F) {
	for _, s := range []string{
		"-e -i vip=10.0.0.1,port=80 -m lbalg=rr,type=DSR -o sg=sg1 r1",
		"-p -i vip=[2001:db8::1],port=1-2 -m type=NAT,proxy-src=[2001:db8::2]-[2001:db8::3],pmask=/64 -o sg=g r",
		"-m pmask=24 -i vip=10.0.0.1 -xe",
		"-h hc-name=h,hcp=ANY -t conn-drain=1,nat-timeout=,persist-timeout=9 -i",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := CreateRule(strings.Fields(s))
		if err != nil {
			if len(err.Lines) == 0 {
				t.Fatalf("empty error for %q", s)
			}
			return
		}
		if r.Name == "" || len(r.Name) > rules.MaxRuleName || !r.VIP.IsValid() || r.ServerGroup == "" ||
			r.Topo == 0 || r.Algo == 0 || r.MaxPort < r.MinPort || (r.MinPort == 0) != (r.MaxPort == 0) {
			t.Fatalf("accepted bad rule %+v from %q", r, s)
		}
		if r.Topo == rules.TopoNAT && r.ProxySrcStart.Is4() != r.VIP.Is4() {
			t.Fatalf("NAT rule with mismatched proxy-src %+v", r)
		}
		if r.Sticky && (r.PMaskBits < 1 || r.PMaskBits > 128) {
			t.Fatalf("bad pmask %+v", r)
		}
	})
}

// FuzzParseServers checks ParseServers never panics and never returns more than
// 256 servers per value; host names never reach a real resolver.
func FuzzParseServers(f *testing.F) {
	old := lookupHost
	defer func() { lookupHost = old }()
	lookupHost = func(name string) ([]netip.Addr, error) {
		if name == "h" {
			return []netip.Addr{netip.MustParseAddr("192.0.2.9")}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, s := range []string{"server=10.0.0.1-10.0.0.9:80-81,[::1]-[::3]:http", "servers=h,x-1,[::", "server=1.2.3.4:-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := ParseServers(s)
		if err != nil {
			return
		}
		if n := strings.Count(s, ",") + 1; len(specs) > 256*n {
			t.Fatalf("%d servers from %d values", len(specs), n)
		}
		for _, sp := range specs {
			if !sp.Addr.IsValid() || sp.MaxPort < sp.MinPort {
				t.Fatalf("bad spec %+v from %q", sp, s)
			}
		}
	})
}

// FuzzOfmt feeds arbitrary field lists and values to the table engine.
func FuzzOfmt(f *testing.F) {
	f.Add("rulename,vip,port", "a:b\\c", uint8(0))
	f.Add("all", "", uint8(2))
	f.Fuzz(func(t *testing.T, list, val string, flags uint8) {
		o, err := NewOfmtList(io.Discard, RuleFieldsV6, list, OfmtFlags(flags&7), int(flags>>3))
		if err != nil {
			return
		}
		for i := 0; i < 3; i++ {
			o.Row(func(string) (string, bool) { return val, len(val)%2 == 0 })
		}
	})
}
