package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
	"github.com/ilbgo/ilb/rules"
)

// The worker loop runs here over ring ports (rte_eth_from_rings): the test injects
// frames that the "NIC" and the "TAP" receive and collects what the loop transmits on
// each, with no kernel involved.
func TestMain(m *testing.M) {
	if benchTableMode() {
		os.Exit(m.Run()) // each case initialises EAL for its own capture
	}
	// The worker benchmark replays a capture through a net_pcap port, which EAL must be
	// given at initialisation.
	vdev, err := benchVdev()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dataplane tests:", err)
		os.Exit(1)
	}
	vdev2, err := bench2Vdev()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dataplane tests:", err)
		os.Exit(1)
	}
	// Three lcores: the main one and two workers, for the two-worker benchmark (worker 2
	// shares the main lcore's CPU, which waits while the workers run).
	a, b := dpdktest.TwoCPUs()
	os.Exit(dpdktest.Run(m, vdev, vdev2, fmt.Sprintf("--lcores=0@%d,1@%d,2@%d", a, b, a)))
}

var (
	portMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01} // ilbd's port
	peerMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x02} // a client on the wire
	strange = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x99} // someone else
	portIP  = [4]byte{198, 51, 100, 1}
	peerIP  = [4]byte{198, 51, 100, 2}
)

// ringPair is a ring port with its rings, closed at the end of the test.
type ringPair struct {
	port   dpdk.Port
	rx, tx *dpdktest.Ring
}

func newRingPort(t *testing.T, name string, pool *dpdk.Mempool) ringPair {
	t.Helper()
	p, rx, tx, err := dpdktest.NewRingPort(name, dpdktest.DefaultRingSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dpdktest.CloseRingPort(p, rx, tx); err != nil {
			t.Error(err)
		}
	})
	if err := p.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1}, pool); err != nil {
		t.Fatal(err)
	}
	return ringPair{p, rx, tx}
}

