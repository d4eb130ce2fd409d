package dataplane

// The benchmark table (`make bench`): ilbd's worker loop (Dataplane.poll, the code ilbd runs on
// its lcores) through DPDK on generated traffic, next to dpdk-testpmd in io and macswap mode on
// the same device type (net_pcap, infinite_rx) and the same capture, in the same run.
//
// TestBenchTable is the driver (ILB_BENCH_TABLE=path.csv). It runs every case in a process of
// its own (this test binary again, TestBenchCase with ILB_BENCH_CASE set), so that each case
// gets a fresh EAL sized for its capture and nothing of one case's tables lingers in the next
// one's caches or heap, and it runs dpdk-testpmd on each capture between them. Nothing runs
// concurrently: the machine's cores are the workers'.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
	"github.com/ilbgo/ilb/rules"
)

// Environment of the benchmark table.
const (
	envBenchTable   = "ILB_BENCH_TABLE"   // driver: write the CSV here
	envBenchCase    = "ILB_BENCH_CASE"    // child: the case to run (benchSpec.String)
	envBenchDir     = "ILB_BENCH_DIR"     // child: where the captures live
	envBenchOnly    = "ILB_BENCH_ONLY"    // driver: run only the cases whose name contains this
	envBenchProfile = "ILB_BENCH_PROFILE" // child: write a CPU profile of the measured run here
	envBenchSeconds = "ILB_BENCH_SECONDS" // measured seconds per case (default 2)
)

// benchTableMode reports whether this process is the table's driver or one of its cases:
// TestMain then leaves EAL to the case, which sizes it for its capture.
func benchTableMode() bool {
	return os.Getenv(envBenchTable) != "" || os.Getenv(envBenchCase) != ""
}

// benchSpec is one row of the table.
type benchSpec struct {
	Case    string // established, reply, new
	Topo    string // half-nat, full-nat, dsr
	Family  string // ipv4, ipv6
	Flows   int
	Workers int
}

func (s benchSpec) String() string {
	return fmt.Sprintf("%s/%s/%s/%d/%d", s.Case, s.Topo, s.Family, s.Flows, s.Workers)
}

func parseBenchSpec(v string) (benchSpec, error) {
	f := strings.Split(v, "/")
	if len(f) != 5 {
		return benchSpec{}, fmt.Errorf("bench case %q: want case/topology/family/flows/workers", v)
	}
	flows, err1 := strconv.Atoi(f[3])
	workers, err2 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || flows < 1 || workers < 1 || workers > 2 {
		return benchSpec{}, fmt.Errorf("bench case %q: bad flows or workers", v)
	}
	return benchSpec{f[0], f[1], f[2], flows, workers}, nil
}

// input names the capture a case replays. Client traffic does not depend on the topology (the
// client always sends to the VIP), so established and new cases of every topology share one;
// replies carry what the engine chose (server, NAT port), so each reply case has its own.
func (s benchSpec) input() string {
	if s.Case == "reply" {
		return fmt.Sprintf("reply-%s-%s-%d-w%d", s.Topo, s.Family, s.Flows, s.Workers)
	}
	return fmt.Sprintf("%s-%s-%d-w%d", s.Case, s.Family, s.Flows, s.Workers)
}

// benchNewCapacity is the connection table of the new-connection cases: smaller than the
// million flows they cycle through, so every SYN finds no entry (the least recently active
// half-open one is evicted to make room, which is the rest of a connection's life cycle).
const benchNewCapacity = 1 << 17

// benchTableCases lists the rows: established traffic at three table sizes for every
// topology and family, replies, new connections, and two workers where the machine has two
// CPUs for them.
func benchTableCases() []benchSpec {
	var out []benchSpec
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, topo := range []string{"half-nat", "full-nat", "dsr"} {
			for _, flows := range []int{1, 10000, 1000000} {
				out = append(out, benchSpec{"established", topo, fam, flows, 1})
			}
		}
		for _, topo := range []string{"half-nat", "full-nat"} {
			out = append(out, benchSpec{"reply", topo, fam, 1000000, 1})
		}
		for _, topo := range []string{"half-nat", "full-nat"} {
			out = append(out, benchSpec{"new", topo, fam, 1000000, 1})
		}
	}
	if a, b := dpdktest.TwoCPUs(); a != b {
		for _, topo := range []string{"half-nat", "full-nat"} {
			for _, flows := range []int{10000, 1000000} {
				out = append(out, benchSpec{"established", topo, "ipv4", flows, 2})
			}
		}
		out = append(out, benchSpec{"new", "half-nat", "ipv4", 1000000, 2})
	}
	return out
}

