package dataplane

import (
	"fmt"
	"log"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/rules"
)

// Sizes of the data plane (dpdk-binding notes §5.4).
const (
	poolMbufs  = 16383
	poolCache  = 256
	mbufRoom   = 2048 + 128 // RTE_MBUF_DEFAULT_BUF_SIZE: 2 KiB data + headroom
	ringDesc   = 1024
	idlePolls  = 256                   // empty polls before the worker starts to nap
	idleNap    = 50 * time.Microsecond // an idle ilbd must not burn a core
	controlGap = int64(time.Millisecond)
)

// noTap marks a port without an exception path in dataplane.taps.
const noTap = dpdk.Port(math.MaxUint16)

// Dataplane is the DPDK side of ilbd: the ports, their exception TAPs and one worker
// lcore running the engine.
type Dataplane struct {
	ports  []dpdk.Port
	taps   []dpdk.Port // taps[i]: the exception TAP of ports[i], or noTap
	pool   *dpdk.Mempool
	engine *datapath.Engine
	log    *log.Logger
	// exc counts the exception path per port (index as ports); the worker adds to it
	// once per port and iteration, anyone may read it.
	exc []exceptionCounters
	// names and tapNames are the ports' device names and their exception interfaces
	// ("" without one), index as ports; devices the whole device arguments.
	names, tapNames, devices []string
	// restore undoes the changes made to kernel interfaces ilbd did not create.
	restore []func()

	// Several workers (workers.go): one engine each (engine is engines[0]), the lcores they
	// run on, the hand-off ring ports into each worker and the per-worker counters.
	engines        []*datapath.Engine
	lcores         []uint
	handoff, learn []dpdk.Port // [w]: into worker w; rx queue i carries what worker i sends
	pass           dpdk.Port   // into worker 0: frames the others pass to the host
	rings          []*dpdk.Ring
	ringNames      []string
	portIndex      []int16 // by DPDK port id: the engine's port number, or -1
	wstats         []workerCounters

	stop     atomic.Bool
	running  atomic.Bool
	lastBeat []uint64 // per worker: polls at the watchdog's last look
}

// exceptionCounters count one port's exception path.
type exceptionCounters struct {
	ToKernel   atomic.Uint64 // frames the engine passed, written to the TAP
	FromKernel atomic.Uint64 // frames the kernel sent into the TAP, transmitted on the port
	// Frames lost because a tx list was full (the port's own refusals are in IO.TxDropped).
	ToKernelDropped, FromKernelDropped atomic.Uint64
}

// ExceptionStats is a copy of one port's exception counters.
type ExceptionStats struct {
	Port, Iface                        string
	ToKernel, FromKernel               uint64
	ToKernelDropped, FromKernelDropped uint64
}

// poolSize returns the mbufs the data plane needs: every rx and tx descriptor of every worker's
// queue on every port and TAP, the hand-off rings, the per-lcore caches and room for bursts in
// flight; at least poolMbufs, a power of two minus one (what rte_mempool sizes best).
func poolSize(s *Config, workers int) int {
	n := len(s.Ports)*workers*2*ringDesc + 2*workers*poolCache + 4*dpdk.MaxBurst*workers + 4096
	for i := range s.Ports {
		if _, ok := s.TapName(i); ok {
			n += 2 * tapDesc
		}
	}
	if workers > 1 {
		n += 3 * workers * workers * handoffRingSize
	}
	size := poolMbufs
	for size < n {
		size = size<<1 | 1
	}
	return size
}

