package dataplane

import (
	"bytes"
	"log"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/rules"
)

// Wrong sampled checksums on a port lead to one warning naming the port, the interface and the
// fix; correct ones to none, and the warning is not repeated within csumWarnEvery.
func TestChecksumWarning(t *testing.T) {
	cfg := rules.Config{}
	cfg.CreateServerGroup("sg")
	cfg.AddServer("sg", rules.ServerSpec{Addr: benchServer[0]})
	if err := cfg.CreateRule(rules.Rule{Name: "web", Enabled: true, VIP: benchVIP, Proto: rules.ProtoTCP,
		MinPort: 80, MaxPort: 80, Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "sg"}); err != nil {
		t.Fatal(err)
	}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&cfg, 1, func(string) uint64 { return 1 }))
	eng, err := datapath.New(datapath.Config{Snapshot: snap, Ports: []datapath.PortConfig{{
		MAC: benchMAC, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("192.0.2.1/24")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	dp := &Dataplane{engine: eng, log: log.New(&logBuf, "", 0), names: []string{"net_af_packet0"},
		devices: []string{"net_af_packet0,iface=lbc"}}
	state := make([]csumWatch, 1)
	clock := int64(1)
	send := func(corrupt bool, n int) {
		f, err := benchSegment(benchClient, benchSrc, benchVIP, 1000, 80, &layers.TCP{SYN: true})
		if err != nil {
			t.Fatal(err)
		}
		if corrupt {
			f[14+20+16] ^= 0xff
		}
		buf := make([]byte, len(f), 2048)
		for range n {
			eng.BeginBurst(clock)
			copy(buf, f)
			eng.Process(buf[:len(f)], 0)
			clock += int64(2 * time.Millisecond) // past the publication interval
			eng.EndBurst()
		}
	}
	now := time.Now()
	send(false, 64*20)
	if w := dp.checkChecksums(state, now); len(w) != 0 {
		t.Fatalf("warnings for correct checksums: %q", w)
	}
	send(true, 64*10)
	w := dp.checkChecksums(state, now.Add(csumWatchEvery))
	if len(w) != 1 || !strings.Contains(w[0], "port net_af_packet0") || !strings.Contains(w[0], "lbc") ||
		!strings.Contains(w[0], "ethtool -K PEER tx off tso off gso off") || !strings.Contains(w[0], "10 of 10 sampled") {
		t.Fatalf("warnings %q", w)
	}
	send(true, 64*10)
	if w := dp.checkChecksums(state, now.Add(2*csumWatchEvery)); len(w) != 0 {
		t.Fatalf("repeated within %v: %q", csumWarnEvery, w)
	}
	send(true, 64*10)
	if w := dp.checkChecksums(state, now.Add(csumWarnEvery+3*csumWatchEvery)); len(w) != 1 {
		t.Fatalf("no warning after %v: %q", csumWarnEvery, w)
	}
	if n := strings.Count(logBuf.String(), "warning:"); n != 2 {
		t.Fatalf("%d warnings logged, want 2:\n%s", n, logBuf.String())
	}
}
