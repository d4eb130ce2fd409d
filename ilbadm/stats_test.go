package main

import (
	"net/netip"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
)

// fakeTables is a data plane whose counters grow by a known amount per sample.
type fakeTables struct {
	calls atomic.Int64
	busy  bool
}

func (f *fakeTables) Statistics() api.Statistics {
	n := uint64(f.calls.Add(1)) // 1 on the first sample, 2 on the second...
	srv := func(id string, k uint64) api.ServerStatistics {
		return api.ServerStatistics{ID: id, PktProcessed: 10 * k * n, BytesProcessed: 1000 * k * n}
	}
	return api.Statistics{NumRules: 2, Rules: []api.RuleStatistics{
		{Name: "r1", Instance: 1, PktDropped: 4 * n, BytesDropped: 196 * n, PktNotProcessed: 2 * n,
			BytesNotProcessed: 120 * n, ICMPEchoProcessed: n,
			Servers: []api.ServerStatistics{srv("_sg1.0", 1), srv("_sg1.1", 2)}},
		{Name: "r2", Instance: 2, PktDropped: 1, Servers: []api.ServerStatistics{srv("_sg1.0", 3)}},
	}}
}

func (f *fakeTables) NAT(max int) ([]api.NATEntry, error) {
	if f.busy {
		return nil, compat.StatusInProgress
	}
	all := []api.NATEntry{
		{Proto: 17, Client: netip.MustParseAddrPort("124.106.235.150:53688"), VIP: netip.MustParseAddrPort("85.0.0.1:1024"),
			NATSrc: netip.MustParseAddrPort("82.0.0.39:4127"), Server: netip.MustParseAddrPort("82.0.0.56:1024")},
		{Proto: 6, Client: netip.MustParseAddrPort("[2001:db8:1::2]:40000"), VIP: netip.MustParseAddrPort("[2001:db8:3::10]:80"),
			NATSrc: netip.MustParseAddrPort("[2001:db8:1::2]:40000"), Server: netip.MustParseAddrPort("[2001:db8:2::11]:8080")},
	}
	if max > 0 && max < len(all) {
		all = all[:max]
	}
	return all, nil
}

func (f *fakeTables) Persist(max int) ([]api.PersistEntry, error) {
	return []api.PersistEntry{{Rule: "rule2", Client: netip.MustParseAddr("124.106.235.0"), Server: netip.MustParseAddr("82.0.0.56")}}, nil
}

// Workers is two workers: one busy with a known CPU, one that never polled and whose CPU
// is unknown.
func (f *fakeTables) Workers() []api.WorkerStatistics {
	return []api.WorkerStatistics{
		{Worker: 0, Lcore: 1, CPU: 0, RxPackets: 12345678901, TxPackets: 12345678000, Conns: 1234,
			ConnCap: 262144, HandoffIn: 17, HandoffOut: 4242, Polls: 3000, BusyPolls: 1999},
		{Worker: 1, Lcore: 2, CPU: -1, ConnCap: 262144},
	}
}

func tablesDaemon(t *testing.T, tb api.Tables) string {
	t.Helper()
	return newDaemon(t, true, func(s *api.Service) { s.Tables = tb }).sock
}

func TestShowStatisticsSampling(t *testing.T) {
	sock := tablesDaemon(t, &fakeTables{})
	// Sample 1 is absolute (n=1); sample 2 prints the change per second (n=2 minus n=1).
	runSteps(t, sock, []step{
		{line: "show-statistics 1 2", stdout: `PKT_P   BYTES_P   PKT_U   BYTES_U   PKT_D   BYTES_D
60      6000      2       120       5       196
60      6000      2       120       4       196
`},
	})
	sock = tablesDaemon(t, &fakeTables{})
	runSteps(t, sock, []step{
		{line: "show-stats -A -r R1 -i 1 2", stdout: `SERVERNAME          PKT_P   BYTES_P
_sg1.0              10      1000
_sg1.1              20      2000
_sg1.0              20      2000
_sg1.1              40      4000
`},
	})
	sock = tablesDaemon(t, &fakeTables{})
	runSteps(t, sock, []step{
		{line: "show-stats -d -s _sg1.0 -i 1 2", stdout: `RULENAME            PKT_P   BYTES_P
r1                  10      1000
r2                  30      3000
r1                  10      1000
r2                  30      3000
`},
		{line: "show-stats -p -o PKT_P,ICMP_P -r r1", stdout: "90:3\n"},
		{line: "show-stats -v -r r1", stdout: "PKT_P   BYTES_P   PKT_U   BYTES_U   PKT_D   BYTES_D   ICMP_P  ICMP_D  ICMP2BIG_P ICMP2BIG_D NOMEMP_D NOPORTP_D\n120     12000     8       480       16      784       4       0       0          0          0       0\n"},
	})
	out, _, status := ilbadm(sock, "show-stats -t -o PKT_D")
	if status != 0 || !regexp.MustCompile(`^PKT_D   TIME\n\d+ +\d{4}-\d\d-\d\d:\d\d\.\d\d\.\d\d\n$`).MatchString(out) {
		t.Errorf("-t: %q", out)
	}
}