// EALArgs builds the EAL argument vector: the configured arguments plus one device
// argument per port and one net_tap vdev per port with an exception path.
func EALArgs(s *Config) []string {
	args := append([]string{"ilbd"}, s.EAL...)
	for _, p := range s.Ports {
		if p.IsVdev() {
			dev := p.Device
			// net_af_packet has one queue pair unless told: give it one per worker.
			if n := ealWorkerCount(s.EAL); n > 1 && afPacketIface(dev) != "" && !strings.Contains(dev, "qpairs=") {
				dev += fmt.Sprintf(",qpairs=%d", n)
			}
			args = append(args, "--vdev="+dev)
		} else {
			args = append(args, "-a", p.Device)
		}
	}
	for i := range s.Ports {
		if name, ok := s.TapName(i); ok {
			args = append(args, "--vdev="+tapDevargs(i, name))
		}
	}
	return args
}

// Start initialises DPDK, starts every port and launches one worker per EAL worker
// lcore.
func Start(s *Config, snap *atomic.Pointer[rules.Snapshot], logger *log.Logger) (*Dataplane, error) {
	if err := checkExceptionHost(s); err != nil {
		return nil, err
	}
	// Offloads of kernel-backed ports (offload.go): off before EAL opens the PMDs' sockets;
	// undone by close() through dp.restore, or here if start-up fails before dp exists.
	undoOffloads := kernelPortOffloads(s.Ports, logger)
	if err := dpdk.Init(EALArgs(s)); err != nil {
		undoOffloads()
		return nil, fmt.Errorf("EAL: %w", err)
	}
	workers := dpdk.WorkerLcores()
	if len(workers) == 0 {
		dpdk.Cleanup()
		undoOffloads()
		return nil, fmt.Errorf("EAL arguments give no worker lcore (use e.g. -l 0-1)")
	}
	dp := &Dataplane{log: logger, exc: make([]exceptionCounters, len(s.Ports)), restore: []func(){undoOffloads}}
	for i, ps := range s.Ports {
		tap, _ := s.TapName(i)
		dp.names, dp.tapNames = append(dp.names, ps.Name()), append(dp.tapNames, tap)
		dp.devices = append(dp.devices, ps.Device)
	}
	var err error
	dp.pool, err = dpdk.NewPktPool("ilbd_pkts", uint32(poolSize(s, len(workers))), poolCache, mbufRoom, -1)
	if err != nil {
		dpdk.Cleanup()
		undoOffloads()
		return nil, fmt.Errorf("mbuf pool: %w", err)
	}
	dp.lcores = workers
	nw := len(workers)
	cfg := datapath.Config{Snapshot: snap, ConnCapacity: s.ConnTable, HalfOpenTimeout: s.HalfOpenTimeout, NoEvict: s.ConnFullDrop,
		WorkerCount: nw, SteerPrefix4: s.SteerPrefix4, SteerPrefix6: s.SteerPrefix6, Handoff: nw > 1}
	for _, ps := range s.Ports {
		port, err := dpdk.PortByName(ps.Name())
		if err != nil {
			dp.Close()
			return nil, fmt.Errorf("port %s: %w", ps.Name(), err)
		}
		if info, err := port.Info(); err == nil && (int(info.MaxRxQueues) < nw || int(info.MaxTxQueues) < nw) {
			dp.Close()
			return nil, fmt.Errorf("port %s: %d workers need %d rx and tx queues, the device has %d and %d (net_af_packet: qpairs=%d; fewer worker lcores in \"eal\")",
				ps.Name(), nw, nw, info.MaxRxQueues, info.MaxTxQueues, nw)
		}
		if err := port.Setup(dpdk.PortConf{RxQueues: uint16(nw), TxQueues: uint16(nw), RxDesc: ringDesc, TxDesc: ringDesc, Promisc: true}, dp.pool); err != nil {
			dp.Close()
			return nil, fmt.Errorf("port %s: %w", ps.Name(), err)
		}
		dp.ports = append(dp.ports, port)
		mac, err := port.MAC()
		if err != nil {
			dp.Close()
			return nil, fmt.Errorf("port %s: %w", ps.Name(), err)
		}
		pc := datapath.PortConfig{MAC: mac, Addrs: ps.Addrs}
		for _, gw := range s.Gateways {
			if !slices.ContainsFunc(ps.Addrs, func(p netip.Prefix) bool { return p.Contains(gw) }) {
				continue
			}
			if gw.Is4() {
				pc.Gateway = gw
			} else {
				pc.Gateway6 = gw
			}
		}
		cfg.Ports = append(cfg.Ports, pc)
		logger.Printf("port %d %s: %s %v", port, ps.Name(), macString(mac), ps.Addrs)
	}
	for w := 0; w < nw; w++ {
		cfg.WorkerIndex = w
		e, err := datapath.New(cfg)
		if err != nil {
			dp.Close()
			return nil, err
		}
		dp.engines = append(dp.engines, e)
	}
	dp.engine = dp.engines[0]
	dp.wstats = make([]workerCounters, nw)
	if err := dp.startExceptionPath(s, cfg.Ports); err != nil {
		dp.Close()
		return nil, fmt.Errorf("exception path: %w", err)
	}
	if err := dp.setupRings(nw); err != nil {
		dp.Close()
		return nil, fmt.Errorf("hand-off rings: %w", err)
	}
	dp.indexPorts()
	dp.running.Store(true)
	for w, lc := range workers {
		if err := dpdk.Launch(lc, func() int { return dp.loop(w) }); err != nil {
			dp.running.Store(false)
			dp.Close()
			return nil, fmt.Errorf("launching worker %d on lcore %d: %w", w, lc, err)
		}
	}
	logger.Printf("%d worker(s) running on lcore(s) %v", nw, workers)
	return dp, nil
}

