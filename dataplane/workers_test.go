package dataplane

import (
	"fmt"
	"log"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
	"github.com/ilbgo/ilb/rules"
)

// twoWorkerDataplane builds a dataplane of two workers over one ring "NIC" port with two
// queues (rx ring q: what worker q receives; tx ring q: what worker q sends), no TAP, and the
// hand-off ring ports between the workers. The port is one-armed: clients, servers and
// proxy-src addresses are all on 198.51.100.0/24.
func twoWorkerDataplane(t *testing.T, name string) (*Dataplane, [2]*worker, [2]*dpdktest.Ring, [2]*dpdktest.Ring) {
	t.Helper()
	pool, err := dpdk.NewPktPool(name+"_pool", 8191, 32, 0, dpdk.SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Free)
	var rx, tx [2]*dpdktest.Ring
	var rxr, txr []*dpdk.Ring
	for q := range 2 {
		for _, d := range []struct {
			kind string
			to   **dpdktest.Ring
			list *[]*dpdk.Ring
		}{{"rx", &rx[q], &rxr}, {"tx", &tx[q], &txr}} {
			r, err := dpdk.NewRing(fmt.Sprintf("%s_%s%d", name, d.kind, q), 1024, dpdk.SocketAny, dpdk.RingSP|dpdk.RingSC)
			if err != nil {
				t.Fatal(err)
			}
			*d.to, *d.list = &dpdktest.Ring{Ring: r}, append(*d.list, r)
		}
	}
	nicName := "net_ring_" + name
	nic, err := dpdk.NewRingPort(nicName, rxr, txr, dpdk.SocketAny)
	if err != nil {
		t.Fatal(err)
	}
	if err := nic.Setup(dpdk.PortConf{RxQueues: 2, TxQueues: 2}, pool); err != nil {
		t.Fatal(err)
	}

	cfg := rules.Config{}
	cfg.CreateServerGroup("sg")
	for _, s := range []string{"198.51.100.11", "198.51.100.12"} {
		cfg.AddServer("sg", rules.ServerSpec{Addr: netip.MustParseAddr(s)})
	}
	vip := netip.MustParseAddr("203.0.113.10")
	for _, r := range []rules.Rule{
		{Name: "hn", Topo: rules.TopoHalfNAT, MinPort: 80, MaxPort: 80},
		{Name: "dsr", Topo: rules.TopoDSR, MinPort: 81, MaxPort: 81, Algo: rules.AlgoHashIPPort},
		{Name: "fn", Topo: rules.TopoNAT, MinPort: 82, MaxPort: 82,
			ProxySrcStart: netip.MustParseAddr("198.51.100.100"), ProxySrcEnd: netip.MustParseAddr("198.51.100.101")},
	} {
		r.Enabled, r.VIP, r.Proto, r.ServerGroup = true, vip, rules.ProtoTCP, "sg"
		if r.Algo == 0 {
			r.Algo = rules.AlgoRoundRobin
		}
		if err := cfg.CreateRule(r); err != nil {
			t.Fatalf("rule %s: %v", r.Name, err)
		}
	}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&cfg, 1, func(string) uint64 { return 1 }))
	dp := &Dataplane{ports: []dpdk.Port{nic}, taps: []dpdk.Port{noTap}, pool: pool, log: log.New(os.Stderr, "", 0),
		exc: make([]exceptionCounters, 1), names: []string{nicName}, tapNames: []string{""}}
	for w := range 2 {
		e, err := datapath.New(datapath.Config{Snapshot: snap, ConnCapacity: 1024, WorkerIndex: w, WorkerCount: 2, Handoff: true,
			Ports: []datapath.PortConfig{{MAC: portMAC, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}}}})
		if err != nil {
			t.Fatal(err)
		}
		dp.engines = append(dp.engines, e)
	}
	dp.engine = dp.engines[0]
	dp.wstats = make([]workerCounters, 2)
	if err := dp.setupRings(2); err != nil {
		t.Fatal(err)
	}
	dp.indexPorts()
	ws := [2]*worker{dp.newWorker(0), dp.newWorker(1)}
	t.Cleanup(func() {
		for _, w := range ws {
			dp.flush(w)
			w.io.Free()
		}
		dp.closeRings()
		nic.Stop()
		nic.Close()
		dpdk.RemoveRingPort(nicName)
		for _, r := range append(rxr, txr...) {
			for {
				var ms [dpdk.MaxBurst]*dpdk.Mbuf
				n := r.Dequeue(ms[:])
				if n == 0 {
					break
				}
				dpdk.FreeMbufs(ms[:n])
			}
			r.Free()
		}
	})
	return dp, ws, rx, tx
}

