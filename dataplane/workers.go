package dataplane

// Several workers. Each EAL worker lcore (every lcore but the main one) runs one worker: its
// own rx and tx queue on every data port (queue index = worker index), its own engine
// (connection shard, full-NAT port share, neighbour table, counters) and its own burst
// arrays; nothing on the packet path is shared or locked. A packet that reaches a worker
// which does not own its flow (datapath/owner.go: the device spread it by its own hash, or
// net_af_packet's fanout moved it) crosses exactly one single-producer, single-consumer ring
// to its owner. The rings are grouped into net_ring ports so that the workers drive them
// with the same one-cgo-call-per-burst IO.Run as the NICs:
//
//	handoff[j]  rx queue i: frames worker i hands to their owner, worker j
//	learn[j]    rx queue i: copies of ARP/NDP frames worker i received, for j's neighbour table
//	pass        rx queue i: frames worker i passes to the host, for worker 0, the TAPs' owner
//
// and tx queue i of each carries the same ring from the producer's side.

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
)

// handoffRingSize is each hand-off ring's capacity: a few bursts of every port.
const handoffRingSize = 1024

// workerCounters are one worker's loop counters, written by it, read by anyone.
type workerCounters struct {
	polls, busy    atomic.Uint64 // loop iterations, and those that found work
	rx, tx         atomic.Uint64 // frames received from and sent to the data ports
	handoffOut     atomic.Uint64 // frames handed to their owner
	handoffDropped atomic.Uint64 // ... lost because the owner's ring was full
	cpu            atomic.Int32  // the first CPU of the worker thread's affinity, +1 (0: unknown)
	_              [8]uint64     // keep workers' counters on separate cache lines
}

// WorkerStats is one worker's view for show-worker.
type WorkerStats struct {
	Worker                int
	Lcore                 uint
	CPU                   int // the CPU the worker's lcore runs on (the first of its set), -1 unknown
	Polls, Busy           uint64
	RxPackets, TxPackets  uint64
	HandoffIn, HandoffOut uint64
	Conns, ConnCap        uint64
}

// WorkerStats returns every worker's counters. Safe from any goroutine.
func (dp *Dataplane) WorkerStats() []WorkerStats {
	out := make([]WorkerStats, len(dp.engines))
	for w, e := range dp.engines {
		g := e.Stats().Global
		ws := WorkerStats{Worker: w, Conns: g.ConnEntries, ConnCap: uint64(e.ConnCapacity()),
			HandoffIn: g.HandoffIn}
		if w < len(dp.lcores) {
			ws.Lcore = dp.lcores[w]
		}
		if w < len(dp.wstats) {
			c := &dp.wstats[w]
			ws.Polls, ws.Busy = c.polls.Load(), c.busy.Load()
			ws.CPU = int(c.cpu.Load()) - 1
			ws.RxPackets, ws.TxPackets, ws.HandoffOut = c.rx.Load(), c.tx.Load(), c.handoffOut.Load()
		}
		out[w] = ws
	}
	return out
}

// recordCPU notes the first CPU of the calling thread's affinity (EAL pins an lcore's thread).
func (c *workerCounters) recordCPU() {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return
	}
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			c.cpu.Store(int32(cpu + 1))
			return
		}
	}
}

// setupRings creates the hand-off ring ports of n workers (none for one worker).
func (dp *Dataplane) setupRings(n int) error {
	if n < 2 {
		return nil
	}
	mk := func(kind string, to int) (dpdk.Port, error) {
		rings := make([]*dpdk.Ring, n)
		for from := range rings {
			r, err := dpdk.NewRing(fmt.Sprintf("ilb_%s%d_%d", kind, to, from), handoffRingSize, dpdk.SocketAny, dpdk.RingSP|dpdk.RingSC)
			if err != nil {
				return 0, err
			}
			dp.rings = append(dp.rings, r)
			rings[from] = r
		}
		name := fmt.Sprintf("net_ring_ilb%s%d", kind, to)
		port, err := dpdk.NewRingPort(name, rings, rings, dpdk.SocketAny)
		if err != nil {
			return 0, err
		}
		dp.ringNames = append(dp.ringNames, name)
		if err := port.Setup(dpdk.PortConf{RxQueues: uint16(n), TxQueues: uint16(n), RxDesc: handoffRingSize, TxDesc: handoffRingSize}, dp.pool); err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return port, nil
	}
	for to := 0; to < n; to++ {
		h, err := mk("h", to)
		if err != nil {
			return err
		}
		l, err := mk("l", to)
		if err != nil {
			return err
		}
		dp.handoff, dp.learn = append(dp.handoff, h), append(dp.learn, l)
	}
	p, err := mk("p", 0)
	if err != nil {
		return err
	}
	dp.pass = p
	return nil
}