// startExceptionPath sets up each port's exception TAP (created by EAL from the vdev
// arguments): MAC, addresses and MTU of its kernel interface, the DPDK port itself (which
// brings the interface up), then the kernel's default route through the gateway.
func (dp *Dataplane) startExceptionPath(s *Config, pcs []datapath.PortConfig) error {
	dp.taps = make([]dpdk.Port, len(dp.ports))
	haveTap := false
	for i := range dp.taps {
		dp.taps[i] = noTap
		_, on := s.TapName(i)
		haveTap = haveTap || on
	}
	if !haveTap {
		dp.log.Printf("exception path off on every port: the host gets no traffic from the data plane")
		return nil
	}
	// The host is about to own the ports' addresses: first make the kernel ignore the raw
	// interfaces under af_packet ports, or it would see every frame twice.
	for _, ps := range s.Ports {
		restore, err := quietRawInterface(ps.Device)
		if err != nil {
			return err
		}
		dp.restore = append(dp.restore, restore)
	}
	for i := range dp.ports {
		iface, ok := s.TapName(i)
		if !ok {
			dp.log.Printf("port %s: exception path off", s.Ports[i].Name())
			continue
		}
		tap, err := dpdk.PortByName(tapVdev(i))
		if err != nil {
			return fmt.Errorf("port %s: %w", s.Ports[i].Name(), err)
		}
		dp.taps[i] = tap // from now on close() closes it
		mtu := 0
		if info, err := dp.ports[i].Info(); err == nil {
			mtu = int(info.MTU)
		}
		if err := setupTap(tap, iface, pcs[i].MAC, s.Ports[i].Addrs, mtu); err != nil {
			return fmt.Errorf("port %s: %w", s.Ports[i].Name(), err)
		}
		// The kernel is the only sender into the TAP: no promiscuous mode (net_tap would
		// set it on the kernel interface).
		if err := tap.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1, RxDesc: tapDesc, TxDesc: tapDesc}, dp.pool); err != nil {
			return fmt.Errorf("port %s: TAP %s: %w", s.Ports[i].Name(), iface, err)
		}
		if err := upTap(iface, pcs[i].MAC); err != nil {
			return fmt.Errorf("port %s: %w", s.Ports[i].Name(), err)
		}
		dp.log.Printf("port %s: exception path through %s (DPDK port %d %s) %v",
			s.Ports[i].Name(), iface, tap, tapVdev(i), s.Ports[i].Addrs)
	}
	for _, gw := range s.Gateways {
		if err := dp.gatewayRoute(s, gw); err != nil {
			return err
		}
	}
	return nil
}

