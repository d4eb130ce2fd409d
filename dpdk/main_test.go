package dpdk_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
)

// Ports created at EAL init by TestMain. EAL runs once per process, so every
// vdev any test needs is listed here; each test uses its own port, because
// a closed vdev port cannot be reopened.
const (
	nullPort   = "net_null0" // TestNullPort
	launchPort = "net_null1" // TestLaunch
	benchPort  = "net_null2" // benchmarks
)

func TestMain(m *testing.M) {
	if iface := afpChildIface(); iface != "" {
		// Re-executed by TestAFPacket inside its network namespace.
		os.Exit(dpdktest.Run(m, "--vdev=net_af_packet0,iface="+iface))
	}
	os.Exit(dpdktest.Run(m, "--vdev="+nullPort, "--vdev="+launchPort, "--vdev="+benchPort))
}

// newPool creates a pool freed at the end of the test (after any port
// cleanup registered later, since cleanups run last-in first-out).
func newPool(t testing.TB, name string, n uint32) *dpdk.Mempool {
	t.Helper()
	p, err := dpdk.NewPktPool(name, n, 32, 0, dpdk.SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Free)
	return p
}

// ringPort creates a ring port of the given ring size, set up with one rx
// and one tx queue, closed (and its rings drained) at the end of the test.
func ringPort(t testing.TB, name string, size uint32, pool *dpdk.Mempool) (dpdk.Port, *dpdktest.Ring, *dpdktest.Ring) {
	t.Helper()
	p, rx, tx, err := dpdktest.NewRingPort(name, size)
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
	return p, rx, tx
}

// vdevPort looks a vdev port up, sets it up and stops and closes it at the
// end of the test.
func vdevPort(t testing.TB, name string, pool *dpdk.Mempool) dpdk.Port {
	t.Helper()
	p, err := dpdk.PortByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1, Promisc: true}, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x0a}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0x0b}
)

// testFrames returns n distinct UDP frames between documentation addresses.
func testFrames(n int, tag string) [][]byte {
	fs := make([][]byte, n)
	for i := range fs {
		fs[i] = dpdktest.UDP4(macB, macA, [4]byte{198, 51, 100, 1}, [4]byte{203, 0, 113, byte(i)},
			uint16(10000+i), 53, []byte(fmt.Sprintf("%s-%03d-%s", tag, i, bytes.Repeat([]byte{'x'}, i))))
	}
	return fs
}

func TestInit(t *testing.T) {
	if got := dpdk.MainLcore(); got != 0 {
		t.Errorf("MainLcore() = %d, want 0", got)
	}
	if got := dpdk.WorkerLcores(); !slices.Equal(got, []uint{1}) {
		t.Errorf("WorkerLcores() = %v, want [1]", got)
	}
	if err := dpdk.Init([]string{"again"}); err == nil {
		t.Error("second Init succeeded")
	}
	// Test goroutines never run on the locked main lcore thread.
	if got := dpdk.LcoreID(); got != dpdk.LcoreAny {
		t.Errorf("LcoreID() on a test goroutine = %d, want LcoreAny", got)
	}
	// Other tests close their ports, so only check what is still there and
	// the benchmark port, which nothing closes.
	ports := dpdk.Ports()
	if n := dpdk.CountPorts(); n != len(ports) || n < 1 {
		t.Errorf("CountPorts() = %d, Ports() = %v", n, ports)
	}
	for _, p := range ports {
		if q, err := dpdk.PortByName(p.Name()); err != nil || q != p {
			t.Errorf("PortByName(%q) = %d, %v; want %d", p.Name(), q, err, p)
		}
	}
	if p, err := dpdk.PortByName(benchPort); err != nil || p.Name() != benchPort {
		t.Errorf("PortByName(%q) = %d, %v (name %q)", benchPort, p, err, p.Name())
	}
	if _, err := dpdk.PortByName("net_nonexistent9"); err == nil {
		t.Error("PortByName of a missing device succeeded")
	}
}

func TestMempool(t *testing.T) {
	p := newPool(t, "t_pool", 1023)
	if p.Avail() != 1023 || p.InUse() != 0 {
		t.Errorf("fresh pool: avail %d in use %d, want 1023, 0", p.Avail(), p.InUse())
	}
	_, err := dpdk.NewPktPool("t_pool", 63, 0, 0, dpdk.SocketAny)
	if !errors.Is(err, syscall.EEXIST) {
		t.Errorf("duplicate pool name: err = %v, want EEXIST", err)
	}
}