// benchResult is what a case reports to the driver (one JSON line on stdout).
type benchResult struct {
	Spec         string
	Inputs       []string // the captures, one per worker queue
	Mpps         float64
	NsPerPkt     float64 // worker CPU time per packet: workers / rate
	ConnPerSec   float64 // new cases: connections opened per second
	BytesPerConn float64
	P50, P99     float64 // µs, rx burst start to tx burst end, at half the measured rate
	P999         float64
	GCs          uint32 // garbage collections during the measured run (none expected: nothing allocates)
	Err          string
}

const benchResultTag = "BENCHRESULT "

// TestBenchTable runs the whole table and writes it as CSV (make bench).
func TestBenchTable(t *testing.T) {
	out := os.Getenv(envBenchTable)
	if out == "" {
		t.Skip("the benchmark table runs with " + envBenchTable + "=file.csv (make bench)")
	}
	if os.Geteuid() != 0 {
		t.Skip("the benchmark table needs root (DPDK, hugepages)")
	}
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Fatalf("dpdk-testpmd not found (apt-get install dpdk): %v", err)
	}
	var cases []benchSpec
	for _, spec := range benchTableCases() {
		if only := os.Getenv(envBenchOnly); only == "" || strings.Contains(spec.String(), only) {
			cases = append(cases, spec)
		}
	}
	start := time.Now()
	n := runBenchTable(t, testpmd, cases, out, os.Stdout)
	fmt.Printf("wrote %s (%d rows) in %s\n", out, n, time.Since(start).Round(time.Second))
}

// benchCSVHeader is the first line of bin/bench.csv.
const benchCSVHeader = "case,topology,family,flows,workers,mpps,ns_per_pkt,testpmd_mpps,ratio,conn_per_s,bytes_per_conn,p50_us,p99_us,p999_us"