// gatewayRoute makes gw the kernel's default route of its family through the exception
// interface of the port whose subnet holds it.
func (dp *Dataplane) gatewayRoute(s *Config, gw netip.Addr) error {
	for i, ps := range s.Ports {
		if !slices.ContainsFunc(ps.Addrs, func(p netip.Prefix) bool { return p.Contains(gw) }) {
			continue
		}
		if iface, ok := s.TapName(i); ok {
			return addGatewayRoute(gw, iface, dp.log)
		}
		dp.log.Printf("exception path: gateway %s is on port %s, which has none; the host's own sockets reach only the ports' subnets", gw, ps.Name())
		return nil
	}
	return nil
}

// ExceptionStats returns the exception counters of every port. Safe from any goroutine.
func (dp *Dataplane) ExceptionStats() []ExceptionStats {
	out := make([]ExceptionStats, len(dp.exc))
	for i := range dp.exc {
		c := &dp.exc[i]
		out[i] = ExceptionStats{
			ToKernel: c.ToKernel.Load(), FromKernel: c.FromKernel.Load(),
			ToKernelDropped: c.ToKernelDropped.Load(), FromKernelDropped: c.FromKernelDropped.Load(),
		}
		if i < len(dp.names) {
			out[i].Port, out[i].Iface = dp.names[i], dp.tapNames[i]
		}
	}
	return out
}

// newIO returns an I/O block with a tx list for every port id the worker uses (IO
// indexes its lists by DPDK port id; the engine numbers ports by position).
func (dp *Dataplane) newIO() *dpdk.IO {
	maxID := 0
	for _, port := range dp.allPorts() {
		maxID = max(maxID, int(port))
	}
	return dpdk.NewIO(maxID + 1)
}

// allPorts lists every DPDK port the workers use: data ports, TAPs, hand-off ring ports.
func (dp *Dataplane) allPorts() []dpdk.Port {
	all := append([]dpdk.Port(nil), dp.ports...)
	for _, tap := range dp.taps {
		if tap != noTap {
			all = append(all, tap)
		}
	}
	return append(all, dp.ringPorts()...)
}

// tapEveryLoaded thins the polling of a busy port's TAP: while the port's bursts come in
// full, its TAP is polled every tapEveryLoaded-th iteration only. Polling net_tap costs a
// read system call even when the kernel sent nothing (about 0.5 µs; its rx trigger, an
// rt-signal, cannot work in a Go process, whose runtime owns the signals), which would be
// paid for every burst under load; the host's traffic waits a few iterations at most.
const tapEveryLoaded = 8

// worker is the per-iteration state of one worker loop.
type worker struct {
	index       int // among the workers; also the rx and tx queue it uses on every port
	eng         *datapath.Engine
	io          *dpdk.IO
	spare       [1]*dpdk.Mbuf // an mbuf kept ready for frames the engine originates
	lastControl int64
	tapWait     []uint8 // per port: iterations since its TAP was last polled
	stats       *workerCounters
	// Per iteration, per port: the exception path's counts (worker 0), added at its end.
	toK, toKDrop []uint64
	// Per iteration: frames sent and handed off, added to stats at its end (an atomic add
	// per packet would cost more than the rest of forwarding it).
	tx, handoffOut, handoffDropped uint64
	frames                         [dpdk.MaxBurst][]byte // the burst's frames, for the engine's staged lookups
}

// The engine stages lookups over whole rx bursts.
var (
	_ [dpdk.MaxBurst - datapath.BurstMax]struct{}
	_ [datapath.BurstMax - dpdk.MaxBurst]struct{}
)

