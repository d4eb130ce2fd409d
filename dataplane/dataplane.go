package main

import (
	"fmt"
	"log"
	"math"
	"net/netip"
	"slices"
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

// dataplane is the DPDK side of ilbd: the ports, their exception TAPs and one worker
// lcore running the engine.
type dataplane struct {
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

	stop      atomic.Bool
	running   atomic.Bool
	heartbeat atomic.Uint64 // worker loop iterations, for the watchdog
	lastBeat  uint64
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

// ealArgs builds the EAL argument vector: the configured arguments plus one device
// argument per port and one net_tap vdev per port with an exception path.
func ealArgs(s *Settings) []string {
	args := append([]string{"ilbd"}, s.EAL...)
	for _, p := range s.Ports {
		if p.IsVdev() {
			args = append(args, "--vdev="+p.Device)
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

// startDataplane initialises DPDK, starts every port and launches the worker.
func startDataplane(s *Settings, snap *atomic.Pointer[rules.Snapshot], logger *log.Logger) (*dataplane, error) {
	if err := checkExceptionHost(s); err != nil {
		return nil, err
	}
	// Offloads of kernel-backed ports (offload.go): off before EAL opens the PMDs' sockets;
	// undone by close() through dp.restore, or here if start-up fails before dp exists.
	undoOffloads := kernelPortOffloads(s.Ports, logger)
	if err := dpdk.Init(ealArgs(s)); err != nil {
		undoOffloads()
		return nil, fmt.Errorf("EAL: %w", err)
	}
	workers := dpdk.WorkerLcores()
	if len(workers) == 0 {
		dpdk.Cleanup()
		undoOffloads()
		return nil, fmt.Errorf("EAL arguments give no worker lcore (use e.g. -l 0-1)")
	}
	dp := &dataplane{log: logger, exc: make([]exceptionCounters, len(s.Ports)), restore: []func(){undoOffloads}}
	for i, ps := range s.Ports {
		tap, _ := s.TapName(i)
		dp.names, dp.tapNames = append(dp.names, ps.Name()), append(dp.tapNames, tap)
		dp.devices = append(dp.devices, ps.Device)
	}
	var err error
	dp.pool, err = dpdk.NewPktPool("ilbd_pkts", poolMbufs, poolCache, mbufRoom, -1)
	if err != nil {
		dpdk.Cleanup()
		undoOffloads()
		return nil, fmt.Errorf("mbuf pool: %w", err)
	}
	cfg := datapath.Config{Snapshot: snap, ConnCapacity: s.ConnTable, HalfOpenTimeout: s.HalfOpenTimeout, NoEvict: s.ConnFullDrop}
	for _, ps := range s.Ports {
		port, err := dpdk.PortByName(ps.Name())
		if err != nil {
			dp.close()
			return nil, fmt.Errorf("port %s: %w", ps.Name(), err)
		}
		if err := port.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1, RxDesc: ringDesc, TxDesc: ringDesc, Promisc: true}, dp.pool); err != nil {
			dp.close()
			return nil, fmt.Errorf("port %s: %w", ps.Name(), err)
		}
		dp.ports = append(dp.ports, port)
		mac, err := port.MAC()
		if err != nil {
			dp.close()
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
	dp.engine, err = datapath.New(cfg)
	if err != nil {
		dp.close()
		return nil, err
	}
	if err := dp.startExceptionPath(s, cfg.Ports); err != nil {
		dp.close()
		return nil, fmt.Errorf("exception path: %w", err)
	}
	dp.running.Store(true)
	if err := dpdk.Launch(workers[0], dp.loop); err != nil {
		dp.running.Store(false)
		dp.close()
		return nil, fmt.Errorf("launching worker on lcore %d: %w", workers[0], err)
	}
	logger.Printf("worker running on lcore %d", workers[0])
	return dp, nil
}

// startExceptionPath sets up each port's exception TAP (created by EAL from the vdev
// arguments): MAC, addresses and MTU of its kernel interface, the DPDK port itself (which
// brings the interface up), then the kernel's default route through the gateway.
func (dp *dataplane) startExceptionPath(s *Settings, pcs []datapath.PortConfig) error {
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
func (dp *dataplane) gatewayRoute(s *Settings, gw netip.Addr) error {
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
func (dp *dataplane) ExceptionStats() []ExceptionStats {
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
func (dp *dataplane) newIO() *dpdk.IO {
	maxID := 0
	for _, port := range dp.ports {
		maxID = max(maxID, int(port))
	}
	for _, tap := range dp.taps {
		if tap != noTap {
			maxID = max(maxID, int(tap))
		}
	}
	return dpdk.NewIO(maxID + 1)
}

// tapEveryLoaded thins the polling of a busy port's TAP: while the port's bursts come in
// full, its TAP is polled every tapEveryLoaded-th iteration only. Polling net_tap costs a
// read system call even when the kernel sent nothing (about 0.5 µs; its rx trigger, an
// rt-signal, cannot work in a Go process, whose runtime owns the signals), which would be
// paid for every burst under load; the host's traffic waits a few iterations at most.
const tapEveryLoaded = 8

// worker is the per-iteration state of the worker loop.
type worker struct {
	io          *dpdk.IO
	spare       [1]*dpdk.Mbuf // an mbuf kept ready for frames the engine originates
	lastControl int64
	tapWait     []uint8 // per port: iterations since its TAP was last polled
}

// newWorker allocates the worker state; call it on the worker (see dpdk.NewIO).
func (dp *dataplane) newWorker() *worker {
	return &worker{io: dp.newIO(), lastControl: -controlGap, tapWait: make([]uint8, len(dp.ports))}
}

// loop is the worker: poll each port (and its TAP), run the engine over the burst, hand
// the results back in the next poll (one cgo call per port per iteration).
func (dp *dataplane) loop() int {
	defer dp.running.Store(false)
	w := dp.newWorker()
	defer w.io.Free()
	start := time.Now()
	idle := 0
	for !dp.stop.Load() {
		got := dp.poll(w, int64(time.Since(start)))
		dp.heartbeat.Add(1)
		if got == 0 {
			if idle++; idle > idlePolls {
				time.Sleep(idleNap)
			}
		} else {
			idle = 0
		}
	}
	dp.flush(w)
	return 0
}

// poll runs one iteration of the worker at time now and returns how many frames it
// received. It does not allocate.
//
// Each port's burst goes through the engine: forwarded frames are queued for their out
// port, passed frames (ActionPass: for the host itself, ARP replies, disabled rules, ...)
// for the port's TAP, the rest is dropped. Then the port's TAP is polled (under load only
// every tapEveryLoaded-th time) and whatever the kernel sent is queued, unchanged, for
// the port. The queued lists go out with the next io.Run, whichever port it polls.
func (dp *dataplane) poll(w *worker, now int64) int {
	io := w.io
	dp.engine.BeginBurst(now)
	got := 0
	for p, port := range dp.ports {
		tap := dp.taps[p]
		n := io.Run(port, 0, 0)
		got += n
		var toK, toKDrop uint64
		for i := 0; i < n; i++ {
			m := io.Rx(i)
			if m.Segs() != 1 {
				io.Drop(m) // jumbo/scattered frames are not supported
				continue
			}
			r := dp.engine.Process(m.Room(), uint16(p))
			switch r.Action {
			case datapath.ActionForward:
				m.SetLen(r.Len)
				if int(r.Port) < len(dp.ports) && io.Tx(int(dp.ports[r.Port]), m) {
					continue
				}
			case datapath.ActionPass:
				if tap != noTap {
					if io.Tx(int(tap), m) {
						toK++
						continue
					}
					toKDrop++
				}
			}
			io.Drop(m)
		}
		if tap == noTap {
			continue
		}
		var fromK, fromKDrop uint64
		if n == dpdk.MaxBurst && w.tapWait[p] < tapEveryLoaded-1 {
			w.tapWait[p]++
		} else {
			w.tapWait[p] = 0
			k := io.Run(tap, 0, 0)
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
		}
		if toK|toKDrop|fromK|fromKDrop != 0 {
			c := &dp.exc[p]
			c.ToKernel.Add(toK)
			c.ToKernelDropped.Add(toKDrop)
			c.FromKernel.Add(fromK)
			c.FromKernelDropped.Add(fromKDrop)
		}
	}
	dp.engine.EndBurst()
	// Held packets whose next hop answered leave at once; resolution requests at least
	// every controlGap.
	if now-w.lastControl >= controlGap || dp.engine.ControlPending() {
		w.lastControl = now
		dp.sendControl(io, &w.spare)
	}
	return got
}

// flush sends what is queued and drops what the last polls received (IO.Free frees the
// drop list), then frees the spare mbuf.
func (dp *dataplane) flush(w *worker) {
	io := w.io
	for p, port := range dp.ports {
		for _, q := range []dpdk.Port{port, dp.taps[p]} {
			if q == noTap {
				continue
			}
			n := io.Run(q, 0, 0)
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

// sendControl transmits the frames the engine wants to originate: held packets released
// by their next hop's answer, ARP requests and neighbor solicitations.
func (dp *dataplane) sendControl(io *dpdk.IO, spare *[1]*dpdk.Mbuf) {
	for k := 0; k < 16; k++ {
		if spare[0] == nil {
			if err := dp.pool.AllocBulk(spare[:]); err != nil {
				return
			}
		}
		m := spare[0]
		room := m.Room()
		n, port, ok := dp.engine.NextControlFrame(room[:cap(room)])
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

// alive reports whether the worker made progress since the last call.
func (dp *dataplane) alive() bool {
	b := dp.heartbeat.Load()
	ok := b != dp.lastBeat && dp.running.Load()
	dp.lastBeat = b
	return ok
}

// close stops the worker, then the ports and the TAPs (net_tap removes its kernel
// interface, and the kernel its addresses and routes, when the port is closed), then EAL.
func (dp *dataplane) close() {
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