func TestAllocBulkFree(t *testing.T) {
	pool := newPool(t, "t_alloc", 1023)
	var ms [40]*dpdk.Mbuf // more than MaxBurst: two cgo chunks
	if err := pool.AllocBulk(ms[:]); err != nil {
		t.Fatal(err)
	}
	seen := map[*dpdk.Mbuf]bool{}
	for i, m := range ms {
		if m == nil || seen[m] {
			t.Fatalf("mbuf %d is nil or repeated", i)
		}
		seen[m] = true
		if m.Len() != 0 || m.Segs() != 1 || m.Headroom() != dpdk.Headroom {
			t.Errorf("fresh mbuf: len %d segs %d headroom %d", m.Len(), m.Segs(), m.Headroom())
		}
		if c := cap(m.Room()); c != dpdk.DefaultDataRoom-dpdk.Headroom {
			t.Errorf("cap(Room()) = %d, want %d", c, dpdk.DefaultDataRoom-dpdk.Headroom)
		}
	}
	if pool.InUse() != len(ms) {
		t.Errorf("InUse() = %d after allocating %d", pool.InUse(), len(ms))
	}
	dpdk.FreeMbufs(ms[:])
	if pool.InUse() != 0 {
		t.Errorf("InUse() = %d after FreeMbufs", pool.InUse())
	}

	// A stack array crosses cgo by value: no allocation.
	if n := testing.AllocsPerRun(100, func() {
		var b [8]*dpdk.Mbuf
		if pool.AllocBulk(b[:]) == nil {
			dpdk.FreeMbufs(b[:])
		}
	}); n != 0 {
		t.Errorf("AllocBulk+FreeMbufs allocate %.1f times per run, want 0", n)
	}

	// All or nothing: the second chunk fails, the first is given back.
	small := newPool(t, "t_small", 63)
	var big [64]*dpdk.Mbuf
	if err := small.AllocBulk(big[:]); !errors.Is(err, dpdk.ErrPoolEmpty) {
		t.Errorf("AllocBulk(64) from 63: err = %v, want ErrPoolEmpty", err)
	}
	if small.InUse() != 0 || big[0] != nil {
		t.Errorf("failed AllocBulk leaked: in use %d", small.InUse())
	}
}

func TestMbufAccessors(t *testing.T) {
	pool := newPool(t, "t_mbuf", 63)
	var ms [1]*dpdk.Mbuf
	if err := pool.AllocBulk(ms[:]); err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	defer m.Free()

	room := m.Room()
	total := m.Tailroom()
	copy(room[:4], "abcd")
	m.SetLen(4)
	if string(m.Data()) != "abcd" || m.PktLen() != 4 || m.Tailroom() != total-4 {
		t.Fatalf("after SetLen(4): data %q pktlen %d", m.Data(), m.PktLen())
	}
	hdr := m.Prepend(2)
	copy(hdr, "XY")
	if string(m.Data()) != "XYabcd" || m.Headroom() != dpdk.Headroom-2 || m.PktLen() != 6 {
		t.Errorf("after Prepend(2): %q headroom %d", m.Data(), m.Headroom())
	}
	if m.Prepend(dpdk.Headroom) != nil {
		t.Error("Prepend beyond the headroom succeeded")
	}
	if string(m.Adj(3)) != "bcd" || m.PktLen() != 3 {
		t.Errorf("after Adj(3): %q", m.Data())
	}
	if m.Adj(4) != nil {
		t.Error("Adj beyond the data succeeded")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("SetLen beyond the room did not panic")
			}
		}()
		m.SetLen(cap(m.Room()) + 1)
	}()
}

func TestRing(t *testing.T) {
	pool := newPool(t, "t_ringp", 255)
	r, err := dpdk.NewRing("t_ring", 64, dpdk.SocketAny, dpdk.RingSP|dpdk.RingSC)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	var in, out [70]*dpdk.Mbuf
	if err := pool.AllocBulk(in[:]); err != nil {
		t.Fatal(err)
	}
	defer dpdk.FreeMbufs(in[:])
	if n := r.Enqueue(in[:]); n != 63 || r.Count() != 63 {
		t.Fatalf("Enqueue(70) into a 64-ring = %d (count %d), want 63", n, r.Count())
	}
	if n := r.Dequeue(out[:]); n != 63 || !slices.Equal(in[:63], out[:63]) {
		t.Fatalf("Dequeue = %d, order kept %v", n, slices.Equal(in[:63], out[:63]))
	}
	if n := testing.AllocsPerRun(100, func() {
		var b [MaxBurstForTest]*dpdk.Mbuf
		copy(b[:], in[:])
		r.Enqueue(b[:])
		r.Dequeue(b[:])
	}); n != 0 {
		t.Errorf("Ring Enqueue+Dequeue allocate %.1f times per run", n)
	}
}

