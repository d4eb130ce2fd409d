package dpdk_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ilbgo/ilb/dpdk"
	"github.com/ilbgo/ilb/dpdk/dpdktest"
)

// The af_packet test needs EAL to run inside a network namespace the test
// owns, with the interface present at EAL init (vdevs are probed then).
// TestAFPacket creates the namespace and a veth pair in it, then re-runs
// this test binary there through `ip netns exec` with afpEnv set; that
// child initialises EAL on one veth end and runs TestAFPacketChild.
const (
	afpEnv  = "ILB_DPDK_AFP_CHILD" // "dpdkIface,peerIface" in the child
	afpDPDK = "ilbv0"              // attached to net_af_packet0
	afpPeer = "ilbv1"              // the kernel side
	afpN    = 16                   // frames each way
)

func afpChildIface() string {
	dpdkSide, _, _ := strings.Cut(os.Getenv(afpEnv), ",")
	return dpdkSide
}

func TestAFPacket(t *testing.T) {
	if afpChildIface() != "" {
		t.Skip("this is the child process")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and a veth pair")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	ns := fmt.Sprintf("ilbdpdk%d", os.Getpid())
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns); err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := run("netns", "del", ns); err != nil { // also deletes the veth pair
			t.Error(err)
		}
	})
	for _, args := range [][]string{
		{"-n", ns, "link", "add", afpDPDK, "type", "veth", "peer", "name", afpPeer},
		{"-n", ns, "link", "set", afpDPDK, "up"},
		{"-n", ns, "link", "set", afpPeer, "up"},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ip, "netns", "exec", ns, os.Args[0],
		"-test.run=^TestAFPacketChild$", "-test.v", "-test.count=1", "-test.timeout=50s")
	// The child is functional only: keep it on --no-huge so that it does not
	// compete with this process for reserved hugepages.
	cmd.Env = append(os.Environ(), afpEnv+"="+afpDPDK+","+afpPeer, dpdktest.EnvHuge+"=0")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestAFPacketChild")) {
		t.Fatal("child did not pass TestAFPacketChild")
	}
}

// TestAFPacketChild runs in the namespace: frames sent by DPDK arrive on the
// kernel peer byte for byte, and frames the kernel peer sends arrive in Run.
func TestAFPacketChild(t *testing.T) {
	_, peerName, _ := strings.Cut(os.Getenv(afpEnv), ",")
	if peerName == "" {
		t.Skip("run by TestAFPacket inside its network namespace")
	}
	pool := newPool(t, "t_afp", 1023)
	port, err := dpdk.PortByName("net_af_packet0")
	if err != nil {
		t.Fatal(err)
	}
	// af_packet has one queue pair unless the qpairs devarg says otherwise;
	// the queue counts must match it.
	if err := port.Setup(dpdk.PortConf{RxQueues: 1, TxQueues: 1}, pool); err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	defer port.Stop()
	mac, err := port.MAC()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.InterfaceByName(peerName)
	if err != nil {
		t.Fatal(err)
	}
	var peerMAC [6]byte
	copy(peerMAC[:], peer.HardwareAddr)

	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: peer.Index}); err != nil {
		t.Fatal(err)
	}
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}

	io := dpdk.NewIO(int(port) + 1)
	defer io.Free()

	// DPDK -> kernel.
	out := make([][]byte, afpN)
	for i := range out {
		out[i] = dpdktest.UDP4(peerMAC, mac, [4]byte{192, 0, 2, 1}, [4]byte{192, 0, 2, 2},
			uint16(4000+i), 5000, []byte(fmt.Sprintf("ilb-afp-out-%02d", i)))
	}
	var ms [afpN]*dpdk.Mbuf
	if err := pool.AllocBulk(ms[:]); err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		m.SetLen(copy(m.Room()[:len(out[i])], out[i]))
		io.Tx(int(port), m)
	}
	io.Run(port, 0, 0)
	dropAll(io)
	got := map[int][]byte{}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < afpN && time.Now().Before(deadline) {
		n, from, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // timeout: try again until the deadline
		}
		if ll, ok := from.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == syscall.PACKET_OUTGOING {
			continue
		}
		if i, ok := marker(buf[:n], "ilb-afp-out-"); ok {
			got[i] = append([]byte(nil), buf[:n]...)
		}
	}
	if len(got) != afpN {
		t.Fatalf("kernel peer saw %d of %d frames sent by DPDK", len(got), afpN)
	}
	for i, f := range got {
		if !bytes.Equal(f, out[i]) {
			t.Errorf("frame %d on the peer:\n got %x\nwant %x", i, f, out[i])
		}
	}

	// kernel -> DPDK.
	in := make([][]byte, afpN)
	to := &syscall.SockaddrLinklayer{Protocol: htons(0x0800), Ifindex: peer.Index, Halen: 6}
	copy(to.Addr[:], mac[:])
	for i := range in {
		in[i] = dpdktest.UDP4(mac, peerMAC, [4]byte{192, 0, 2, 2}, [4]byte{192, 0, 2, 1},
			5000, uint16(4000+i), []byte(fmt.Sprintf("ilb-afp-in-%02d", i)))
		if err := syscall.Sendto(fd, in[i], 0, to); err != nil {
			t.Fatal(err)
		}
	}
	rcvd := map[int][]byte{}
	deadline = time.Now().Add(5 * time.Second)
	for len(rcvd) < afpN && time.Now().Before(deadline) {
		n := io.Run(port, 0, 0)
		for _, m := range io.Received() {
			if i, ok := marker(m.Data(), "ilb-afp-in-"); ok {
				rcvd[i] = append([]byte(nil), m.Data()...)
			}
		}
		dropAll(io)
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	io.Run(port, 0, 0) // free the drop list
	dropAll(io)
	if len(rcvd) != afpN {
		t.Fatalf("DPDK received %d of %d frames sent by the kernel peer", len(rcvd), afpN)
	}
	for i, f := range rcvd {
		if !bytes.Equal(f, in[i]) {
			t.Errorf("frame %d in DPDK:\n got %x\nwant %x", i, f, in[i])
		}
	}
	st, err := port.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OPackets < afpN || st.IPackets < afpN {
		t.Errorf("stats %+v, want at least %d each way", st, afpN)
	}
	t.Logf("af_packet port %d (%x): %+v", port, mac, st)
}

// dropAll queues every mbuf of the last Run for freeing.
func dropAll(io *dpdk.IO) {
	for _, m := range io.Received() {
		io.Drop(m)
	}
}

// marker finds "<prefix>NN" in a frame and returns NN.
func marker(f []byte, prefix string) (int, bool) {
	i := bytes.Index(f, []byte(prefix))
	if i < 0 || i+len(prefix)+2 > len(f) {
		return 0, false
	}
	var n int
	_, err := fmt.Sscanf(string(f[i+len(prefix):i+len(prefix)+2]), "%02d", &n)
	return n, err == nil && n >= 0 && n < afpN
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
