package hc

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The built-in probes against real sockets on the loopback interface.

func loopback(t *testing.T, port int) netip.AddrPort {
	t.Helper()
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}

func deadlineIn(d time.Duration) time.Time { return time.Now().Add(d) }

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	out := tcpProbe(context.Background(), loopback(t, port), deadlineIn(2*time.Second))
	if !out.OK || out.RTT <= 0 {
		t.Fatalf("listener up: %+v", out)
	}
	select {
	case <-accepted:
	case <-time.After(2 * time.Second):
		t.Fatal("the probe's connection never reached the listener")
	}
	l.Close()
	start := time.Now()
	out = tcpProbe(context.Background(), loopback(t, port), deadlineIn(2*time.Second))
	if out.OK || !errors.Is(out.Err, syscall.ECONNREFUSED) {
		t.Fatalf("listener down: %+v", out)
	}
	if time.Since(start) > time.Second {
		t.Errorf("a refused connection took %v", time.Since(start))
	}
	if out := tcpProbe(context.Background(), loopback(t, 0), deadlineIn(time.Second)); out.OK {
		t.Error("port 0 succeeded")
	}
}

func TestUDPProbe(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 100)
		n, _, err := c.ReadFromUDP(buf)
		if err == nil {
			got <- n
		}
	}()
	// A silent listener: no ICMP error within 3/4 of the timeout means alive, without RTT.
	start := time.Now()
	out := udpProbe(context.Background(), loopback(t, port), 400*time.Millisecond)
	if el := time.Since(start); !out.OK || out.RTT != 0 || el < 400*time.Millisecond || el > 2*time.Second {
		t.Fatalf("silent listener: %+v after %v (want alive without RTT after the 400ms wait)", out, el)
	}
	select {
	case n := <-got:
		if n != 0 {
			t.Errorf("the probe sent %d bytes, want an empty datagram", n)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the probe's datagram never arrived")
	}
	// An answering listener: alive with RTT.
	go func() {
		buf := make([]byte, 100)
		if _, peer, err := c.ReadFromUDP(buf); err == nil {
			c.WriteToUDP([]byte("hi"), peer)
		}
	}()
	out = udpProbe(context.Background(), loopback(t, port), 2*time.Second)
	if !out.OK || out.RTT <= 0 {
		t.Fatalf("answering listener: %+v", out)
	}
	// No listener: the ICMP port unreachable arrives as ECONNREFUSED, at once.
	c.Close()
	start = time.Now()
	out = udpProbe(context.Background(), loopback(t, port), 2*time.Second)
	if out.OK || !errors.Is(out.Err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
		t.Fatalf("no listener: %+v after %v", out, time.Since(start))
	}
}

func TestPingLoopback(t *testing.T) {
	out := ping(context.Background(), netip.MustParseAddr("127.0.0.1"), deadlineIn(2*time.Second))
	if !out.OK || out.RTT <= 0 {
		t.Fatalf("ping 127.0.0.1: %+v", out)
	}
	if _, err := os.Stat("/proc/sys/net/ipv6/conf/lo"); err == nil {
		out := ping(context.Background(), netip.MustParseAddr("::1"), deadlineIn(2*time.Second))
		if !out.OK || out.RTT <= 0 {
			t.Fatalf("ping ::1: %+v", out)
		}
	}
}

// inIsolatedNetns runs fn on a thread in a new network namespace of its own (dropped with
// the thread afterwards) where lo is up and veth va (192.0.2.1/24) has a permanent neighbour
// 192.0.2.2 that never answers: packets to it vanish without an error. Nothing leaves the
// machine: va's peer is vb, in the same namespace, and drops frames not addressed to it.
func inIsolatedNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		err := func() error {
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(lo); err != nil {
				return err
			}
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va"}, PeerName: "vb"}); err != nil {
				return err
			}
			va, err := netlink.LinkByName("va")
			if err != nil {
				return err
			}
			vb, err := netlink.LinkByName("vb")
			if err != nil {
				return err
			}
			a, _ := netlink.ParseAddr("192.0.2.1/24")
			if err := netlink.AddrAdd(va, a); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(va); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(vb); err != nil {
				return err
			}
			return netlink.NeighAdd(&netlink.Neigh{LinkIndex: va.Attrs().Index, IP: net.ParseIP("192.0.2.2"),
				HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}, State: netlink.NUD_PERMANENT})
		}()
		if err == nil {
			fn()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Skipf("cannot build an isolated network namespace: %v", err)
	}
}

// Probes to a server that never answers give up at their deadline.
func TestProbesBoundedByTimeout(t *testing.T) {
	silent := netip.MustParseAddr("192.0.2.2")
	inIsolatedNetns(t, func() {
		start := time.Now()
		if out := ping(context.Background(), silent, deadlineIn(500*time.Millisecond)); out.OK {
			t.Errorf("ping of a silent host: %+v", out)
		}
		if el := time.Since(start); el < 450*time.Millisecond || el > 1500*time.Millisecond {
			t.Errorf("ping gave up after %v, want the 500ms timeout", el)
		}
		start = time.Now()
		if out := tcpProbe(context.Background(), netip.AddrPortFrom(silent, 80), deadlineIn(500*time.Millisecond)); out.OK {
			t.Errorf("TCP to a silent host: %+v", out)
		}
		if el := time.Since(start); el < 450*time.Millisecond || el > 1500*time.Millisecond {
			t.Errorf("TCP gave up after %v, want the 500ms timeout", el)
		}
		// UDP: silence means alive (Solaris' ilb_probe printed 0).
		if out := udpProbe(context.Background(), netip.AddrPortFrom(silent, 53), 300*time.Millisecond); !out.OK || out.RTT != 0 {
			t.Errorf("UDP to a silent host: %+v", out)
		}
		// A cancelled context ends a probe at once.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start = time.Now()
		if out := ping(ctx, silent, deadlineIn(5*time.Second)); out.OK {
			t.Errorf("cancelled ping: %+v", out)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("cancelled ping returned after %v", el)
		}
		// Through System.Run, with hc-timeout seconds.
		s := &System{}
		start = time.Now()
		if out := s.Run(context.Background(), Probe{Test: TestTCP, Server: silent, Port: 80, TimeoutSec: 1}); out.OK {
			t.Errorf("System TCP: %+v", out)
		}
		if el := time.Since(start); el < 900*time.Millisecond || el > 2500*time.Millisecond {
			t.Errorf("System TCP with hc-timeout 1 gave up after %v", el)
		}
	})
}

// The ping target is the server's address, whatever the topology (no IP_NEXTHOP on Linux).
func TestSystemPing(t *testing.T) {
	s := &System{}
	for _, p := range []Probe{
		{Test: TestPing, VIP: netip.MustParseAddr("203.0.113.10"), Server: netip.MustParseAddr("127.0.0.1"), TimeoutSec: 2, Topo: 1},
		{Test: TestPing, VIP: netip.MustParseAddr("203.0.113.10"), Server: netip.MustParseAddr("127.0.0.1"), TimeoutSec: 2, Topo: 3},
	} {
		if out := s.Run(context.Background(), p); !out.OK || out.RTT <= 0 {
			t.Errorf("%+v: %+v", p, out)
		}
	}
}
