package dataplane

import (
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/rules"
)

// The whole worker (DPDK rx burst, engine, tx burst: the loop ilbd runs on its lcore) is
// measured on a net_pcap port that replays a capture of established half-NAT client
// traffic for ever (infinite_rx): the PMD copies each frame into a fresh mbuf as a NIC's
// DMA would, and the transmitted frames are freed. Run with hugepages for real figures:
// `make bench` (ILB_DPDK_HUGE=1).

const (
	benchPort  = "net_pcap_ilbbench0"
	benchFlows = 1024
)

var (
	benchMAC    = [6]byte{0x02, 0, 0, 0, 0xbe, 0x01} // ilbd's port
	benchClient = [6]byte{0x02, 0, 0, 0, 0xbe, 0x02}
	benchVIP    = netip.MustParseAddr("203.0.113.10")
	benchSrc    = netip.MustParseAddr("198.51.100.2")
	benchServer = []netip.Addr{netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("192.0.2.13")}
)

// benchVdev writes the replayed capture and returns the vdev argument for EAL, which
// must see it at initialisation (TestMain).
func benchVdev() (string, error) {
	dir, err := os.MkdirTemp("", "ilbd-bench")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "halfnat.pcap")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(2048, layers.LinkTypeEthernet); err != nil {
		return "", err
	}
	for i := 0; i < benchFlows; i++ {
		frame, err := benchFrame(uint16(10000 + i))
		if err != nil {
			return "", err
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			return "", err
		}
	}
	return "--vdev=" + benchPort + ",rx_pcap=" + path + ",infinite_rx=1", nil
}

// benchFrame is one 64-byte TCP ACK from the client to the VIP.
func benchFrame(sport uint16) ([]byte, error) {
	return benchSegment(benchClient, benchSrc, benchVIP, sport, 80, &layers.TCP{ACK: true, Seq: 1, Ack: 1})
}

// benchSegment builds a 64-byte TCP segment with tcp's flags and numbers.
func benchSegment(srcMAC [6]byte, src, dst netip.Addr, sport, dport uint16, tcp *layers.TCP) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(benchMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	tcp.SrcPort, tcp.DstPort, tcp.Window = layers.TCPPort(sport), layers.TCPPort(dport), 512
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(make([]byte, 6)))
	return buf.Bytes(), err
}

// benchHandshake opens the client's connection from port sport, which round robin gives to
// server: SYN, the server's SYN+ACK, the client's ACK.
func benchHandshake(eng *datapath.Engine, sport uint16, server netip.Addr) error {
	syn, err := benchSegment(benchClient, benchSrc, benchVIP, sport, 80, &layers.TCP{SYN: true, Seq: 0})
	if err != nil {
		return err
	}
	synAck, err := benchSegment([6]byte{0x02, 0, 0, 0, 0xbf, 0}, server, benchSrc, 80, sport, &layers.TCP{SYN: true, ACK: true, Seq: 0, Ack: 1})
	if err != nil {
		return err
	}
	ack, err := benchSegment(benchClient, benchSrc, benchVIP, sport, 80, &layers.TCP{ACK: true, Seq: 1, Ack: 1})
	if err != nil {
		return err
	}
	eng.BeginBurst(benchClock)
	defer eng.EndBurst()
	for _, f := range [][]byte{syn, synAck, ack} {
		buf := make([]byte, len(f), 2048)
		copy(buf, f)
		if r := eng.Process(buf, 0); r.Action != datapath.ActionForward {
			return fmt.Errorf("handshake of flow %d: %+v", sport, r)
		}
	}
	return nil
}

// benchARPReply teaches the engine a neighbour's MAC.
func benchARPReply(ip netip.Addr, mac [6]byte) []byte {
	f := make([]byte, 60)
	copy(f[0:6], benchMAC[:])
	copy(f[6:12], mac[:])
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 2)
	copy(a[8:14], mac[:])
	ip4 := ip.As4()
	copy(a[14:18], ip4[:])
	copy(a[18:24], benchMAC[:])
	copy(a[24:28], []byte{198, 51, 100, 1})
	return f
}

// benchSnapshot is the benchmarks' configuration: one half-NAT round-robin rule on the VIP's
// port 80 over the three servers.
func benchSnapshot() (*atomic.Pointer[rules.Snapshot], error) {
	cfg := rules.Config{}
	cfg.CreateServerGroup("sg")
	for _, s := range benchServer {
		cfg.AddServer("sg", rules.ServerSpec{Addr: s})
	}
	if err := cfg.CreateRule(rules.Rule{Name: "web", Enabled: true, VIP: benchVIP, Proto: rules.ProtoTCP,
		MinPort: 80, MaxPort: 80, Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, ServerGroup: "sg"}); err != nil {
		return nil, err
	}
	snap := &atomic.Pointer[rules.Snapshot]{}
	snap.Store(rules.Compile(&cfg, 1, func(string) uint64 { return 1 }))
	return snap, nil
}

