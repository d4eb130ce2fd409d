package rules

import (
	"fmt"
	"net/netip"
	"testing"
)

// bigConfig returns a configuration of nRules enabled half-NAT rules, each with its own group of
// nServers IPv6 servers (documentation addresses): the size snapshot builds must stay linear in.
func bigConfig(tb testing.TB, nRules, nServers int) *Config {
	tb.Helper()
	c := &Config{}
	for i := range nRules {
		g := fmt.Sprintf("sg%d", i)
		if err := c.CreateServerGroup(g); err != nil {
			tb.Fatal(err)
		}
		grp := c.Group(g)
		for j := range nServers {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i), 0, 0, 0, 0, 0, 0, 0, 0, byte(j >> 8), byte(j)})
			grp.Servers = append(grp.Servers, Server{ID: fmt.Sprintf("_%s.%d", g, j), Addr: a, MinPort: 8080, MaxPort: 8080, Enabled: true})
		}
		grp.LastID = nServers - 1
		vip := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 15: byte(i + 1)})
		r := Rule{Name: fmt.Sprintf("r%d", i), Enabled: true, VIP: vip, Proto: ProtoTCP, MinPort: 80, MaxPort: 80,
			Algo: AlgoRoundRobin, Topo: TopoHalfNAT, ServerGroup: g}
		if err := c.CreateRule(r); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

func BenchmarkSnapshotBuild50x1000(b *testing.B) {
	c := bigConfig(b, 50, 1000)
	ids := map[string]uint64{}
	for i, r := range c.Rules {
		ids[r.Name] = uint64(i + 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		Compile(c, 1, func(name string) uint64 { return ids[name] })
	}
}
