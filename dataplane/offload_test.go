package dataplane

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// These tests build their own network namespaces and veths (nothing else is touched) and
// run kernelPortOffloads from inside one of them, as ilbd would run in its namespace.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and veths and changes their offloads")
	}
}

var offNSSeq atomic.Int32

// testNS creates a named network namespace (removed with the test) and returns its name.
func testNS(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("ilboff%d-%d", os.Getpid(), offNSSeq.Add(1))
	ip, err := exec.LookPath("ip")
	if err != nil {
		ip = "/usr/sbin/ip"
	}
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

// inTestNS runs fn on a locked OS thread inside the named namespace.
func inTestNS(t *testing.T, name string, fn func() error) {
	t.Helper()
	f, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := inNetns(f, fn); err != nil {
		t.Fatalf("in namespace %s: %v", name, err)
	}
}

// addVeth creates the veth pair dev/peer in namespace ns, the peer in peerNS (nil: ns).
func addVeth(t *testing.T, ns, dev, peer string, peerNS any) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = dev
	if err := nh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer, PeerNamespace: peerNS}); err != nil {
		t.Fatalf("veth %s/%s in %s: %v", dev, peer, ns, err)
	}
}

// features reads (change == nil) or changes the features of dev in namespace ns.
func features(t *testing.T, ns, dev string, change map[string]bool) map[string]bool {
	t.Helper()
	var got map[string]bool
	inTestNS(t, ns, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		if change != nil {
			if err := e.Change(dev, change); err != nil {
				return fmt.Errorf("change %v on %s: %w", change, dev, err)
			}
		}
		got, err = e.Features(dev)
		return err
	})
	return got
}

// runOffloads runs kernelPortOffloads inside ns and returns its restore function (to be
// run in ns too) and the log.
func runOffloads(t *testing.T, ns string, ports []Port) (restore func(), logged *bytes.Buffer) {
	t.Helper()
	logged = &bytes.Buffer{}
	logger := log.New(logged, "", 0)
	var undo func()
	inTestNS(t, ns, func() error {
		undo = kernelPortOffloads(ports, logger)
		return nil
	})
	return func() { inTestNS(t, ns, func() error { undo(); return nil }) }, logged
}

// checkOff asserts that every feature of dev that sel selects is off.
func checkOff(t *testing.T, what string, feats map[string]bool, sel func(string) bool, mustHave ...string) {
	t.Helper()
	for name, on := range feats {
		if sel(name) && on {
			t.Errorf("%s: %s still on", what, name)
		}
	}
	for _, name := range mustHave {
		if _, ok := feats[name]; !ok {
			t.Errorf("%s: no feature %s at all", what, name)
		}
	}
}

func sameFeatures(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s is %v, was %v before ilbd", what, name, got[name], w)
		}
	}
}

// portLines returns the log lines about device.
func portLines(logged string, device string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(logged), "\n") {
		if strings.HasPrefix(l, "port "+device+":") {
			out = append(out, l)
		}
	}
	return out
}