// benchReplayPort sets a replay port up with queues rx and tx queues and a pool of mbufs.
func benchReplayPort(name string, queues uint16, mbufs uint32) (dpdk.Port, *dpdk.Mempool, error) {
	port, err := dpdk.PortByName(name)
	if err != nil {
		return 0, nil, fmt.Errorf("no %s port (EAL was not given the capture): %w", name, err)
	}
	pool, err := dpdk.NewPktPool(name+"_pool", mbufs, 256, 0, dpdk.SocketAny)
	if err != nil {
		return 0, nil, err
	}
	if err := port.Setup(dpdk.PortConf{RxQueues: queues, TxQueues: queues, RxDesc: ringDesc, TxDesc: ringDesc}, pool); err != nil {
		return 0, nil, err
	}
	return port, pool, nil
}

// benchEngine is worker w of n over the benchmarks' port, with the servers and clients
// resolved before traffic, as ilbd's proactive ARP does.
func benchEngine(snap *atomic.Pointer[rules.Snapshot], w, n int, clients []netip.Addr) (*datapath.Engine, error) {
	eng, err := datapath.New(datapath.Config{Snapshot: snap, ConnCapacity: 1 << 16, WorkerIndex: w, WorkerCount: n, Handoff: n > 1,
		Ports: []datapath.PortConfig{{MAC: benchMAC,
			Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("192.0.2.1/24")}}}})
	if err != nil {
		return nil, err
	}
	eng.BeginBurst(benchClock)
	for i, s := range benchServer {
		eng.Process(benchARPReply(s, [6]byte{0x02, 0, 0, 0, 0xbf, byte(i)}), 0)
	}
	for _, c := range clients {
		eng.Process(benchARPReply(c, benchClient), 0)
	}
	eng.EndBurst()
	return eng, nil
}

// benchClock is the worker time the benchmark runs at, carried across runs.
var benchClock int64 = 1

// benchDataplane sets the replay port and its engine up once for every run of the benchmark
// (a port can be configured only once in the process).
var benchDataplane = sync.OnceValues(func() (*Dataplane, error) {
	port, pool, err := benchReplayPort(benchPort, 1, 16383)
	if err != nil {
		return nil, err
	}
	snap, err := benchSnapshot()
	if err != nil {
		return nil, err
	}
	eng, err := benchEngine(snap, 0, 1, []netip.Addr{benchSrc})
	if err != nil {
		return nil, err
	}
	// Open every replayed flow with a whole handshake, so the replay is of established
	// connections (a bare ACK opens none).
	for i := 0; i < benchFlows; i++ {
		if err := benchHandshake(eng, uint16(10000+i), benchServer[i%len(benchServer)]); err != nil {
			return nil, err
		}
	}

	return &Dataplane{ports: []dpdk.Port{port}, taps: []dpdk.Port{noTap}, pool: pool, engine: eng,
		log: log.New(os.Stderr, "", 0), exc: make([]exceptionCounters, 1), names: []string{benchPort}, tapNames: []string{""}}, nil
})

func BenchmarkWorkerHalfNATEstablished(b *testing.B) {
	dp, err := benchDataplane()
	if err != nil {
		b.Skip(err)
	}
	eng := dp.engine
	lcore := dpdk.WorkerLcores()[0]
	var received uint64
	run := func(iterations int) {
		if err := dpdk.Launch(lcore, func() int {
			w := dp.newWorker(0)
			defer w.io.Free()
			start := time.Now()
			var got uint64
			for i := 0; i < iterations; i++ {
				got += uint64(dp.poll(w, benchClock+int64(time.Since(start))))
			}
			// One more iteration a second later publishes the counters (the engine
			// publishes at most once per millisecond of worker time).
			benchClock += int64(time.Since(start)) + int64(time.Second)
			dp.poll(w, benchClock)
			dp.flush(w)
			received = got
			return 0
		}); err != nil {
			b.Fatal(err)
		}
		dpdk.Wait(lcore)
	}
	run(2000) // warm up
	before := eng.Stats().Global
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	run(b.N)
	elapsed := time.Since(start)
	b.StopTimer()
	after := eng.Stats().Global
	if received == 0 || after.Forwarded-before.Forwarded < received {
		b.Fatalf("received %d but forwarded %d: %+v", received, after.Forwarded-before.Forwarded, after)
	}
	if dropped := after.Dropped - before.Dropped; dropped != 0 {
		b.Fatalf("%d frames dropped on an established-flow replay: %+v", dropped, after)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(received), "ns/pkt")
	b.ReportMetric(float64(received)/elapsed.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(received)/float64(b.N), "pkts/burst")
	if os.Getenv("ILB_DPDK_HUGE") == "" {
		b.Log("running with --no-huge: set ILB_DPDK_HUGE=1 with hugepages reserved (make bench) for real figures")
	}
}