// pollBoth runs both workers until neither receives anything, then once more each.
func pollBoth(t *testing.T, dp *Dataplane, ws [2]*worker) {
	t.Helper()
	for i := 0; i < 100; i++ {
		clock += int64(1e9)
		if dp.poll(ws[0], clock)+dp.poll(ws[1], clock) == 0 {
			clock += int64(1e9)
			dp.poll(ws[0], clock)
			dp.poll(ws[1], clock)
			return
		}
	}
	t.Fatal("the workers kept receiving for 100 iterations")
}

// segment builds a TCP segment to ilbd's port.
func segment(t *testing.T, srcMAC [6]byte, src, dst string, sport, dport uint16, tcp *layers.TCP) []byte {
	t.Helper()
	f, err := benchSegment(srcMAC, netip.MustParseAddr(src), netip.MustParseAddr(dst), sport, dport, tcp)
	if err != nil {
		t.Fatal(err)
	}
	copy(f[0:6], portMAC[:])
	return f
}

// Packets of one flow arriving on both workers' queues are all handled by the flow's owner,
// for half-NAT (both directions), DSR and full-NAT (both directions); the hand-offs are
// counted on both sides, and ARP replies either worker receives teach both.
func TestTwoWorkersHandOffToOwner(t *testing.T) {
	dp, ws, rx, tx := twoWorkerDataplane(t, "w2own")
	srvMAC := [2][6]byte{{0x02, 0, 0, 0, 0x11, 0}, {0x02, 0, 0, 0, 0x12, 0}}
	// Neighbours answer on worker 0's queue only: worker 1 learns from the copies.
	arp := func(ip [4]byte, mac [6]byte) []byte {
		f := arpReply()
		copy(f[6:12], mac[:])
		copy(f[14+8:], mac[:])
		copy(f[14+14:], ip[:])
		return f
	}
	if err := rx[0].Inject(dp.pool, arp([4]byte{198, 51, 100, 11}, srvMAC[0]), arp([4]byte{198, 51, 100, 12}, srvMAC[1]), arpReply()); err != nil {
		t.Fatal(err)
	}
	pollBoth(t, dp, ws)
	tx[0].Collect()
	tx[1].Collect()

	for _, c := range []struct {
		name  string
		dport uint16
	}{{"half-NAT", 80}, {"DSR", 81}, {"full-NAT", 82}} {
		t.Run(c.name, func(t *testing.T) {
			before := [2]datapath.GlobalCounters{dp.engines[0].Stats().Global, dp.engines[1].Stats().Global}
			const sport = 40000
			syn := segment(t, peerMAC, "198.51.100.2", "203.0.113.10", sport, c.dport, &layers.TCP{SYN: true, Seq: 1})
			if err := rx[1].Inject(dp.pool, syn); err != nil { // the SYN reaches worker 1...
				t.Fatal(err)
			}
			pollBoth(t, dp, ws)
			var out [2][][]byte
			out[0], out[1] = tx[0].Collect(), tx[1].Collect()
			owner := 0
			if len(out[1]) > 0 {
				owner = 1
			}
			if len(out[owner]) != 1 || len(out[1-owner]) != 0 {
				t.Fatalf("SYN sent %d times by worker 0, %d by worker 1; want once, by its owner", len(out[0]), len(out[1]))
			}
			// ...the client's next segment worker 0: the owner sends both.
			ack := segment(t, peerMAC, "198.51.100.2", "203.0.113.10", sport, c.dport, &layers.TCP{ACK: true, Seq: 2, Ack: 1})
			if err := rx[0].Inject(dp.pool, ack); err != nil {
				t.Fatal(err)
			}
			pollBoth(t, dp, ws)
			if n0, n1 := len(tx[0].Collect()), len(tx[1].Collect()); (owner == 0 && (n0 != 1 || n1 != 0)) || (owner == 1 && (n1 != 1 || n0 != 0)) {
				t.Fatalf("second segment sent %d times by worker 0, %d by worker 1; the owner is %d\n%+v\n%+v\n%+v", n0, n1, owner,
					dp.engines[0].Stats().Global, dp.engines[1].Stats().Global, dp.WorkerStats())
			}
			if c.name != "DSR" {
				// The server's replies reach both workers' queues: the owner translates them.
				sent := out[owner][0]
				srvIP := netip.AddrFrom4([4]byte(sent[30:34]))
				dst := netip.AddrFrom4([4]byte(sent[26:30])).String()
				dstPort := uint16(sent[34])<<8 | uint16(sent[35])
				mac := srvMAC[0]
				if srvIP.As4()[3] == 12 {
					mac = srvMAC[1]
				}
				for q := range 2 {
					reply := segment(t, mac, srvIP.String(), dst, 80, dstPort, &layers.TCP{ACK: true, Seq: 9, Ack: 2})
					if c.name == "half-NAT" {
						reply = segment(t, mac, srvIP.String(), "198.51.100.2", uint16(sent[36])<<8|uint16(sent[37]), sport, &layers.TCP{ACK: true, Seq: 9, Ack: 2})
					} else {
						reply = segment(t, mac, srvIP.String(), dst, uint16(sent[36])<<8|uint16(sent[37]), dstPort, &layers.TCP{ACK: true, Seq: 9, Ack: 2})
					}
					if err := rx[q].Inject(dp.pool, reply); err != nil {
						t.Fatal(err)
					}
					pollBoth(t, dp, ws)
					got0, got1 := tx[0].Collect(), tx[1].Collect()
					mine, other := got0, got1
					if owner == 1 {
						mine, other = got1, got0
					}
					if len(mine) != 1 || len(other) != 0 {
						t.Fatalf("reply arriving at worker %d: sent %d times by worker 0, %d by worker 1; the owner is %d", q, len(got0), len(got1), owner)
					}
					if got := netip.AddrFrom4([4]byte(mine[0][26:30])); got != netip.MustParseAddr("203.0.113.10") {
						t.Fatalf("reply left from %v, want the VIP", got)
					}
				}
			}
			after := [2]datapath.GlobalCounters{dp.engines[0].Stats().Global, dp.engines[1].Stats().Global}
			in := after[owner].HandoffIn - before[owner].HandoffIn
			out2 := after[1-owner].HandoffOut - before[1-owner].HandoffOut
			if in == 0 || in != out2 {
				t.Fatalf("hand-offs: worker %d handed %d, its owner %d received %d", 1-owner, out2, owner, in)
			}
		})
	}
	if g := dp.engines[1].Stats().Global; g.NeighbourCopies < 3 {
		t.Errorf("worker 1 learned from %d neighbour copies, want 3", g.NeighbourCopies)
	}
	st := dp.WorkerStats()
	if len(st) != 2 || st[0].RxPackets == 0 || st[1].RxPackets == 0 || st[0].HandoffOut+st[1].HandoffOut == 0 {
		t.Errorf("worker stats %+v", st)
	}
}