// runBenchTable runs cases, and testpmd io and macswap on each distinct capture, prints the
// table on tty and writes the CSV to out; it returns the number of rows.
func runBenchTable(t *testing.T, testpmd string, cases []benchSpec, out string, tty io.Writer) int {
	dir, err := os.MkdirTemp("", "ilbbench")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	type row struct {
		spec      benchSpec
		res       benchResult
		macswap   float64
		isTestpmd bool
		mode      string
	}
	var rows []row
	macswap := map[string]float64{} // input → testpmd macswap Mpps
	start := time.Now()
	for _, spec := range cases {
		res := runBenchCase(t, spec, dir)
		t.Logf("%-40s %6.2f Mpps  (%s elapsed)", spec, res.Mpps, time.Since(start).Round(time.Second))
		if res.Err != "" {
			t.Errorf("%s: %s", spec, res.Err)
		}
		if res.GCs != 0 {
			t.Logf("%s: %d garbage collections during the measured run", spec, res.GCs)
		}
		in := spec.input()
		if _, done := macswap[in]; !done && len(res.Inputs) > 0 {
			for _, mode := range []string{"io", "macswap"} {
				mpps, err := runTestpmd(testpmd, mode, res.Inputs)
				if err != nil {
					t.Errorf("testpmd %s on %s: %v", mode, in, err)
				}
				t.Logf("%-40s %6.2f Mpps", "testpmd-"+mode+" "+in, mpps)
				if mode == "macswap" {
					macswap[in] = mpps
				}
				rows = append(rows, row{spec: spec, isTestpmd: true, mode: mode, res: benchResult{Mpps: mpps}})
			}
		}
		rows = append(rows, row{spec: spec, res: res, macswap: macswap[in]})
	}

	var csv bytes.Buffer
	csv.WriteString(benchCSVHeader + "\n")
	tw := tabwriter.NewWriter(tty, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\ttopology\tfamily\tflows\tworkers\tMpps\tns/pkt\ttestpmd\tratio\tconn/s\tB/conn\tp50 µs\tp99 µs\tp99.9 µs\t")
	num := func(v float64, prec int) string {
		if v == 0 || math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	for _, r := range rows {
		var f []string
		if r.isTestpmd {
			f = []string{"testpmd-" + r.mode, "", r.spec.Family, strconv.Itoa(r.spec.Flows), strconv.Itoa(r.spec.Workers),
				num(r.res.Mpps, 2), num(float64(r.spec.Workers)*1e3/r.res.Mpps, 1), "", "", "", "", "", "", ""}
		} else {
			ratio := 0.0
			if r.macswap > 0 {
				ratio = r.res.Mpps / r.macswap
			}
			f = []string{r.spec.Case, r.spec.Topo, r.spec.Family, strconv.Itoa(r.spec.Flows), strconv.Itoa(r.spec.Workers),
				num(r.res.Mpps, 2), num(r.res.NsPerPkt, 1), num(r.macswap, 2), num(ratio, 3), num(r.res.ConnPerSec, 0),
				num(r.res.BytesPerConn, 1), num(r.res.P50, 2), num(r.res.P99, 2), num(r.res.P999, 2)}
		}
		csv.WriteString(strings.Join(f, ",") + "\n")
		fmt.Fprintln(tw, strings.Join(f, "\t")+"\t")
	}
	tw.Flush()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, csv.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestBenchTableSmoke runs the table's machinery on small cases, as make bench does: each case
// in its own process on DPDK, testpmd on its capture, the CSV. The figures are not judged (this
// is not a benchmark), only that every column is there and measured, and that the worker
// forwarded every frame it received (a case fails otherwise).
func TestBenchTableSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (DPDK in a child process)")
	}
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Skip("dpdk-testpmd is not installed (apt-get install dpdk)")
	}
	t.Setenv(envBenchSeconds, "0.3")
	out := filepath.Join(t.TempDir(), "bench.csv")
	var tty bytes.Buffer
	cases := []benchSpec{{"established", "full-nat", "ipv4", 10000, 1}, {"new", "half-nat", "ipv4", 1000000, 1}}
	if n := runBenchTable(t, testpmd, cases, out, &tty); n != 6 {
		t.Fatalf("%d rows, want 2 cases and testpmd's two modes on each capture:\n%s", n, tty.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != benchCSVHeader {
		t.Fatalf("header %q", lines[0])
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 14 {
			t.Fatalf("row %q has %d fields", l, len(f))
		}
		rows[f[0]+"/"+f[1]] = f
	}
	num := func(row []string, col int) float64 {
		v, err := strconv.ParseFloat(row[col], 64)
		if err != nil || v <= 0 {
			t.Fatalf("row %v: column %d is %q", row, col, row[col])
		}
		return v
	}
	est, nw, tpmd := rows["established/full-nat"], rows["new/half-nat"], rows["testpmd-macswap/"]
	if est == nil || nw == nil || tpmd == nil || rows["testpmd-io/"] == nil {
		t.Fatalf("rows missing:\n%s", b)
	}
	if r := num(est, 5) / num(est, 7); math.Abs(r-num(est, 8)) > 0.002 {
		t.Errorf("ratio %v, want mpps/testpmd_mpps = %.3f", est[8], r)
	}
	num(est, 10) // bytes per connection
	if p50, p99 := num(est, 11), num(est, 12); p99 < p50 {
		t.Errorf("p99 %v below p50 %v", p99, p50)
	}
	num(nw, 9) // connections per second
	num(tpmd, 5)
	t.Logf("\n%s", tty.String())

	// A reply case: the servers' side of established flows, captured after the handshakes.
	res := runBenchCase(t, benchSpec{"reply", "half-nat", "ipv6", 1000, 1}, t.TempDir())
	if res.Err != "" || res.Mpps <= 0 {
		t.Fatalf("reply case: %+v", res)
	}
}

// runBenchCase runs one case in a child process and returns what it reported.
func runBenchCase(t *testing.T, spec benchSpec, dir string) benchResult {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchCase$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envBenchCase+"="+spec.String(), envBenchDir+"="+dir, envBenchTable+"=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	for _, line := range strings.Split(string(outb), "\n") {
		if v, ok := strings.CutPrefix(line, benchResultTag); ok {
			var r benchResult
			if jerr := json.Unmarshal([]byte(v), &r); jerr != nil {
				return benchResult{Err: jerr.Error()}
			}
			return r
		}
	}
	return benchResult{Err: fmt.Sprintf("no result (%v): %s %s", err, lastLines(string(outb), 10), lastLines(stderr.String(), 10))}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// testpmdSeconds is how long testpmd forwards; its rate is the median of the per-second
// figures after the first.
const testpmdSeconds = 4

var rxPPS = regexp.MustCompile(`Rx-pps:\s+(\d+)`)

// runTestpmd forwards the captures (one rx queue each) with dpdk-testpmd in mode on one
// forwarding lcore per queue and returns its rate in Mpps.
func runTestpmd(bin, mode string, inputs []string) (float64, error) {
	a, b := dpdktest.TwoCPUs()
	lcores := fmt.Sprintf("0@%d,1@%d", a, b)
	if len(inputs) == 2 {
		lcores = fmt.Sprintf("0@%d,1@%d,2@%d", a, a, b)
	}
	vdev := "net_pcap_tpmd0"
	for _, in := range inputs {
		vdev += ",rx_pcap=" + in
	}
	vdev += ",infinite_rx=1"
	mbufs := 32768
	for _, in := range inputs {
		if st, err := os.Stat(in); err == nil {
			mbufs += int(st.Size() / 60) // at least one mbuf per captured frame
		}
	}
	prefix := fmt.Sprintf("ilbtpmd%d", os.Getpid())
	q := strconv.Itoa(len(inputs))
	mem := []string{"--in-memory"}
	if !dpdktest.Hugepages() {
		mem = []string{"--no-huge", "-m", "2048", "--no-shconf"}
	}
	eal := append([]string{"--lcores=" + lcores, "--main-lcore=0", "--no-pci", "--no-telemetry"}, mem...)
	cmd := exec.Command(bin, append(eal, "--file-prefix="+prefix, "--log-level=4", "--vdev="+vdev, "--",
		"--forward-mode="+mode, "--nb-cores="+q, "--rxq="+q, "--txq="+q, "--rxd=1024", "--txd=1024",
		"--burst=32", "--mbuf-size=256", "--total-num-mbufs="+strconv.Itoa(mbufs), "--stats-period=1")...)
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Wait for forwarding to start (a million-frame capture takes a moment to load), then
	// let it run.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !bytes.Contains(out.Bytes(), []byte("Rx-pps")) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(testpmdSeconds * time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(filepath.Join("/var/run/dpdk", prefix))
	var pps []float64
	for _, m := range rxPPS.FindAllStringSubmatch(out.String(), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		pps = append(pps, v)
	}
	if len(pps) < 3 {
		return 0, fmt.Errorf("no rate in testpmd's output: %s", lastLines(out.String(), 15))
	}
	pps = pps[1:] // the first period includes the start
	slices.Sort(pps)
	return pps[len(pps)/2] / 1e6, nil
}

// TestBenchCase runs the case named by ILB_BENCH_CASE (a child of TestBenchTable).
func TestBenchCase(t *testing.T) {
	v := os.Getenv(envBenchCase)
	if v == "" {
		t.Skip("run by TestBenchTable (make bench)")
	}
	res := benchResult{Spec: v}
	if err := runBenchSpec(v, &res); err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Println(benchResultTag + string(b))
}

// benchWorld is the addressing of the benchmark: clients on one connected subnet, servers and
// full-NAT proxy addresses on another, two VIPs (ten proxy addresses each give a full-NAT
// rule 10 × 61439 ports, so a million full-NAT flows need two rules).
type benchWorld struct {
	v6                 bool
	portAddrs          []netip.Prefix
	vips               [2]netip.Addr
	servers            []netip.Addr
	proxyLo, proxyHi   [2]netip.Addr
	clients            []netip.Addr
	clientNet, srvSide netip.Addr // our address on each subnet
}

const benchClients = 200

func newBenchWorld(v6 bool) benchWorld {
	w := benchWorld{v6: v6}
	if !v6 {
		w.portAddrs = []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("192.0.2.1/24")}
		w.clientNet, w.srvSide = netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("192.0.2.1")
		w.vips = [2]netip.Addr{netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("203.0.113.11")}
		for i := 0; i < 3; i++ {
			w.servers = append(w.servers, netip.AddrFrom4([4]byte{192, 0, 2, byte(11 + i)}))
		}
		w.proxyLo = [2]netip.Addr{netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.110")}
		w.proxyHi = [2]netip.Addr{netip.MustParseAddr("192.0.2.109"), netip.MustParseAddr("192.0.2.119")}
		for i := 0; i < benchClients; i++ {
			w.clients = append(w.clients, netip.AddrFrom4([4]byte{198, 51, 100, byte(2 + i)}))
		}
		return w
	}
	w.portAddrs = []netip.Prefix{netip.MustParsePrefix("2001:db8:1::1/64"), netip.MustParsePrefix("2001:db8:2::1/64")}
	w.clientNet, w.srvSide = netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("2001:db8:2::1")
	w.vips = [2]netip.Addr{netip.MustParseAddr("2001:db8:10::10"), netip.MustParseAddr("2001:db8:10::11")}
	for i := 0; i < 3; i++ {
		w.servers = append(w.servers, netip.MustParseAddr(fmt.Sprintf("2001:db8:2::%x", 0x11+i)))
	}
	w.proxyLo = [2]netip.Addr{netip.MustParseAddr("2001:db8:2::100"), netip.MustParseAddr("2001:db8:2::110")}
	w.proxyHi = [2]netip.Addr{netip.MustParseAddr("2001:db8:2::109"), netip.MustParseAddr("2001:db8:2::119")}
	for i := 0; i < benchClients; i++ {
		w.clients = append(w.clients, netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%x", 2+i)))
	}
	return w
}

// flow i of the case: its client, source port and VIP.
func (w *benchWorld) flow(i int) (netip.Addr, uint16, netip.Addr) {
	return w.clients[i%benchClients], uint16(10000 + i/benchClients), w.vips[(i/benchClients)%2]
}

// snapshot is one round-robin TCP rule per VIP on port 80 over the servers.
func (w *benchWorld) snapshot(topo string) (*atomic.Pointer[rules.Snapshot], error) {
	cfg := rules.Config{}
	if err := cfg.CreateServerGroup("sg"); err != nil {
		return nil, err
	}
	for _, s := range w.servers {
		if _, err := cfg.AddServer("sg", rules.ServerSpec{Addr: s}); err != nil {
			return nil, err
		}
	}
	for k, vip := range w.vips {
		r := rules.Rule{Name: fmt.Sprintf("web%d", k), Enabled: true, VIP: vip, Proto: rules.ProtoTCP,
			MinPort: 80, MaxPort: 80, Algo: rules.AlgoRoundRobin, ServerGroup: "sg"}
		switch topo {
		case "half-nat":
			r.Topo = rules.TopoHalfNAT
		case "full-nat":
			r.Topo, r.ProxySrcStart, r.ProxySrcEnd = rules.TopoNAT, w.proxyLo[k], w.proxyHi[k]
		case "dsr":
			r.Topo = rules.TopoDSR
		default:
			return nil, fmt.Errorf("unknown topology %q", topo)
		}
		if err := cfg.CreateRule(r); err != nil {
			return nil, err
		}
	}
	ids := map[string]uint64{}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&cfg, 1, func(name string) uint64 { // a rule ID per rule, as ilbd gives
		if _, ok := ids[name]; !ok {
			ids[name] = uint64(len(ids) + 1)
		}
		return ids[name]
	}))
	return snap, nil
}

var (
	benchServerMAC = func(i int) [6]byte { return [6]byte{0x02, 0, 0, 0, 0xbf, byte(i)} }
)

// benchTCP writes a TCP segment (6 payload bytes for IPv4, a 64-byte frame on the wire; none
// for IPv6, 78 bytes) from src to dst into b and returns its length.
func benchTCP(b []byte, srcMAC, dstMAC [6]byte, src, dst netip.Addr, sport, dport uint16, flags uint8, seq, ack uint32) int {
	copy(b[0:6], dstMAC[:])
	copy(b[6:12], srcMAC[:])
	var l4 []byte
	var pseudo uint32
	payload := 6
	if src.Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := b[14:34]
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:], uint16(20+20+payload))
		binary.BigEndian.PutUint32(ip[4:], 0x00004000) // id 0, DF
		ip[8], ip[9] = 64, 6
		ip[10], ip[11] = 0, 0
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], datapath.Checksum(ip))
		l4 = b[34 : 34+20+payload]
		pseudo = sum16(s4[:]) + sum16(d4[:]) + 6 + uint32(20+payload)
	} else {
		payload = 0
		binary.BigEndian.PutUint16(b[12:], 0x86dd)
		ip := b[14:54]
		binary.BigEndian.PutUint32(ip[0:], 6<<28)
		binary.BigEndian.PutUint16(ip[4:], uint16(20+payload))
		ip[6], ip[7] = 6, 64
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
		l4 = b[54 : 54+20+payload]
		pseudo = sum16(s16[:]) + sum16(d16[:]) + 6 + uint32(20+payload)
	}
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint32(l4[4:], seq)
	binary.BigEndian.PutUint32(l4[8:], ack)
	l4[12], l4[13] = 5<<4, flags
	binary.BigEndian.PutUint16(l4[14:], 512)
	l4[16], l4[17], l4[18], l4[19] = 0, 0, 0, 0
	for i := 20; i < len(l4); i++ {
		l4[i] = 0
	}
	s := sum16(l4) + pseudo
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	binary.BigEndian.PutUint16(l4[16:], ^uint16(s))
	return int(l4Offset(src)) + len(l4)
}

