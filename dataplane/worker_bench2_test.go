package dataplane

import (
	"fmt"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dpdk"
)

// The whole-worker benchmark on two workers: a net_pcap port with two rx queues, each replaying
// the established half-NAT flows of the clients its worker owns (what RSS or a flow rule gives
// on a NIC), so the figure is the workers' combined rate without hand-offs.

const bench2Port = "net_pcap_ilbbench2"

// bench2Clients are the clients of the two-worker replay: 64 addresses, 16 flows each.
func bench2Clients() []netip.Addr {
	var out []netip.Addr
	for i := 0; i < 64; i++ {
		out = append(out, netip.AddrFrom4([4]byte{198, 51, 100, byte(64 + i)}))
	}
	return out
}

// bench2Vdev writes one capture per worker and returns the vdev argument.
func bench2Vdev() (string, error) {
	dir, err := os.MkdirTemp("", "ilbd-bench2")
	if err != nil {
		return "", err
	}
	arg := "--vdev=" + bench2Port
	for w := 0; w < 2; w++ {
		path := filepath.Join(dir, fmt.Sprintf("worker%d.pcap", w))
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		pw := pcapgo.NewWriter(f)
		if err := pw.WriteFileHeader(2048, layers.LinkTypeEthernet); err != nil {
			return "", err
		}
		for _, c := range bench2Clients() {
			if datapath.OwnerOfClient(c, 2) != w {
				continue
			}
			for k := 0; k < 16; k++ {
				frame, err := benchSegment(benchClient, c, benchVIP, uint16(10000+k), 80, &layers.TCP{ACK: true, Seq: 1, Ack: 1})
				if err != nil {
					return "", err
				}
				ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}
				if err := pw.WritePacket(ci, frame); err != nil {
					return "", err
				}
			}
		}
		f.Close()
		arg += ",rx_pcap=" + path
	}
	return arg + ",infinite_rx=1", nil
}

// bench2Dataplane sets the two-worker replay up once.
var bench2Dataplane = sync.OnceValues(func() (*Dataplane, error) {
	lcores := dpdk.WorkerLcores()
	if len(lcores) < 2 {
		return nil, fmt.Errorf("%d worker lcores, want 2", len(lcores))
	}
	port, pool, err := benchReplayPort(bench2Port, 2, 32767)
	if err != nil {
		return nil, err
	}
	snap, err := benchSnapshot()
	if err != nil {
		return nil, err
	}
	dp := &Dataplane{ports: []dpdk.Port{port}, taps: []dpdk.Port{noTap}, pool: pool, lcores: lcores[:2],
		log: log.New(os.Stderr, "", 0), exc: make([]exceptionCounters, 1), names: []string{bench2Port}, tapNames: []string{""}}
	for w := 0; w < 2; w++ {
		eng, err := benchEngine(snap, w, 2, bench2Clients())
		if err != nil {
			return nil, err
		}
		dp.engines = append(dp.engines, eng)
	}
	dp.engine = dp.engines[0]
	dp.wstats = make([]workerCounters, 2)
	if err := dp.setupRings(2); err != nil {
		return nil, err
	}
	dp.indexPorts()
	// Every replayed flow is opened on its owner; round robin per worker picks the server.
	next := [2]int{}
	for _, c := range bench2Clients() {
		w := datapath.OwnerOfClient(c, 2)
		for k := 0; k < 16; k++ {
			if err := benchHandshakeFrom(dp.engines[w], c, uint16(10000+k), benchServer[next[w]%len(benchServer)]); err != nil {
				return nil, err
			}
			next[w]++
		}
	}
	return dp, nil
})

// BenchmarkWorkerHalfNATEstablished2Workers runs both workers on their lcores for b.N
// iterations each over the two-queue replay.
func BenchmarkWorkerHalfNATEstablished2Workers(b *testing.B) {
	dp, err := bench2Dataplane()
	if err != nil {
		b.Skip(err)
	}
	var received [2]uint64
	run := func(iterations int) time.Duration {
		start := time.Now()
		done := make(chan struct{}, 2)
		for w := 0; w < 2; w++ {
			if err := dpdk.Launch(dp.lcores[w], func() int {
				wk := dp.newWorker(w)
				defer wk.io.Free()
				t0 := time.Now()
				var got uint64
				for i := 0; i < iterations; i++ {
					got += uint64(dp.poll(wk, benchClock+int64(time.Since(t0))))
				}
				dp.poll(wk, benchClock+int64(time.Since(t0))+int64(time.Second))
				dp.flush(wk)
				received[w] = got
				done <- struct{}{}
				return 0
			}); err != nil {
				b.Fatal(err)
			}
		}
		// Block in Go, not in rte_eal_wait_lcore, which spins: worker 2 shares the main
		// lcore's CPU.
		<-done
		<-done
		dpdk.Wait(dp.lcores[0])
		dpdk.Wait(dp.lcores[1])
		elapsed := time.Since(start)
		benchClock += int64(elapsed) + int64(2*time.Second)
		return elapsed
	}
	run(2000)
	before := dp.Stats().Global
	b.ReportAllocs()
	b.ResetTimer()
	elapsed := run(b.N)
	b.StopTimer()
	after := dp.Stats().Global
	total := received[0] + received[1]
	if total == 0 || after.Forwarded-before.Forwarded < total {
		b.Fatalf("received %v but forwarded %d", received, after.Forwarded-before.Forwarded)
	}
	if d, h := after.Dropped-before.Dropped, after.HandoffOut-before.HandoffOut; d != 0 || h != 0 {
		b.Fatalf("%d frames dropped, %d handed off on a replay of owned flows", d, h)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total), "ns/pkt")
	b.ReportMetric(float64(received[1])/float64(total)*100, "%worker1")
	if os.Getenv("ILB_DPDK_HUGE") == "" {
		b.Log("running with --no-huge: set ILB_DPDK_HUGE=1 with hugepages reserved (make bench) for real figures")
	}
}

// benchHandshakeFrom opens client's connection from port sport to server on eng.
func benchHandshakeFrom(eng *datapath.Engine, client netip.Addr, sport uint16, server netip.Addr) error {
	syn, _ := benchSegment(benchClient, client, benchVIP, sport, 80, &layers.TCP{SYN: true, Seq: 0})
	synAck, _ := benchSegment([6]byte{0x02, 0, 0, 0, 0xbf, 0}, server, client, 80, sport, &layers.TCP{SYN: true, ACK: true, Seq: 0, Ack: 1})
	ack, _ := benchSegment(benchClient, client, benchVIP, sport, 80, &layers.TCP{ACK: true, Seq: 1, Ack: 1})
	eng.BeginBurst(benchClock)
	defer eng.EndBurst()
	for i, f := range [][]byte{syn, synAck, ack} {
		buf := make([]byte, len(f), 2048)
		copy(buf, f)
		if r := eng.Process(buf, 0); r.Action != datapath.ActionForward {
			return fmt.Errorf("handshake of %v:%d, packet %d: %+v", client, sport, i, r)
		}
	}
	return nil
}