// publishCounts adds the iteration's tx and hand-off counts to the worker's shared counters.
func (w *worker) publishCounts() {
	if w.tx != 0 {
		w.stats.tx.Add(w.tx)
		w.tx = 0
	}
	if w.handoffOut|w.handoffDropped != 0 {
		w.stats.handoffOut.Add(w.handoffOut)
		w.stats.handoffDropped.Add(w.handoffDropped)
		w.handoffOut, w.handoffDropped = 0, 0
	}
}

// newWorker allocates worker w's state; call it on the worker (see dpdk.NewIO).
func (dp *Dataplane) newWorker(w int) *worker {
	if len(dp.engines) == 0 {
		dp.engines = []*datapath.Engine{dp.engine}
	}
	if len(dp.wstats) < len(dp.engines) {
		dp.wstats = make([]workerCounters, len(dp.engines))
	}
	return &worker{index: w, eng: dp.engines[w], io: dp.newIO(), lastControl: -controlGap,
		tapWait: make([]uint8, len(dp.ports)), stats: &dp.wstats[w],
		toK: make([]uint64, len(dp.ports)), toKDrop: make([]uint64, len(dp.ports))}
}

// loop is worker w: poll each port (and, worker 0, its TAP), the hand-off rings, run the
// engine over each burst, hand the results back in the next poll (one cgo call per port
// and ring per iteration).
func (dp *Dataplane) loop(w int) int {
	defer dp.running.Store(false)
	wk := dp.newWorker(w)
	defer wk.io.Free()
	wk.stats.recordCPU()
	start := time.Now()
	idle := 0
	for !dp.stop.Load() {
		got := dp.poll(wk, int64(time.Since(start)))
		wk.stats.polls.Add(1)
		if got == 0 {
			if idle++; idle > idlePolls {
				time.Sleep(idleNap)
			}
		} else {
			idle = 0
			wk.stats.busy.Add(1)
		}
	}
	dp.flush(wk)
	return 0
}

// poll runs one iteration of worker w at time now and returns how many frames it received.
// It does not allocate.
//
// The worker's queue of each port is polled and its burst goes through the engine
// (handle). Worker 0 also polls each port's TAP (under load only every tapEveryLoaded-th
// time) and queues whatever the kernel sent, unchanged, for the port. With several workers,
// each then drains the rings the others fill for it: frames it owns, copies of ARP/NDP
// frames to learn from and, worker 0, frames for the host. The queued lists go out with the
// next io.Run, whichever port or ring it polls.
func (dp *Dataplane) poll(w *worker, now int64) int {
	io, eng := w.io, w.eng
	q := uint16(w.index)
	eng.BeginBurst(now)
	got := 0
	var rx uint64
	for p, port := range dp.ports {
		n := io.Run(port, q, q)
		got += n
		rx += uint64(n)
		burst := io.Received() // one read of the count, no per-packet bounds checks
		if n > 1 && eng.Prefetching() {
			for i, m := range burst {
				w.frames[i] = m.Room()
			}
			eng.PrefetchBurst(w.frames[:n])
		}
		for _, m := range burst {
			dp.handle(w, m, uint16(p), false)
		}
		if w.index != 0 || dp.taps[p] == noTap {
			continue
		}
		if n == dpdk.MaxBurst && w.tapWait[p] < tapEveryLoaded-1 {
			w.tapWait[p]++
			continue
		}
		w.tapWait[p] = 0
		var fromK, fromKDrop uint64
		k := io.Run(dp.taps[p], 0, 0)
		got += k
		for i := 0; i < k; i++ {
			m := io.Rx(i)
			if io.Tx(int(port), m) {
				fromK++
			} else {
				io.Drop(m)
				fromKDrop++
			}
		}
		if fromK|fromKDrop != 0 {
			c := &dp.exc[p]
			c.FromKernel.Add(fromK)
			c.FromKernelDropped.Add(fromKDrop)
		}
	}
	if len(dp.handoff) > 1 {
		got += dp.pollRings(w)
	}
	for p := range w.toK {
		if w.toK[p]|w.toKDrop[p] != 0 {
			dp.exc[p].ToKernel.Add(w.toK[p])
			dp.exc[p].ToKernelDropped.Add(w.toKDrop[p])
			w.toK[p], w.toKDrop[p] = 0, 0
		}
	}
	if rx != 0 {
		w.stats.rx.Add(rx)
	}
	w.publishCounts()
	eng.EndBurst()
	// Held packets whose next hop answered leave at once; resolution requests at least
	// every controlGap.
	if now-w.lastControl >= controlGap || eng.ControlPending() {
		w.lastControl = now
		dp.sendControl(w)
	}
	return got
}