func TestShowStatisticsErrors(t *testing.T) {
	sock := tablesDaemon(t, &fakeTables{})
	runSteps(t, sock, []step{
		{line: "show-stats -r", stderr: "ilbadm: missing option-argument detected for r\n", status: 1},
		{line: "show-stats -r a -s b", stderr: "ilbadm: options -s and -r are mutually exclusive\n", status: 1},
		{line: "show-stats -i", stderr: "ilbadm: option -i requires either -r or -s\n", status: 1},
		{line: "show-stats -i -r a -v", stderr: "ilbadm: option -i and -v are mutually exclusive\n", status: 1},
		{line: "show-stats -p", stderr: "ilbadm: option -p requires -o\n", status: 1},
		{line: "show-stats -p -o PKT_P -v", stderr: "ilbadm: option -o and -v are mutually exclusive\n", status: 1},
		{line: "show-stats -p -o all", stderr: "ilbadm: option -p requires explicit field names\n", status: 1},
		{line: "show-stats -A -d", stderr: "ilbadm: options -d and -A are mutually exclusive\n", status: 1},
		{line: "show-stats 0", stderr: "ilbadm: illegal interval spec 0\n", status: 1},
		{line: "show-stats 1 x", stderr: "ilbadm: illegal count spec x\n", status: 1},
		{line: "show-stats -x", stderr: "ilbadm: bad or misplaced option -x\n", status: 1},
		{line: "show-stats -r nosuch", stderr: "ilbadm: rule name missing or specified rule not found\n", status: 1},
		{line: "show-stats -o foo", stderr: "ilbadm: ofmt_open failed: no valid output fields\n", status: 1},
		{line: "show-stats -o PKT_P,foo", stderr: "ilbadm: ofmt_open failed: ignoring unknown output field: `foo'\n", status: 1},
	})
}

func TestShowNATAndPersist(t *testing.T) {
	tb := &fakeTables{}
	sock := tablesDaemon(t, tb)
	runSteps(t, sock, []step{
		{line: "show-nat", stdout: " UDP: 124.106.235.150.53688 > 85.0.0.1.1024 >>> 82.0.0.39.4127 > 82.0.0.56.1024\n" +
			" TCP: 2001:db8:1::2.40000 > 2001:db8:3::10.80 >>> 2001:db8:1::2.40000 > 2001:db8:2::11.8080\n"},
		{line: "show-nat 1", stdout: " UDP: 124.106.235.150.53688 > 85.0.0.1.1024 >>> 82.0.0.39.4127 > 82.0.0.56.1024\n"},
		{line: "show-nat 0", stderr: "ilbadm: invalid value  - refer to ilbadm(1M)\n", status: 1},
		{line: "show-nat 1 2", stderr: "ilbadm: invalid value  - refer to ilbadm(1M)\n", status: 1},
		{line: "show-pt", stdout: "rule2: 124.106.235.0 --> 82.0.0.56\n"},
		{line: "show-persist x", stderr: "ilbadm: invalid value  - refer to ilbadm(1M)\n", status: 1},
	})
	tb.busy = true
	runSteps(t, sock, []step{{line: "show-nat", stderr: "ilbadm: operation is progress\n", status: 1}})
	// Without a data plane the tables are empty, never invented.
	runSteps(t, tablesDaemon(t, nil), []step{{line: "show-nat"}, {line: "show-persist"}})
}