// TestOffloadVethPeerInOtherNamespace: ilbd's interface va in namespace A, its veth peer
// vb in namespace B. Off on both ends as specified, restored exactly (a feature that was
// off before stays off), and a second run (as after kill -9) finds nothing to do.
func TestOffloadVethPeerInOtherNamespace(t *testing.T) {
	needRoot(t)
	a, b := testNS(t), testNS(t)
	bh, err := netns.GetFromName(b)
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	addVeth(t, a, "va", "vb", netlink.NsFd(bh))
	// GRO on on ilbd's end (off by default on a veth), so that there is some to turn off;
	// tx-gso-list off on the peer beforehand: it must stay off after the restore.
	features(t, a, "va", map[string]bool{"rx-gro": true, "rx-udp-gro-forwarding": true})
	features(t, b, "vb", map[string]bool{"tx-gso-list": false})
	origA, origB := features(t, a, "va", nil), features(t, b, "vb", nil)
	if !origA["rx-gro"] || !origB["tx-checksum-ip-generic"] || !origB["tx-tcp-segmentation"] {
		t.Fatalf("unexpected stock features: va %v, vb %v", origA, origB)
	}

	restore, logged := runOffloads(t, a, []Port{{Device: "net_af_packet0,iface=va"}})
	t.Logf("log:\n%s", logged)
	gotA, gotB := features(t, a, "va", nil), features(t, b, "vb", nil)
	checkOff(t, "va (ilbd's)", gotA, ownOffload, "rx-gro", "tx-tcp-segmentation", "tx-generic-segmentation")
	checkOff(t, "vb (peer)", gotB, peerOffload, "tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation")
	if !gotB["rx-checksum"] && origB["rx-checksum"] {
		t.Errorf("vb: rx-checksum turned off; only tx features are to change")
	}
	lines := portLines(logged.String(), "net_af_packet0,iface=va")
	if len(lines) != 1 {
		t.Fatalf("want one log line for the port, got %q", lines)
	}
	for _, want := range []string{
		"offloads off on va (", "rx-gro ", "and on its veth peer vb in namespace " + b + " (",
		"tx-checksum-ip-generic", "so that every frame reaches DPDK with complete checksums; restored at stop",
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line lacks %q: %s", want, lines[0])
		}
	}
	if _, peerPart, _ := strings.Cut(lines[0], "and on its veth peer"); strings.Contains(lines[0], "warning") || strings.Contains(peerPart, "tx-gso-list") {
		t.Errorf("log line (a warning, or tx-gso-list, off before, changed on the peer): %s", lines[0])
	}

	// Again, as an ilbd started after a kill -9 of this one: all off already.
	restore2, logged2 := runOffloads(t, a, []Port{{Device: "net_af_packet0,iface=va"}})
	if l := portLines(logged2.String(), "net_af_packet0,iface=va"); len(l) != 1 ||
		!strings.Contains(l[0], "offloads off on va (already off) and on its veth peer vb in namespace "+b+" (already off)") ||
		!strings.Contains(l[0], "nothing to restore at stop") {
		t.Errorf("second run logged %q", l)
	}
	restore2()
	sameFeatures(t, "va after a restore with nothing to restore", features(t, a, "va", nil), gotA)

	restore()
	sameFeatures(t, "va (ilbd's) after restore", features(t, a, "va", nil), origA)
	sameFeatures(t, "vb (peer) after restore", features(t, b, "vb", nil), origB)
	if !strings.Contains(logged.String(), "offloads restored on vb in namespace "+b+" (") {
		t.Errorf("no restore line in the log:\n%s", logged)
	}
}

// TestOffloadVethPeerInSameNamespace: both ends in ilbd's namespace (a bridge port's
// veth, say), through a net_af_xdp port; other kinds of ports are left alone.
func TestOffloadVethPeerInSameNamespace(t *testing.T) {
	needRoot(t)
	a := testNS(t)
	addVeth(t, a, "vc", "vd", nil)
	addVeth(t, a, "vx", "vy", nil)
	origC, origD := features(t, a, "vc", nil), features(t, a, "vd", nil)
	origX, origY := features(t, a, "vx", nil), features(t, a, "vy", nil)

	ports := []Port{
		{Device: "net_af_xdp0,iface=vc"},
		{Device: "net_tap0,iface=vx"}, {Device: "net_pcap0,iface=vy"}, {Device: "net_null0"},
		{Device: "net_ring0"}, {Device: "0000:03:00.0"},
	}
	restore, logged := runOffloads(t, a, ports)
	t.Logf("log:\n%s", logged)
	gotC, gotD := features(t, a, "vc", nil), features(t, a, "vd", nil)
	checkOff(t, "vc (ilbd's)", gotC, ownOffload, "tx-tcp-segmentation", "tx-generic-segmentation")
	checkOff(t, "vd (peer)", gotD, peerOffload, "tx-checksum-ip-generic", "tx-tcp-segmentation")
	lines := portLines(logged.String(), "net_af_xdp0,iface=vc")
	if len(lines) != 1 || !strings.Contains(lines[0], "offloads off on vc (") ||
		!strings.Contains(lines[0], "and on its veth peer vd (tx-checksum-ip-generic ") ||
		!strings.Contains(lines[0], "restored at stop") {
		t.Errorf("log lines for the port: %q", lines)
	}
	if n := strings.Count(strings.TrimSpace(logged.String()), "\n") + 1; n != 1 {
		t.Errorf("other ports logged too:\n%s", logged)
	}
	sameFeatures(t, "vx (net_tap port: untouched)", features(t, a, "vx", nil), origX)
	sameFeatures(t, "vy (net_pcap port: untouched)", features(t, a, "vy", nil), origY)

	restore()
	sameFeatures(t, "vc after restore", features(t, a, "vc", nil), origC)
	sameFeatures(t, "vd after restore", features(t, a, "vd", nil), origD)
}