// MaxBurstForTest mirrors dpdk.MaxBurst as an array length in tests.
const MaxBurstForTest = dpdk.MaxBurst

// TestRingPortRoundTrip injects frames into a ring port, receives them with
// Run, rewrites and grows them in place, transmits them on the same port and
// collects exactly the expected bytes from the tx ring.
func TestRingPortRoundTrip(t *testing.T) {
	pool := newPool(t, "t_rt", 1023)
	port, rx, tx := ringPort(t, "t_rt0", dpdktest.DefaultRingSize, pool)
	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()

	frames := testFrames(20, "roundtrip")
	if err := rx.Inject(pool, frames...); err != nil {
		t.Fatal(err)
	}
	if pool.InUse() != len(frames) {
		t.Errorf("InUse() = %d after injecting %d", pool.InUse(), len(frames))
	}
	n := io.Run(port, 0, 0)
	if n != len(frames) || io.N() != n || len(io.Received()) != n {
		t.Fatalf("Run received %d (N %d, Received %d), want %d", n, io.N(), len(io.Received()), len(frames))
	}
	if io.Rx(n) != nil {
		t.Error("Rx past the burst is not nil")
	}
	want := make([][]byte, n)
	for i := range n {
		m := io.Rx(i)
		if m != io.Received()[i] {
			t.Fatalf("Rx(%d) != Received()[%d]", i, i)
		}
		if !bytes.Equal(m.Data(), frames[i]) || m.Segs() != 1 || m.PktLen() != len(frames[i]) {
			t.Fatalf("frame %d: got %x, want %x", i, m.Data(), frames[i])
		}
		// Swap the MACs and append a 4-byte trailer, in place.
		d := m.Data()
		var tmp [6]byte
		copy(tmp[:], d[0:6])
		copy(d[0:6], d[6:12])
		copy(d[6:12], tmp[:])
		r := m.Room()
		r = append(r, "TAIL"...) // within cap: writes into the tailroom
		m.SetLen(len(r))
		want[i] = append([]byte(nil), r...)
		if !io.Tx(int(port), m) {
			t.Fatal("Tx refused a packet on an empty list")
		}
	}
	if io.Pending(int(port)) != n {
		t.Errorf("Pending = %d, want %d", io.Pending(int(port)), n)
	}
	if tx.Count() != 0 {
		t.Fatal("frames transmitted before Run")
	}
	if got := io.Run(port, 0, 0); got != 0 {
		t.Errorf("second Run received %d, want 0", got)
	}
	got := tx.Collect()
	if len(got) != n {
		t.Fatalf("collected %d frames, want %d", len(got), n)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("tx frame %d:\n got %x\nwant %x", i, got[i], want[i])
		}
	}
	if io.TxDropped() != 0 {
		t.Errorf("TxDropped = %d", io.TxDropped())
	}
	if pool.InUse() != 0 {
		t.Errorf("InUse() = %d after collecting everything", pool.InUse())
	}
	st, err := port.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.IPackets != uint64(n) || st.OPackets != uint64(n) {
		t.Errorf("stats %+v, want %d in and out", st, n)
	}
}

// TestDropFrees checks that Drop gives mbufs back at the next Run.
func TestDropFrees(t *testing.T) {
	pool := newPool(t, "t_drop", 1023)
	port, rx, _ := ringPort(t, "t_drop0", dpdktest.DefaultRingSize, pool)
	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()

	base := pool.Avail()
	if err := rx.Inject(pool, testFrames(dpdk.MaxBurst, "drop")...); err != nil {
		t.Fatal(err)
	}
	n := io.Run(port, 0, 0)
	if n != dpdk.MaxBurst {
		t.Fatalf("Run received %d, want %d", n, dpdk.MaxBurst)
	}
	for _, m := range io.Received() {
		io.Drop(m)
	}
	if got := pool.Avail(); got != base-n {
		t.Errorf("Avail() = %d before the next Run, want %d", got, base-n)
	}
	io.Run(port, 0, 0)
	if got := pool.Avail(); got != base {
		t.Errorf("Avail() = %d after Run, want baseline %d", got, base)
	}

	// More drops than the list holds: the overflow is flushed, nothing leaks.
	var ms [3 * dpdk.MaxBurst]*dpdk.Mbuf
	if err := pool.AllocBulk(ms[:]); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		io.Drop(m)
	}
	io.Run(port, 0, 0)
	if got := pool.Avail(); got != base {
		t.Errorf("Avail() = %d after dropping %d, want %d", got, len(ms), base)
	}
}