func TestEALWorkerCount(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"-l", "0-1", "--no-huge"}, 1},
		{[]string{"-l0-3"}, 3},
		{[]string{"-l", "0,2,4-5"}, 3},
		{[]string{"--lcores=0@0,1@0,2@1"}, 2},
		{[]string{"--lcores", "(0,1)@(0,1),2@1"}, 2},
		{[]string{"--lcores=0-2@0"}, 2},
		{[]string{"-c", "0x7"}, 2},
		{[]string{"-c", "f"}, 3},
		{[]string{"--no-huge"}, 0},
		{[]string{"-l", "x"}, 0},
	} {
		if got := ealWorkerCount(c.args); got != c.want {
			t.Errorf("ealWorkerCount(%q) = %d, want %d", c.args, got, c.want)
		}
	}
	s := &Config{EAL: []string{"--lcores=0@0,1@0,2@1"}, Ports: []Port{
		{Device: "net_af_packet0,iface=lbc"}, {Device: "net_af_packet1,iface=lbs,qpairs=4"}, {Device: "0000:03:00.0"}}}
	args := EALArgs(s)
	if !slices.Contains(args, "--vdev=net_af_packet0,iface=lbc,qpairs=2") || !slices.Contains(args, "--vdev=net_af_packet1,iface=lbs,qpairs=4") {
		t.Errorf("af_packet vdevs not given one queue pair per worker: %q", args)
	}
}

func TestAFPacketIface(t *testing.T) {
	for dev, want := range map[string]string{
		"net_af_packet0,iface=lbc":           "lbc",
		"net_af_packet1,qpairs=1,iface=eth1": "eth1",
		"eth_af_packet0,iface=x":             "x",
		"net_af_packet0":                     "",
		"net_tap0,iface=lbc":                 "",
		"0000:03:00.0":                       "",
	} {
		if got := afPacketIface(dev); got != want {
			t.Errorf("afPacketIface(%q) = %q, want %q", dev, got, want)
		}
	}
}

// The mbuf pool grows with the workers and ports, and stays at the single-worker size for one.
func TestPoolSize(t *testing.T) {
	two := &Config{Ports: []Port{{Device: "0000:03:00.0"}, {Device: "0000:03:00.1"}}}
	if n := poolSize(two, 1); n != poolMbufs {
		t.Errorf("1 worker, 2 ports: %d mbufs, want %d", n, poolMbufs)
	}
	for _, w := range []int{2, 4, 8} {
		n := poolSize(two, w)
		need := 2*w*2*ringDesc + 3*w*w*handoffRingSize
		if n < need || (n+1)&n != 0 {
			t.Errorf("%d workers, 2 ports: %d mbufs, want a power of two minus one above %d", w, n, need)
		}
	}
}