// pollRings drains, for worker w, the rings the other workers fill for it.
func (dp *Dataplane) pollRings(w *worker) int {
	io, eng := w.io, w.eng
	q := uint16(w.index)
	got := 0
	for from := range dp.handoff {
		if from == w.index {
			continue
		}
		n := io.Run(dp.handoff[w.index], uint16(from), q)
		got += n
		for i := 0; i < n; i++ {
			m := io.Rx(i)
			dp.handle(w, m, dp.portOf(m), true)
		}
		n = io.Run(dp.learn[w.index], uint16(from), q)
		got += n
		for i := 0; i < n; i++ {
			m := io.Rx(i)
			if p := dp.portOf(m); int(p) < len(dp.ports) {
				eng.LearnNeighbour(m.Room(), p)
			}
			io.Drop(m)
		}
		if w.index != 0 {
			continue
		}
		n = io.Run(dp.pass, uint16(from), q)
		got += n
		for i := 0; i < n; i++ {
			m := io.Rx(i)
			dp.toKernel(w, m, dp.portOf(m))
		}
	}
	return got
}

// handle runs one received frame through worker w's engine and queues it where the result
// says: out of a port, to the host (worker 0: the port's TAP; the others hand it to worker
// 0), to the worker that owns it, or to the drop list. handedOff: the frame came from
// another worker's ring, to its owner.
func (dp *Dataplane) handle(w *worker, m *dpdk.Mbuf, p uint16, handedOff bool) {
	io := w.io
	frame, segs := m.Frame()
	if segs != 1 {
		io.Drop(m) // jumbo/scattered frames are not supported
		return
	}
	if !handedOff && len(dp.learn) > 1 && datapath.IsNeighbourFrame(frame) {
		dp.copyNeighbour(w, frame, p)
	}
	var r datapath.Result
	if handedOff {
		r = w.eng.ProcessHandedOff(frame, p)
	} else {
		r = w.eng.Process(frame, p)
	}
	switch r.Action {
	case datapath.ActionForward:
		if r.Len != len(frame) { // most keep their length, and pkt_len = data_len in one segment
			m.SetLen(r.Len)
		}
		if int(r.Port) < len(dp.ports) && io.Tx(int(dp.ports[r.Port]), m) {
			w.tx++
			return
		}
	case datapath.ActionPass:
		if w.index == 0 {
			dp.toKernel(w, m, p)
			return
		}
		m.SetInPort(dp.ports[p]) // not every PMD records it; worker 0 needs it to pick the TAP
		if io.Tx(int(dp.pass), m) {
			return
		}
	case datapath.ActionHandoff:
		m.SetInPort(dp.ports[p])
		if int(r.Port) < len(dp.handoff) && io.Tx(int(dp.handoff[r.Port]), m) {
			w.handoffOut++
			return
		}
		w.handoffDropped++
	}
	io.Drop(m)
}

// toKernel queues a frame for the TAP of data port p (worker 0 only), or drops it.
func (dp *Dataplane) toKernel(w *worker, m *dpdk.Mbuf, p uint16) {
	if int(p) < len(dp.taps) && dp.taps[p] != noTap {
		if w.io.Tx(int(dp.taps[p]), m) {
			w.toK[p]++
			return
		}
		w.toKDrop[p]++
	}
	w.io.Drop(m)
}

