package dpdk_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
)

var bench struct {
	once, note sync.Once
	port       dpdk.Port
	err        error
}

// benchNull sets the benchmark's net_null port up once per process; it stays
// up until EAL cleanup (benchmarks have no end-of-package hook).
func benchNull(b *testing.B) dpdk.Port {
	bench.once.Do(func() {
		var pool *dpdk.Mempool
		pool, bench.err = dpdk.NewPktPool("b_null", 8191, 256, 0, dpdk.SocketAny)
		if bench.err != nil {
			return
		}
		bench.port, bench.err = dpdk.PortByName(benchPort)
		if bench.err == nil {
			bench.err = bench.port.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1}, pool)
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	if !dpdktest.Hugepages() {
		bench.note.Do(func() {
			b.Log("running with --no-huge (4 KiB pages): expect 2.5-5x less than with hugepages; " +
				"reserve hugepages (vm.nr_hugepages; --in-memory needs no mount) and set " + dpdktest.EnvHuge + "=1 for real figures")
		})
	}
	return bench.port
}

// BenchmarkRunNull forwards every packet net_null delivers back to it, one
// IO.Run per burst, on the worker lcore. It reports packets per second;
// allocs/op must be 0.
func BenchmarkRunNull(b *testing.B) {
	port := benchNull(b)
	w := dpdk.WorkerLcores()[0]
	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()
	var pkts atomic.Int64
	loop := func() int {
		var total int
		for range b.N {
			n := io.Run(port, 0, 0)
			for i := range n {
				io.Tx(int(port), io.Rx(i))
			}
			total += n
		}
		pkts.Store(int64(total))
		return 0
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := dpdk.Launch(w, loop); err != nil {
		b.Fatal(err)
	}
	dpdk.Wait(w)
	b.StopTimer()
	n := float64(pkts.Load())
	b.ReportMetric(n/b.Elapsed().Seconds(), "pkts/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/max(n, 1), "ns/pkt")
}

// BenchmarkRunEmpty measures one IO.Run that moves nothing (an empty ring
// port): the fixed cost of a crossing on the calling goroutine.
func BenchmarkRunEmpty(b *testing.B) {
	pool := newPool(b, "b_empty", 255)
	port, _, _ := ringPort(b, "b_empty0", 64, pool)
	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		io.Run(port, 0, 0)
	}
}