// TestTxRefused fills a small tx ring: what the port does not take is freed
// by Run and counted by TxDropped; a full tx list makes Tx return false.
func TestTxRefused(t *testing.T) {
	pool := newPool(t, "t_refuse", 1023)
	port, rx, tx := ringPort(t, "t_ref0", 32, pool) // tx ring holds 31
	io := dpdk.NewIO(int(port) + 1)

	frames := testFrames(40, "refuse")
	if err := rx.Inject(pool, frames[:31]...); err != nil { // rx ring also holds 31
		t.Fatal(err)
	}
	n := io.Run(port, 0, 0)
	for _, m := range io.Received() {
		io.Tx(int(port), m)
	}
	if err := rx.Inject(pool, frames[31:]...); err != nil {
		t.Fatal(err)
	}
	n2 := io.Run(port, 0, 0) // sends 31 (all fit), receives 9
	for _, m := range io.Received() {
		io.Tx(int(port), m)
	}
	io.Run(port, 0, 0) // sends 9 into a full ring: all refused
	if n != 31 || n2 != 9 {
		t.Fatalf("received %d then %d, want 31 then 9", n, n2)
	}
	if io.TxDropped() != 9 {
		t.Errorf("TxDropped = %d, want 9", io.TxDropped())
	}
	got := tx.Collect()
	if len(got) != 31 {
		t.Fatalf("collected %d, want 31", len(got))
	}
	for i := range got {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d differs", i)
		}
	}
	if pool.InUse() != 0 {
		t.Errorf("InUse() = %d: refused packets were not freed", pool.InUse())
	}

	// A full tx list refuses; Free releases what is still queued.
	var ms [dpdk.TxListCap + 1]*dpdk.Mbuf
	if err := pool.AllocBulk(ms[:]); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		ok := io.Tx(int(port), m)
		if ok != (i < dpdk.TxListCap) {
			t.Fatalf("Tx #%d = %v", i, ok)
		}
	}
	if io.Tx(int(port)+1, ms[0]) {
		t.Error("Tx to a port index beyond NewIO's range succeeded")
	}
	ms[dpdk.TxListCap].Free()
	io.Free()
	if pool.InUse() != 0 {
		t.Errorf("InUse() = %d after IO.Free", pool.InUse())
	}
}

// TestNullPort sets a net_null port up, reads its properties, forwards
// bursts and checks the counters and that the loop does not allocate.
func TestNullPort(t *testing.T) {
	pool := newPool(t, "t_null", 8191)
	port := vdevPort(t, nullPort, pool)

	info, err := port.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "net_null" || info.MaxRxQueues == 0 {
		t.Errorf("Info() = %+v", info)
	}
	if _, err := port.MAC(); err != nil {
		t.Error(err)
	}
	// SetMAC changes what MAC reports; group and zero addresses are refused
	// and leave it unchanged.
	want := [6]byte{0x02, 0x00, 0x5e, 0x00, 0x53, 0x01}
	if err := port.SetMAC(want); err != nil {
		t.Errorf("SetMAC(%x): %v", want, err)
	} else if got, err := port.MAC(); err != nil || got != want {
		t.Errorf("MAC() after SetMAC(%x) = %x, %v", want, got, err)
	}
	for _, bad := range [][6]byte{{}, {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}} {
		if err := port.SetMAC(bad); err == nil {
			t.Errorf("SetMAC(%x) succeeded, want an error", bad)
		}
	}
	if got, _ := port.MAC(); got != want {
		t.Errorf("MAC() = %x after refused SetMAC calls, want %x", got, want)
	}
	if err := dpdk.Port(dpdk.MaxPorts - 1).SetMAC(want); err == nil {
		t.Error("SetMAC on a port that does not exist succeeded")
	}
	link, err := port.Link()
	if err != nil {
		t.Fatal(err)
	}
	if !link.Up {
		t.Errorf("Link() = %+v, want up", link)
	}
	if _, err := port.XStats(); err != nil {
		t.Error(err)
	}

	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()
	const iters = 100
	fwd := func() {
		n := io.Run(port, 0, 0)
		for i := range n {
			io.Tx(int(port), io.Rx(i))
		}
	}
	for range iters {
		fwd()
	}
	io.Run(port, 0, 0) // sends the last burst, receives one more
	for _, m := range io.Received() {
		io.Drop(m)
	}
	st, err := port.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.IPackets != (iters+1)*dpdk.MaxBurst || st.OPackets != iters*dpdk.MaxBurst {
		t.Errorf("stats %+v, want %d in, %d out", st, (iters+1)*dpdk.MaxBurst, iters*dpdk.MaxBurst)
	}
	if n := testing.AllocsPerRun(1000, fwd); n != 0 {
		t.Errorf("Run+Rx+Tx allocate %.2f times per iteration, want 0", n)
	}
}
