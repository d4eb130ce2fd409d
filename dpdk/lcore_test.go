package dpdk_test

import (
	"sync/atomic"
	"testing"

	"github.com/ilbgo/ilb/dpdk"
)

// TestLaunch runs a Go worker loop on the worker lcore (model A) against a
// net_null port and checks it ran there, forwarded every packet and
// returned its result through Wait.
func TestLaunch(t *testing.T) {
	workers := dpdk.WorkerLcores()
	if len(workers) == 0 {
		t.Fatal("no worker lcore (TestMain asks for two lcores)")
	}
	w := workers[0]
	pool := newPool(t, "t_launch", 8191)
	port := vdevPort(t, launchPort, pool)

	const iters = 300
	var seenLcore, received atomic.Uint64
	err := dpdk.Launch(w, func() int {
		seenLcore.Store(uint64(dpdk.LcoreID()))
		io := dpdk.NewIO(int(port) + 1) // created on the worker, as production does
		defer io.Free()
		var total int
		for range iters {
			n := io.Run(port, 0, 0)
			for i := range n {
				if m := io.Rx(i); !io.Tx(int(port), m) {
					io.Drop(m)
				}
			}
			total += n
		}
		io.Run(port, 0, 0) // flush the last burst
		for _, m := range io.Received() {
			io.Drop(m)
		}
		received.Store(uint64(total))
		return 42
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc := dpdk.Wait(w); rc != 42 {
		t.Errorf("Wait = %d, want the function's 42", rc)
	}
	if got := seenLcore.Load(); got != uint64(w) {
		t.Errorf("LcoreID() inside the launched function = %d, want %d", got, w)
	}
	if got := received.Load(); got != iters*dpdk.MaxBurst {
		t.Errorf("worker received %d, want %d", got, iters*dpdk.MaxBurst)
	}
	st, err := port.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OPackets != iters*dpdk.MaxBurst {
		t.Errorf("OPackets = %d, want %d", st.OPackets, iters*dpdk.MaxBurst)
	}
	if pool.InUse() != 0 {
		t.Errorf("InUse() = %d after the worker finished", pool.InUse())
	}

	// A busy lcore refuses a second launch; WaitAll waits for it.
	release := make(chan struct{})
	if err := dpdk.Launch(w, func() int { <-release; return 0 }); err != nil {
		t.Fatal(err)
	}
	if err := dpdk.Launch(w, func() int { return 0 }); err == nil {
		t.Error("Launch on a busy lcore succeeded")
	}
	close(release)
	dpdk.WaitAll()
}

// TestRegisterThread checks model B: a locked goroutine registered with EAL
// gets an lcore id of its own.
func TestRegisterThread(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		id, err := dpdk.RegisterThread()
		if err != nil {
			t.Error(err)
			return
		}
		defer dpdk.UnregisterThread()
		if id == dpdk.MainLcore() || id == dpdk.LcoreAny || dpdk.LcoreID() != id {
			t.Errorf("registered lcore %d, LcoreID() %d", id, dpdk.LcoreID())
		}
	}()
	<-done
}