// testDataplane builds a dataplane of one ring "NIC" port with 198.51.100.1/24, with a ring
// "TAP" as its exception port if withTap, and a worker for it.
func testDataplane(t *testing.T, name string, withTap bool) (*Dataplane, *worker, ringPair, ringPair) {
	t.Helper()
	pool, err := dpdk.NewPktPool(name+"_pool", 4095, 32, 0, dpdk.SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Free) // runs after the ports are closed (cleanups are LIFO)
	nic := newRingPort(t, name+"_nic", pool)
	tap := ringPair{port: noTap}
	if withTap {
		tap = newRingPort(t, name+"_tap", pool)
	}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&rules.Config{}, 1, func(string) uint64 { return 1 }))
	eng, err := datapath.New(datapath.Config{
		Snapshot:     snap,
		ConnCapacity: 1024,
		Ports:        []datapath.PortConfig{{MAC: portMAC, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dp := &Dataplane{
		ports: []dpdk.Port{nic.port}, taps: []dpdk.Port{tap.port},
		pool: pool, engine: eng, log: log.New(os.Stderr, "", 0), exc: make([]exceptionCounters, 1),
		names: []string{name + "_nic"}, tapNames: []string{"ilb0"},
	}
	w := dp.newWorker(0)
	t.Cleanup(func() {
		dp.flush(w)
		w.io.Free()
		if n := pool.InUse(); n != 0 {
			t.Errorf("%d mbufs still in use after the worker flushed", n)
		}
	})
	return dp, w, nic, tap
}

// clock is the worker time the tests pass to poll.
var clock int64

// pollUntilIdle runs worker iterations until one receives nothing, then one more so that
// what the last busy one queued is transmitted.
func pollUntilIdle(t *testing.T, dp *Dataplane, w *worker) {
	t.Helper()
	for i := 0; i < 100; i++ {
		clock += int64(time.Second) // lets the engine publish its counters every time
		if dp.poll(w, clock) == 0 {
			clock += int64(time.Second)
			dp.poll(w, clock)
			return
		}
	}
	t.Fatal("the worker kept receiving for 100 iterations")
}

// arpReply builds an ARP reply from the peer to the port.
func arpReply() []byte {
	f := make([]byte, 60)
	copy(f[0:6], portMAC[:])
	copy(f[6:12], peerMAC[:])
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(a[2:], 0x0800) // IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 2) // reply
	copy(a[8:14], peerMAC[:])
	copy(a[14:18], peerIP[:])
	copy(a[18:24], portMAC[:])
	copy(a[24:28], portIP[:])
	return f
}

// kernelFrames are frames a kernel sends into its TAP: an ARP request, an IPv6 router
// solicitation to all-routers (noise), a UDP datagram to the peer.
func kernelFrames() [][]byte {
	arp := arpReply()
	copy(arp[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(arp[6:12], portMAC[:])
	binary.BigEndian.PutUint16(arp[14+6:], 1) // request
	copy(arp[14+8:], portMAC[:])
	copy(arp[14+14:], portIP[:])
	copy(arp[14+18:], make([]byte, 6))
	copy(arp[14+24:], peerIP[:])

	rs := make([]byte, 70)
	copy(rs[0:6], []byte{0x33, 0x33, 0, 0, 0, 2})
	copy(rs[6:12], portMAC[:])
	binary.BigEndian.PutUint16(rs[12:], 0x86dd)
	rs[14] = 0x60
	binary.BigEndian.PutUint16(rs[18:], 8)
	rs[20], rs[21] = 58, 255 // ICMPv6, hop limit
	rs[22], rs[23] = 0xfe, 0x80
	copy(rs[38:], []byte{0xff, 0x02, 14: 0, 15: 2})
	rs[54] = 133 // router solicitation

	udp := dpdktest.UDP4(peerMAC, portMAC, portIP, peerIP, 40000, 53, []byte("from the host"))
	return [][]byte{arp, rs, udp}
}

// TestWorkerExceptionPath: passed frames go to the port's TAP unchanged, what the TAP
// receives leaves by the port unchanged, the rest is balanced or dropped as before; the
// counters agree.
func TestWorkerExceptionPath(t *testing.T) {
	dp, w, nic, tap := testDataplane(t, "wexc", true)

	toHost := [][]byte{
		dpdktest.UDP4(portMAC, peerMAC, peerIP, portIP, 40000, 22, []byte("ssh to the host")), // local
		arpReply(), // ARP reply: the engine learns, the host too
	}
	dropped := [][]byte{
		dpdktest.UDP4(strange, peerMAC, peerIP, [4]byte{198, 51, 100, 7}, 1, 2, []byte("not for us")),
	}
	if err := nic.rx.Inject(dp.pool, slices.Concat(toHost, dropped)...); err != nil {
		t.Fatal(err)
	}
	fromHost := kernelFrames()
	if err := tap.rx.Inject(dp.pool, fromHost...); err != nil {
		t.Fatal(err)
	}
	pollUntilIdle(t, dp, w)

	sameFrames(t, "written to the TAP", tap.tx.Collect(), toHost)
	sameFrames(t, "sent on the port", nic.tx.Collect(), fromHost)
	st := dp.ExceptionStats()
	want := ExceptionStats{Port: "wexc_nic", Iface: "ilb0", ToKernel: 2, FromKernel: 3}
	if len(st) != 1 || st[0] != want {
		t.Errorf("ExceptionStats = %+v, want [%+v]", st, want)
	}
	if g := dp.engine.Stats().Global; g.Passed != 2 || g.Dropped != 1 {
		t.Errorf("engine passed %d and dropped %d, want 2 and 1", g.Passed, g.Dropped)
	}
}

// TestWorkerNoTap: without an exception port, passed frames are dropped (and freed).
func TestWorkerNoTap(t *testing.T) {
	dp, w, nic, _ := testDataplane(t, "wnotap", false)
	if err := nic.rx.Inject(dp.pool, dpdktest.UDP4(portMAC, peerMAC, peerIP, portIP, 40000, 22, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	pollUntilIdle(t, dp, w)
	if got := nic.tx.Collect(); len(got) != 0 {
		t.Errorf("sent %d frames on the port, want none", len(got))
	}
	if g := dp.engine.Stats().Global; g.Passed != 1 {
		t.Errorf("engine passed %d, want 1", g.Passed)
	}
	if c := dp.exc[0].ToKernel.Load(); c != 0 {
		t.Errorf("ToKernel = %d without a TAP", c)
	}
}

// TestWorkerPollAllocs: an iteration that moves frames both ways does not allocate.
func TestWorkerPollAllocs(t *testing.T) {
	dp, w, nic, tap := testDataplane(t, "walloc", true)
	const runs = 20
	host := dpdktest.UDP4(portMAC, peerMAC, peerIP, portIP, 40000, 22, []byte("x"))
	kern := kernelFrames()[2]
	for i := 0; i < (runs+1)*8; i++ { // AllocsPerRun makes one extra warm-up run
		if err := nic.rx.Inject(dp.pool, host); err != nil {
			t.Fatal(err)
		}
		if err := tap.rx.Inject(dp.pool, kern); err != nil {
			t.Fatal(err)
		}
	}
	// Collect between runs is not measured: drain the tx rings afterwards.
	n := testing.AllocsPerRun(runs, func() { dp.poll(w, 0) })
	if n != 0 {
		t.Errorf("poll allocates %.1f times per iteration, want 0", n)
	}
	pollUntilIdle(t, dp, w)
	if got := len(tap.tx.Collect()); got != (runs+1)*8 {
		t.Errorf("%d frames reached the TAP, want %d", got, (runs+1)*8)
	}
	if got := len(nic.tx.Collect()); got != (runs+1)*8 {
		t.Errorf("%d frames left by the port, want %d", got, (runs+1)*8)
	}
}

func sameFrames(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d frames, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: frame %d changed\n got %x\nwant %x", what, i, got[i], want[i])
		}
	}
}

// TestWorkerTapUnderLoad: while the port's bursts come in full, its TAP is polled every
// tapEveryLoaded-th iteration, never less often.
func TestWorkerTapUnderLoad(t *testing.T) {
	dp, w, nic, tap := testDataplane(t, "wload", true)
	host := dpdktest.UDP4(portMAC, peerMAC, peerIP, portIP, 40000, 22, []byte("x"))
	for i := 0; i < 2*tapEveryLoaded*dpdk.MaxBurst; i++ {
		if err := nic.rx.Inject(dp.pool, host); err != nil {
			t.Fatal(err)
		}
	}
	if err := tap.rx.Inject(dp.pool, kernelFrames()[2]); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= tapEveryLoaded; i++ {
		clock += int64(time.Millisecond)
		if got := dp.poll(w, clock); got < dpdk.MaxBurst {
			t.Fatalf("iteration %d received %d frames, want a full burst", i, got)
		}
		k := dp.exc[0].FromKernel.Load()
		if i < tapEveryLoaded && k != 0 {
			t.Fatalf("the TAP was polled in loaded iteration %d", i)
		}
		if i == tapEveryLoaded && k != 1 {
			t.Fatalf("the TAP was not polled in %d loaded iterations", i)
		}
	}
	pollUntilIdle(t, dp, w)
	tap.tx.Collect()
	if got := nic.tx.Collect(); len(got) != 1 {
		t.Errorf("%d frames left by the port, want the kernel's one", len(got))
	}
}
