package main

import (
	"fmt"
	"log"
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

// dataplane is the DPDK side of ilbd: the ports and one worker lcore running the engine.
type dataplane struct {
	ports  []dpdk.Port
	pool   *dpdk.Mempool
	engine *datapath.Engine
	log    *log.Logger

	stop      atomic.Bool
	running   atomic.Bool
	heartbeat atomic.Uint64 // worker loop iterations, for the watchdog
	lastBeat  uint64
}

// ealArgs builds the EAL argument vector: the configured arguments plus one device
// argument per port.
func ealArgs(s *Settings) []string {
	args := append([]string{"ilbd"}, s.EAL...)
	for _, p := range s.Ports {
		if p.IsVdev() {
			args = append(args, "--vdev="+p.Device)
		} else {
			args = append(args, "-a", p.Device)
		}
	}
	return args
}

// startDataplane initialises DPDK, starts every port and launches the worker.
func startDataplane(s *Settings, snap *atomic.Pointer[rules.Snapshot], logger *log.Logger) (*dataplane, error) {
	if err := dpdk.Init(ealArgs(s)); err != nil {
		return nil, fmt.Errorf("EAL: %w", err)
	}
	workers := dpdk.WorkerLcores()
	if len(workers) == 0 {
		dpdk.Cleanup()
		return nil, fmt.Errorf("EAL arguments give no worker lcore (use e.g. -l 0-1)")
	}
	dp := &dataplane{log: logger}
	var err error
	dp.pool, err = dpdk.NewPktPool("ilbd_pkts", poolMbufs, poolCache, mbufRoom, -1)
	if err != nil {
		dpdk.Cleanup()
		return nil, fmt.Errorf("mbuf pool: %w", err)
	}
	cfg := datapath.Config{Snapshot: snap, ConnCapacity: s.ConnTable}
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
		for _, a := range ps.Addrs {
			if s.Gateway.IsValid() && a.Contains(s.Gateway) {
				pc.Gateway = s.Gateway
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
	dp.running.Store(true)
	if err := dpdk.Launch(workers[0], dp.loop); err != nil {
		dp.running.Store(false)
		dp.close()
		return nil, fmt.Errorf("launching worker on lcore %d: %w", workers[0], err)
	}
	logger.Printf("worker running on lcore %d", workers[0])
	return dp, nil
}

// loop is the worker: poll each port, run the engine over the burst, hand the results
// back in the next poll (one cgo call per port per iteration).
func (dp *dataplane) loop() int {
	defer dp.running.Store(false)
	// IO keeps one tx list per DPDK port id; the engine numbers ports by position.
	maxID := 0
	for _, port := range dp.ports {
		maxID = max(maxID, int(port))
	}
	io := dpdk.NewIO(maxID + 1)
	defer io.Free()
	start := time.Now()
	var spare [1]*dpdk.Mbuf // an mbuf kept ready for frames the engine originates
	idle := 0
	lastControl := int64(-controlGap)
	for !dp.stop.Load() {
		now := int64(time.Since(start))
		dp.engine.BeginBurst(now)
		got := 0
		for p, port := range dp.ports {
			n := io.Run(port, 0, 0)
			got += n
			for i := 0; i < n; i++ {
				m := io.Rx(i)
				if m.Segs() != 1 {
					io.Drop(m) // jumbo/scattered frames are not supported
					continue
				}
				r := dp.engine.Process(m.Room(), uint16(p))
				if r.Action == datapath.ActionForward {
					m.SetLen(r.Len)
					if int(r.Port) < len(dp.ports) && io.Tx(int(dp.ports[r.Port]), m) {
						continue
					}
				}
				// ActionPass: the exception path to the host comes with the TAP; until
				// then such packets are counted by the engine and dropped here.
				io.Drop(m)
			}
		}
		if now-lastControl >= controlGap {
			lastControl = now
			dp.sendControl(io, &spare)
		}
		dp.engine.EndBurst()
		dp.heartbeat.Add(1)
		if got == 0 {
			if idle++; idle > idlePolls {
				time.Sleep(idleNap)
			}
		} else {
			idle = 0
		}
	}
	// Flush what is queued, then give the spare mbuf back.
	for _, port := range dp.ports {
		io.Run(port, 0, 0)
	}
	if spare[0] != nil {
		dpdk.FreeMbufs(spare[:])
	}
	return 0
}

// sendControl transmits the frames the engine wants to originate (ARP requests).
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

// close stops the worker, then the ports, then EAL.
func (dp *dataplane) close() {
	dp.stop.Store(true)
	dpdk.WaitAll()
	for _, p := range dp.ports {
		p.Stop()
		p.Close()
	}
	if dp.pool != nil {
		dp.pool.Free()
	}
	dpdk.Cleanup()
}

func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}