func l4Offset(a netip.Addr) int {
	if a.Is4() {
		return 34
	}
	return 54
}

func sum16(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

// neighbourFrame teaches the engine that ip is at mac: an ARP reply, or an NDP advertisement.
func (w *benchWorld) neighbourFrame(ip netip.Addr, mac [6]byte, ours netip.Addr) []byte {
	if ip.Is4() {
		f := benchARPReply(ip, mac)
		o := ours.As4()
		copy(f[14+24:14+28], o[:])
		return f
	}
	eth := &layers.Ethernet{SrcMAC: mac[:], DstMAC: benchMAC[:], EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: ip.AsSlice(), DstIP: ours.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	icmp.SetNetworkLayerForChecksum(ip6)
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: ip.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: mac[:]}}}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip6, icmp, na); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// benchFlowState is what the handshake of one flow left: where the engine sent it.
type benchFlowState struct {
	server netip.Addr
	srvIdx int
	// what the server sees as the client (the client itself, or full NAT's proxy address and port)
	peer     netip.Addr
	peerPort uint16
}

// runBenchSpec builds the case's engines and captures, initialises EAL on them, runs the
// worker loop and measures it.
func runBenchSpec(v string, res *benchResult) error {
	spec, err := parseBenchSpec(v)
	if err != nil {
		return err
	}
	dir := os.Getenv(envBenchDir)
	if dir == "" {
		return fmt.Errorf("%s is not set", envBenchDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w := newBenchWorld(spec.Family == "ipv6")
	snap, err := w.snapshot(spec.Topo)
	if err != nil {
		return err
	}
	capacity := max(1024, int(ceilPow2(uint64(spec.Flows))))
	if spec.Case == "new" {
		capacity = benchNewCapacity
	}
	engines := make([]*datapath.Engine, spec.Workers)
	for k := range engines {
		eng, err := datapath.New(datapath.Config{Snapshot: snap, ConnCapacity: capacity, StickyCapacity: 1024,
			WorkerIndex: k, WorkerCount: spec.Workers, Handoff: spec.Workers > 1,
			Ports: []datapath.PortConfig{{MAC: benchMAC, Addrs: w.portAddrs}}})
		if err != nil {
			return err
		}
		eng.BeginBurst(benchClock)
		for i, s := range w.servers {
			eng.Process(w.neighbourFrame(s, benchServerMAC(i), w.srvSide), 0)
		}
		for _, c := range w.clients {
			eng.Process(w.neighbourFrame(c, benchClient, w.clientNet), 0)
		}
		eng.EndBurst()
		engines[k] = eng
	}
	owner := func(c netip.Addr) int { return datapath.OwnerOfClient(c, spec.Workers) }

	// Open the flows (established and reply cases): SYN, the server's SYN+ACK, the client's
	// ACK, through the engine that owns the client, as the wire would deliver them.
	var states []benchFlowState
	buf := make([]byte, 2048)
	if spec.Case != "new" {
		states = make([]benchFlowState, spec.Flows)
		for i := 0; i < spec.Flows; i++ {
			c, sport, vip := w.flow(i)
			eng := engines[owner(c)]
			if i%256 == 0 {
				if i > 0 {
					eng.EndBurst()
				}
				for _, e := range engines {
					if e != eng {
						e.BeginBurst(benchClock)
						e.EndBurst()
					}
				}
				eng.BeginBurst(benchClock)
			}
			n := benchTCP(buf, benchClient, benchMAC, c, vip, sport, 80, tcpSYN, 0, 0)
			r := eng.Process(buf[:n], 0)
			if r.Action != datapath.ActionForward {
				if spec.Topo == "dsr" {
					continue // stateless: the replay needs no handshake
				}
				return fmt.Errorf("SYN of flow %d: %+v (%+v)", i, r, eng.Stats().Global)
			}
			st := benchFlowState{server: addrAt(buf, w.v6, true), peer: addrAt(buf, w.v6, false),
				peerPort: binary.BigEndian.Uint16(buf[l4Offset(c):])}
			st.srvIdx = slices.Index(w.servers, st.server)
			states[i] = st
			if spec.Topo == "dsr" {
				continue
			}
			n = benchTCP(buf, benchServerMAC(st.srvIdx), benchMAC, st.server, st.peer, 80, st.peerPort, tcpSYN|tcpACK, 0, 1)
			if r := eng.Process(buf[:n], 0); r.Action != datapath.ActionForward {
				return fmt.Errorf("SYN+ACK of flow %d: %+v", i, r)
			}
			n = benchTCP(buf, benchClient, benchMAC, c, vip, sport, 80, tcpACK, 1, 1)
			if r := eng.Process(buf[:n], 0); r.Action != datapath.ActionForward {
				return fmt.Errorf("ACK of flow %d: %+v", i, r)
			}
		}
		for _, e := range engines {
			e.EndBurst()
		}
	}

	// The captures: one per worker queue, each holding the flows its worker owns.
	inputs := make([]string, spec.Workers)
	for k := range inputs {
		inputs[k] = filepath.Join(dir, fmt.Sprintf("%s-q%d.pcap", spec.input(), k))
	}
	res.Inputs = inputs
	if _, err := os.Stat(inputs[0]); err != nil || spec.Case == "reply" {
		if err := writeBenchCaptures(spec, &w, states, inputs, owner); err != nil {
			return err
		}
	}

	// EAL, sized for the capture (net_pcap keeps every replayed frame in an mbuf).
	a, b := dpdktest.TwoCPUs()
	lcores := fmt.Sprintf("--lcores=0@%d,1@%d", a, b)
	if spec.Workers == 2 {
		lcores = fmt.Sprintf("--lcores=0@%d,1@%d,2@%d", a, a, b)
	}
	vdev := "--vdev=" + benchPort
	for _, in := range inputs {
		vdev += ",rx_pcap=" + in
	}
	vdev += ",infinite_rx=1"
	args := []string{"ilbbench", lcores, "--main-lcore=0", "--no-pci", "--no-telemetry", "--log-level=4",
		fmt.Sprintf("--file-prefix=ilbbench%d", os.Getpid()), vdev}
	if dpdktest.Hugepages() {
		args = append(args, "--in-memory")
	} else {
		args = append(args, "--no-huge", "-m", "2048", "--no-shconf")
	}
	if err := dpdk.Init(args); err != nil {
		return err
	}
	defer func() {
		dpdk.WaitAll()
		dpdk.Cleanup()
		os.RemoveAll(filepath.Join("/var/run/dpdk", fmt.Sprintf("ilbbench%d", os.Getpid())))
	}()
	mbufs := 32768
	if spec.Case == "new" || spec.Flows >= 10000 {
		mbufs += spec.Flows
	} else {
		mbufs += 1024
	}
	port, err := dpdk.PortByName(benchPort)
	if err != nil {
		return err
	}
	pool, err := dpdk.NewPktPool("ilbbench_pool", uint32(mbufs), 256, 256, dpdk.SocketAny)
	if err != nil {
		return err
	}
	q := uint16(spec.Workers)
	if err := port.Setup(dpdk.PortConf{RxQueues: q, TxQueues: q, RxDesc: ringDesc, TxDesc: ringDesc}, pool); err != nil {
		return err
	}
	dp := &Dataplane{ports: []dpdk.Port{port}, taps: []dpdk.Port{noTap}, pool: pool, engines: engines, engine: engines[0],
		lcores: dpdk.WorkerLcores()[:spec.Workers], log: log.New(os.Stderr, "", 0), exc: make([]exceptionCounters, 1),
		names: []string{benchPort}, tapNames: []string{""}, wstats: make([]workerCounters, spec.Workers)}
	if err := dp.setupRings(spec.Workers); err != nil {
		return err
	}
	dp.indexPorts()

	// The measured run allocates nothing, so the collector (left on, as in ilbd) has no reason
	// to run; one collection first clears the set-up's garbage.
	runtime.GC()
	secs := 2.0
	if s, err := strconv.ParseFloat(os.Getenv(envBenchSeconds), 64); err == nil && s > 0 {
		secs = s
	}
	runBenchWorkers(dp, 300*time.Millisecond, 0) // warm up (and the first pickup of the snapshot)
	before := dp.Stats().Global
	if p := os.Getenv(envBenchProfile); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rx, elapsed := runBenchWorkers(dp, time.Duration(secs*float64(time.Second)), 0)
	runtime.ReadMemStats(&ms1)
	res.GCs = ms1.NumGC - ms0.NumGC
	if os.Getenv(envBenchProfile) != "" {
		pprof.StopCPUProfile()
	}
	after := dp.Stats().Global
	res.Mpps = float64(rx) / elapsed.Seconds() / 1e6
	res.NsPerPkt = float64(spec.Workers) * 1e3 / res.Mpps
	var bytesTotal, capTotal int
	for _, e := range engines {
		bytesTotal += e.ConnTableBytes()
		capTotal += e.ConnCapacity()
	}
	res.BytesPerConn = float64(bytesTotal) / float64(capTotal)
	fwd := after.Forwarded - before.Forwarded
	if fwd < rx {
		return fmt.Errorf("received %d, forwarded %d: dropped %d, passed %d, no connection %d",
			rx, fwd, after.Dropped-before.Dropped, after.Passed-before.Passed, after.TCPNoConn-before.TCPNoConn)
	}
	if spec.Case == "new" {
		// Every SYN must have opened a connection: each evicts the oldest half-open one.
		opened := after.HalfOpenEvicted - before.HalfOpenEvicted + (after.ConnEntries - before.ConnEntries)
		if opened < rx*99/100 {
			return fmt.Errorf("%d SYNs opened only %d connections", rx, opened)
		}
		res.ConnPerSec = float64(opened) / elapsed.Seconds()
	}
	if spec.Workers == 1 {
		res.P50, res.P99, res.P999 = benchLatency(dp, res.Mpps/2)
	}
	return nil
}

// addrAt reads the destination (dst) or source address of the IP packet in frame.
func addrAt(frame []byte, v6, dst bool) netip.Addr {
	if !v6 {
		o := 14 + 12
		if dst {
			o += 4
		}
		return netip.AddrFrom4([4]byte(frame[o : o+4]))
	}
	o := 14 + 8
	if dst {
		o += 16
	}
	return netip.AddrFrom16([16]byte(frame[o : o+16]))
}

func ceilPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// writeBenchCaptures writes the case's frames, flow by flow, into the capture of the worker
// that owns each: client ACKs (established), the servers' ACKs to the client or to the proxy
// address (reply), client SYNs (new).
func writeBenchCaptures(spec benchSpec, w *benchWorld, states []benchFlowState, inputs []string, owner func(netip.Addr) int) error {
	files := make([]*os.File, len(inputs))
	bufs := make([]*bufio.Writer, len(inputs))
	pws := make([]*pcapgo.Writer, len(inputs))
	for k, in := range inputs {
		f, err := os.Create(in + ".tmp")
		if err != nil {
			return err
		}
		files[k], bufs[k] = f, bufio.NewWriterSize(f, 1<<20)
		pws[k] = pcapgo.NewWriter(bufs[k])
		if err := pws[k].WriteFileHeader(256, layers.LinkTypeEthernet); err != nil {
			return err
		}
	}
	frame := make([]byte, 256)
	ts := time.Unix(0, 0)
	for i := 0; i < spec.Flows; i++ {
		c, sport, vip := w.flow(i)
		var n int
		switch spec.Case {
		case "established":
			n = benchTCP(frame, benchClient, benchMAC, c, vip, sport, 80, tcpACK, 1, 1)
		case "new":
			n = benchTCP(frame, benchClient, benchMAC, c, vip, sport, 80, tcpSYN, 0, 0)
		case "reply":
			st := states[i]
			n = benchTCP(frame, benchServerMAC(st.srvIdx), benchMAC, st.server, st.peer, 80, st.peerPort, tcpACK, 1, 1)
		default:
			return fmt.Errorf("unknown case %q", spec.Case)
		}
		k := owner(c)
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: n, Length: n}
		if err := pws[k].WritePacket(ci, frame[:n]); err != nil {
			return err
		}
	}
	for k, in := range inputs {
		if err := bufs[k].Flush(); err != nil {
			return err
		}
		files[k].Close()
		if err := os.Rename(in+".tmp", in); err != nil {
			return err
		}
	}
	return nil
}

// runBenchWorkers runs every worker's loop on its lcore for d and returns the frames they
// received and the time they took. rate > 0 paces worker 0 instead (latency).
func runBenchWorkers(dp *Dataplane, d time.Duration, rate float64) (uint64, time.Duration) {
	n := len(dp.engines)
	got := make([]uint64, n)
	done := make(chan struct{}, n)
	start := time.Now()
	for k := 0; k < n; k++ {
		if err := dpdk.Launch(dp.lcores[k], func() int {
			wk := dp.newWorker(k)
			defer wk.io.Free()
			t0 := time.Now()
			var rx uint64
			for {
				el := time.Since(t0)
				if el >= d {
					break
				}
				rx += uint64(dp.poll(wk, benchClock+int64(el)))
			}
			dp.flush(wk)
			got[k] = rx
			done <- struct{}{}
			return 0
		}); err != nil {
			panic(err)
		}
	}
	for k := 0; k < n; k++ {
		<-done
	}
	for k := 0; k < n; k++ {
		dpdk.Wait(dp.lcores[k])
	}
	elapsed := time.Since(start)
	benchClock += int64(elapsed)
	// One more burst a second later publishes the counters (at most once per millisecond
	// of worker time).
	benchClock += int64(time.Second)
	for k := 0; k < n; k++ {
		dpdk.Launch(dp.lcores[k], func() int {
			wk := dp.newWorker(k)
			defer wk.io.Free()
			dp.poll(wk, benchClock)
			dp.flush(wk)
			return 0
		})
		dpdk.Wait(dp.lcores[k])
	}
	var total uint64
	for _, g := range got {
		total += g
	}
	return total, elapsed
}

// benchLatencySeconds is how long the latency probe runs.
const benchLatencySeconds = 0.5

// benchLatency offers worker 0 bursts at mpps (half its measured peak): each burst is received
// when its time comes, processed and transmitted at once, as the worker's next loop iteration
// would. It returns the p50, p99 and p99.9 of receive start to transmit end, in µs.
func benchLatency(dp *Dataplane, mpps float64) (float64, float64, float64) {
	if mpps <= 0 {
		return 0, 0, 0
	}
	gap := time.Duration(float64(dpdk.MaxBurst) / (mpps * 1e6) * 1e9)
	samples := make([]int64, 0, int(benchLatencySeconds*1e9/float64(gap))+16)
	done := make(chan struct{})
	dpdk.Launch(dp.lcores[0], func() int {
		wk := dp.newWorker(0)
		defer wk.io.Free()
		t0 := time.Now()
		next := time.Duration(0)
		for len(samples) < cap(samples) {
			for time.Since(t0) < next {
			}
			next += gap
			a := time.Since(t0)
			if dp.poll(wk, benchClock+int64(a)) == 0 {
				continue
			}
			wk.io.Send(0)
			samples = append(samples, int64(time.Since(t0)-a))
		}
		dp.flush(wk)
		close(done)
		return 0
	})
	<-done
	dpdk.Wait(dp.lcores[0])
	benchClock += int64(benchLatencySeconds*1e9) + int64(time.Second)
	slices.Sort(samples)
	pct := func(p float64) float64 {
		if len(samples) == 0 {
			return 0
		}
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))]) / 1e3
	}
	return pct(0.50), pct(0.99), pct(0.999)
}
