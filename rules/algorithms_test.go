package rules_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// Every registry entry is reachable by its lbalg name and alias through ilbadm's grammar, prints
// back as its name (show-rule, export-config), and has a selection function; a code with no
// entry is refused by validation and by the snapshot's engine side (no Algorithm).
func TestAlgorithmRegistry(t *testing.T) {
	if len(rules.Algorithms()) == 0 {
		t.Fatal("empty registry")
	}
	seen := map[rules.Algo]bool{}
	for _, a := range rules.Algorithms() {
		if a.Name == "" || a.Alias == "" || a.Pick == nil || seen[a.Code] {
			t.Fatalf("entry %+v: needs a name, an alias, a Pick and a unique code", a)
		}
		seen[a.Code] = true
		for _, v := range []string{a.Name, a.Alias, strings.ToUpper(a.Name)} {
			r, err := compat.CreateRule([]string{"-i", "vip=192.0.2.10,port=80", "-m", "lbalg=" + v + ",type=HALF-NAT", "-o", "servergroup=sg", "r1"})
			if err != nil || r.Algo != a.Code {
				t.Fatalf("lbalg=%s: %v, algo %d, want %d", v, err, r.Algo, a.Code)
			}
			if got, ok := compat.RuleValue(&r, nil, "LBALG"); !ok || got != a.Name || compat.AlgoName(r.Algo) != a.Name {
				t.Fatalf("lbalg=%s prints as %q", v, got)
			}
		}
		if err := rules.ValidateAlgo(&rules.Rule{Algo: a.Code}); err != nil {
			t.Fatalf("%s refused: %v", a.Name, err)
		}
		s := rules.NewSnapshot(1, []rules.SnapRule{{ID: 1, VIP: netip.MustParseAddr("192.0.2.10"), Algo: a.Code}})
		if s.Rules[0].Algorithm == nil || s.Rules[0].Algorithm.Code != a.Code {
			t.Fatalf("%s: compiled rule has no algorithm entry", a.Name)
		}
	}
	for _, code := range []rules.Algo{0, 5, 200} {
		if seen[code] {
			continue
		}
		var e *rules.Error
		if err := rules.ValidateAlgo(&rules.Rule{Algo: code}); !errors.As(err, &e) || e.Code != rules.CodeEINVAL {
			t.Fatalf("unknown code %d: %v, want EINVAL", code, err)
		}
		if compat.AlgoName(code) != "" || rules.LookupAlgo(code) != nil {
			t.Fatalf("unknown code %d has a name", code)
		}
		s := rules.NewSnapshot(1, []rules.SnapRule{{ID: 1, VIP: netip.MustParseAddr("192.0.2.10"), Algo: code}})
		if s.Rules[0].Algorithm != nil {
			t.Fatalf("unknown code %d compiled with an algorithm", code)
		}
	}
	if _, ok := compat.ParseAlgo("weighted"); ok {
		t.Fatal("an unknown lbalg name parsed")
	}
}