// ringPorts lists the hand-off ring ports.
func (dp *Dataplane) ringPorts() []dpdk.Port {
	if len(dp.handoff) < 2 {
		return nil
	}
	return append(append(append([]dpdk.Port(nil), dp.handoff...), dp.learn...), dp.pass)
}

// closeRings stops and removes the ring ports, then frees the rings (the workers have
// stopped; mbufs still in a ring are lost with the pool).
func (dp *Dataplane) closeRings() {
	for _, p := range dp.ringPorts() {
		p.Stop()
		p.Close()
	}
	for _, name := range dp.ringNames {
		dpdk.RemoveRingPort(name)
	}
	for _, r := range dp.rings {
		r.Free()
	}
	dp.handoff, dp.learn, dp.rings, dp.ringNames = nil, nil, nil, nil
}

// ealWorkerCount returns how many worker lcores EAL arguments give (every lcore but the
// main one), from -l/--lcores/-c, or 0 if it cannot tell; ilbd uses it before EAL runs, to
// give net_af_packet ports one queue pair per worker.
func ealWorkerCount(args []string) int {
	lcores := -1
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func(flag string) (string, bool) {
			if a == flag && i+1 < len(args) {
				i++
				return args[i], true
			}
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, true
			}
			if len(flag) == 2 && len(a) > 2 && strings.HasPrefix(a, flag) {
				return a[2:], true
			}
			return "", false
		}
		if v, ok := val("--lcores"); ok {
			lcores = countLcoreList(v, true)
		} else if v, ok := val("-l"); ok {
			lcores = countLcoreList(v, false)
		} else if v, ok := val("-c"); ok {
			m, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(v), "0x"), 16, 64)
			if err != nil {
				return 0
			}
			lcores = 0
			for ; m != 0; m &= m - 1 {
				lcores++
			}
		}
	}
	if lcores < 1 {
		return 0
	}
	return lcores - 1
}

// countLcoreList counts the lcore ids of an EAL list: "0-2,4" (-l) or, for --lcores,
// "0@0,1@0,2@1" and "(0,1)@(0,1),2@1", where what follows '@' names CPUs, not lcores.
func countLcoreList(v string, withCPUs bool) int {
	seen := map[int]bool{}
	for len(v) > 0 {
		var group string
		if v[0] == '(' {
			end := strings.IndexByte(v, ')')
			if end < 0 {
				return -1
			}
			group, v = v[1:end], v[end+1:]
		} else {
			end := strings.IndexAny(v, ",@")
			if end < 0 {
				end = len(v)
			}
			group, v = v[:end], v[end:]
		}
		if strings.HasPrefix(v, "@") { // skip the CPU set
			if !withCPUs {
				return -1
			}
			v = v[1:]
			if strings.HasPrefix(v, "(") {
				end := strings.IndexByte(v, ')')
				if end < 0 {
					return -1
				}
				v = v[end+1:]
			} else if end := strings.IndexByte(v, ','); end >= 0 {
				v = v[end:]
			} else {
				v = ""
			}
		}
		v = strings.TrimPrefix(v, ",")
		for _, part := range strings.Split(group, ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return -1
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil || b < a {
					return -1
				}
			}
			for k := a; k <= b; k++ {
				seen[k] = true
			}
		}
	}
	return len(seen)
}

// indexPorts maps DPDK port ids to the engine's port numbers, for frames that crossed a ring.
func (dp *Dataplane) indexPorts() {
	maxID := 0
	for _, p := range dp.allPorts() {
		maxID = max(maxID, int(p))
	}
	dp.portIndex = make([]int16, maxID+1)
	for i := range dp.portIndex {
		dp.portIndex[i] = -1
	}
	for i, p := range dp.ports {
		dp.portIndex[p] = int16(i)
	}
}

// Engines returns every worker's engine.
func (dp *Dataplane) Engines() []*datapath.Engine {
	if len(dp.engines) == 0 {
		return []*datapath.Engine{dp.engine}
	}
	return dp.engines
}

// Stats returns the counters of every worker's engine, summed. Safe from any goroutine.
func (dp *Dataplane) Stats() datapath.Stats {
	engines := dp.Engines()
	all := make([]datapath.Stats, len(engines))
	for i, e := range engines {
		all[i] = e.Stats()
	}
	return datapath.MergeStats(all...)
}

// PortNames returns the data ports' DPDK device names, in the engine's port order.
func (dp *Dataplane) PortNames() []string { return append([]string(nil), dp.names...) }

// Logf logs through the data plane's logger.
func (dp *Dataplane) Logf(format string, args ...any) {
	if dp.log != nil {
		dp.log.Printf(format, args...)
	}
}