// TestOffloadPeerOnlyAProcessHolds: the peer's namespace has no name, only a process is in
// it (as with most containers): found through /proc/PID/ns/net.
func TestOffloadPeerOnlyAProcessHolds(t *testing.T) {
	needRoot(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	a := testNS(t)
	holder := exec.Command(unshare, "--net", "sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	pid := holder.Process.Pid
	own, _ := os.Readlink("/proc/self/ns/net")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l != own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare --net did not enter a namespace")
		}
	}
	addVeth(t, a, "vp", "vq", netlink.NsPid(pid))
	readQ := func() map[string]bool {
		var got map[string]bool
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := inNetns(f, func() error {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer e.Close()
			got, err = e.Features("vq")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	origQ := readQ()

	restore, logged := runOffloads(t, a, []Port{{Device: "net_af_packet0,iface=vp"}})
	t.Logf("log:\n%s", logged)
	checkOff(t, "vq (peer)", readQ(), peerOffload, "tx-checksum-ip-generic")
	lines := portLines(logged.String(), "net_af_packet0,iface=vp")
	if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("and on its veth peer vq in the network namespace of pid %d with nsid ", pid)) {
		t.Errorf("log lines for the port: %q", lines)
	}
	restore()
	sameFeatures(t, "vq after restore", readQ(), origQ)
}

// TestOffloadUnreachablePeerWarning: the peer is in a namespace that neither has a name
// nor holds a process (only a file descriptor keeps it): one warning with the command, and
// ilbd's own end is still handled.
func TestOffloadUnreachablePeerWarning(t *testing.T) {
	needRoot(t)
	a := testNS(t)
	// An anonymous namespace, held only by this file descriptor.
	hidden := make(chan netns.NsHandle, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			hidden <- -1
			return
		}
		h, err := netns.New()
		if err != nil {
			hidden <- -1
			return
		}
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		hidden <- h
	}()
	h := <-hidden
	if h < 0 {
		t.Fatal("could not create an anonymous namespace")
	}
	defer h.Close()
	addVeth(t, a, "vu", "vv", netlink.NsFd(h))
	origU := features(t, a, "vu", nil)

	restore, logged := runOffloads(t, a, []Port{{Device: "net_af_packet0,iface=vu"}})
	t.Logf("log:\n%s", logged)
	checkOff(t, "vu (ilbd's)", features(t, a, "vu", nil), ownOffload, "tx-tcp-segmentation")
	lines := portLines(logged.String(), "net_af_packet0,iface=vu")
	if len(lines) != 1 {
		t.Fatalf("want one warning, got %q", lines)
	}
	for _, want := range []string{
		"warning", "offloads off on vu (", "not on its veth peer",
		"that ilbd finds in none of /run/netns",
		"incomplete checksums",
		"run: in that namespace: ethtool -K <the interface of ifindex ",
		"> tx off tso off gso off",
	} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("warning lacks %q: %s", want, lines[0])
		}
	}
	restore()
	sameFeatures(t, "vu after restore", features(t, a, "vu", nil), origU)
}

// TestOffloadCommands: the commands the warnings give, for each kind of place.
func TestOffloadCommands(t *testing.T) {
	for _, c := range []struct {
		p    netnsPlace
		want string
	}{
		{netnsPlace{path: "/run/netns/web", name: "web"}, "ip netns exec web ethtool -K eth0 tx off tso off gso off"},
		{netnsPlace{path: "/proc/4242/ns/net", pid: 4242}, "nsenter --net=/proc/4242/ns/net ethtool -K eth0 tx off tso off gso off"},
	} {
		if got := c.p.command(fmt.Sprintf(peerFixCommand, "eth0")); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
	for dev, want := range map[string]string{
		"net_af_packet0,iface=lbc":         "lbc",
		"eth_af_packet1,qpairs=2,iface=x0": "x0",
		"net_af_xdp0,iface=eth1,queue=0":   "eth1",
		"net_tap0,iface=tap0":              "",
		"net_pcap0,iface=eth0":             "",
		"net_null0":                        "",
		"0000:03:00.0":                     "",
	} {
		if got := kernelPortIface(dev); got != want {
			t.Errorf("kernelPortIface(%q) = %q, want %q", dev, got, want)
		}
	}
	for f, want := range map[string]bool{"rx-gro": true, "rx-lro": true, "tx-tcp6-segmentation": true,
		"tx-generic-segmentation": true, "tx-checksum-ip-generic": false, "rx-checksum": false} {
		if ownOffload(f) != want {
			t.Errorf("ownOffload(%s) = %v", f, !want)
		}
	}
	for f, want := range map[string]bool{"tx-checksum-ip-generic": true, "tx-checksum-sctp": true,
		"tx-tcp-segmentation": true, "tx-generic-segmentation": true, "rx-gro": false, "rx-checksum": false} {
		if peerOffload(f) != want {
			t.Errorf("peerOffload(%s) = %v", f, !want)
		}
	}
}