// copyNeighbour gives every other worker a copy of an ARP/NDP frame worker w received, so
// that each neighbour table learns what this one learns.
func (dp *Dataplane) copyNeighbour(w *worker, frame []byte, p uint16) {
	for to := range dp.learn {
		if to == w.index {
			continue
		}
		var c [1]*dpdk.Mbuf
		if err := dp.pool.AllocBulk(c[:]); err != nil {
			return
		}
		room := c[0].Room()
		copy(room[:cap(room)], frame)
		c[0].SetLen(len(frame))
		c[0].SetInPort(dp.ports[p])
		if !w.io.Tx(int(dp.learn[to]), c[0]) {
			w.io.Drop(c[0])
		}
	}
}

// portOf returns the engine's number of the data port a frame crossing a hand-off ring was
// received on (handle records it in the mbuf), or len(dp.ports) if none.
func (dp *Dataplane) portOf(m *dpdk.Mbuf) uint16 {
	if id := int(m.InPort()); id < len(dp.portIndex) && dp.portIndex[id] >= 0 {
		return uint16(dp.portIndex[id])
	}
	return uint16(len(dp.ports))
}

// flush sends what is queued and drops what the last polls received (IO.Free frees the
// drop list), then frees the spare mbuf.
func (dp *Dataplane) flush(w *worker) {
	io := w.io
	q := uint16(w.index)
	for p, port := range dp.ports {
		n := io.Run(port, q, q)
		for i := 0; i < n; i++ {
			io.Drop(io.Rx(i))
		}
		if w.index == 0 && dp.taps[p] != noTap {
			n := io.Run(dp.taps[p], 0, 0)
			for i := 0; i < n; i++ {
				io.Drop(io.Rx(i))
			}
		}
	}
	if w.spare[0] != nil {
		dpdk.FreeMbufs(w.spare[:])
		w.spare[0] = nil
	}
}

// sendControl transmits the frames worker w's engine wants to originate: held packets
// released by their next hop's answer, ARP requests and neighbor solicitations.
func (dp *Dataplane) sendControl(w *worker) {
	io, spare := w.io, &w.spare
	for k := 0; k < 16; k++ {
		if spare[0] == nil {
			if err := dp.pool.AllocBulk(spare[:]); err != nil {
				return
			}
		}
		m := spare[0]
		room := m.Room()
		n, port, ok := w.eng.NextControlFrame(room[:cap(room)])
		if !ok {
			return
		}
		m.SetLen(n)
		if int(port) >= len(dp.ports) || !io.Tx(int(dp.ports[port]), m) {
			io.Drop(m)
		}
		spare[0] = nil
	}
}

// Alive reports whether every worker made progress since the last call.
func (dp *Dataplane) Alive() bool {
	ok := dp.running.Load()
	if len(dp.lastBeat) < len(dp.wstats) {
		dp.lastBeat = make([]uint64, len(dp.wstats))
	}
	for i := range dp.wstats {
		b := dp.wstats[i].polls.Load()
		ok = ok && b != dp.lastBeat[i]
		dp.lastBeat[i] = b
	}
	return ok
}

// Close stops the workers, then the ports and the TAPs (net_tap removes its kernel
// interface, and the kernel its addresses and routes, when the port is closed), the
// hand-off rings, then EAL.
func (dp *Dataplane) Close() {
	dp.stop.Store(true)
	dpdk.WaitAll()
	for _, p := range dp.ports {
		p.Stop()
		p.Close()
	}
	for _, t := range dp.taps {
		if t != noTap {
			t.Stop()
			t.Close()
		}
	}
	dp.closeRings()
	for i := len(dp.restore) - 1; i >= 0; i-- {
		dp.restore[i]()
	}
	dp.restore = nil
	if dp.pool != nil {
		dp.pool.Free()
	}
	dpdk.Cleanup()
}

func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}
