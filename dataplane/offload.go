package dataplane

// Offloads of kernel-backed ports.
//
// A net_af_packet or net_af_xdp port reads the frames of a kernel interface as raw bytes.
// The kernel, though, passes frames between its own devices with work left undone:
//
//   - a sender with tx checksum offload (every veth has it by default) leaves TCP/UDP
//     checksums partial (CHECKSUM_PARTIAL: only the pseudo-header sum is in the field),
//     and the flag travels with the frame through veths and bridges. A kernel receiver
//     trusts the flag; DPDK 22.11's af_packet PMD never learns it (it reads neither
//     PACKET_AUXDATA nor a virtio-net header), so ilbd would forward frames with wrong
//     checksums, which every real receiver drops;
//   - GRO/LRO (and TSO/GSO on a veth's sending end) make frames of up to 64 KiB, which the
//     PMD silently truncates to one mbuf.
//
// So before EAL opens the PMD's sockets, ilbd turns off GRO, LRO, TSO and GSO on the
// port's interface and, when that interface is a veth, tx checksum offload, TSO and GSO on
// its peer, wherever the peer lives (often in another network namespace: a container's,
// a bridge's): the kernel then completes every checksum, and segments every large frame,
// before the frame crosses over. Only features that were on and can be changed are turned
// off, and exactly those are turned on again when ilbd stops cleanly (after a kill -9 they
// stay off; the next ilbd finds them off and has nothing to restore). Where ilbd cannot
// reach the peer it logs one warning with the command that does it, and starts anyway.

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// peerFixCommand is what the administrator runs on a veth peer that ilbd cannot change
// itself (ethtool's "tx" covers every tx-checksum-* feature, "tso" every TCP segmentation
// feature, "gso" tx-generic-segmentation).
const peerFixCommand = "ethtool -K %s tx off tso off gso off"

// netnsDirs hold the named network namespaces (`ip netns add`).
var netnsDirs = []string{"/run/netns", "/var/run/netns"}

// kernelPortIface returns the kernel interface under a net_af_packet or net_af_xdp port
// ("net_af_xdp0,iface=eth1" -> "eth1"), or "" for any other device (PCI, net_tap,
// net_null, net_ring, net_pcap, ...).
func kernelPortIface(device string) string {
	if iface := afPacketIface(device); iface != "" {
		return iface
	}
	name, _, _ := strings.Cut(device, ",")
	if strings.HasPrefix(name, "net_af_xdp") {
		return deviceIface(device)
	}
	return ""
}

// isTCPSegmentation selects tx-tcp-segmentation, tx-tcp6-segmentation, tx-tcp-ecn-, -mangleid-,
// -accecn-segmentation and whatever TSO variant a kernel adds.
func isTCPSegmentation(f string) bool {
	return strings.HasPrefix(f, "tx-tcp") && strings.HasSuffix(f, "-segmentation")
}

// ownOffload selects the features turned off on a port's own interface: every kind of
// receive merging (GRO, LRO, hardware GRO, fraglist GRO, UDP GRO forwarding) and TSO/GSO.
func ownOffload(f string) bool {
	switch f {
	case "rx-gro", "rx-lro", "rx-gro-hw", "rx-gro-list", "rx-udp-gro-forwarding",
		"tx-generic-segmentation", "tx-udp-segmentation", "tx-gso-list":
		return true
	}
	return isTCPSegmentation(f)
}

// peerOffload selects the features turned off on the veth peer of a port's interface:
// every tx checksum offload, and TSO/GSO.
func peerOffload(f string) bool {
	switch f {
	case "tx-generic-segmentation", "tx-udp-segmentation", "tx-gso-list":
		return true
	}
	return strings.HasPrefix(f, "tx-checksum-") || isTCPSegmentation(f)
}

// featureChange records the features turned off on one interface.
type featureChange struct {
	dev   string
	index int
	off   []string // were on and changeable, now off: to be turned on again
	stuck []string // selected and on, but fixed by the driver or refused
}

// turnOff turns off, on interface dev of the calling thread's network namespace, every
// feature that want selects and that is on and changeable.
func turnOff(dev string, index int, want func(string) bool) (featureChange, error) {
	fc := featureChange{dev: dev, index: index}
	e, err := ethtool.NewEthtool() // an AF_INET socket: of this thread's namespace
	if err != nil {
		return fc, fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	state, err := e.FeaturesWithState(dev)
	if err != nil {
		return fc, fmt.Errorf("reading the features of %s: %w", dev, err)
	}
	req := map[string]bool{}
	for name, st := range state {
		if !want(name) || !st.Active {
			continue
		}
		if st.Available && !st.NeverChanged {
			req[name] = false
		} else {
			fc.stuck = append(fc.stuck, name)
		}
	}
	if len(req) > 0 {
		if err := e.Change(dev, req); err != nil {
			return fc, fmt.Errorf("turning off %s on %s: %w", strings.Join(sortedKeys(req), " "), dev, err)
		}
		now, err := e.Features(dev)
		for name := range req {
			if err == nil && now[name] {
				fc.stuck = append(fc.stuck, name)
			} else {
				fc.off = append(fc.off, name)
			}
		}
	}
	slices.Sort(fc.off)
	slices.Sort(fc.stuck)
	return fc, nil
}

// turnOn turns the recorded features on again, if the interface is still the one changed
// (same name and index in the calling thread's namespace); done is false when it is gone.
func (fc featureChange) turnOn() (done bool, err error) {
	if len(fc.off) == 0 {
		return false, nil
	}
	link, err := netlink.LinkByName(fc.dev)
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return false, nil // gone, and its features with it
		}
		return false, fmt.Errorf("interface %s: %w", fc.dev, err)
	}
	if link.Attrs().Index != fc.index {
		return false, nil // another interface of the same name now
	}
	e, err := ethtool.NewEthtool()
	if err != nil {
		return false, fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	req := map[string]bool{}
	for _, name := range fc.off {
		req[name] = true
	}
	if err := e.Change(fc.dev, req); err != nil {
		return false, fmt.Errorf("turning %s on again on %s: %w", strings.Join(fc.off, " "), fc.dev, err)
	}
	return true, nil
}

// netnsPlace is a network namespace other than ilbd's, found through a file that holds it.
type netnsPlace struct {
	path string // /run/netns/NAME or /proc/PID/ns/net
	name string // NAME under /run/netns; "" when only a process holds it
	pid  int
	ino  uint64 // identity of the namespace (its nsfs inode)
	nsid int    // its id as seen from ilbd's namespace (-1 unknown)
}

func (p netnsPlace) String() string {
	if p.name != "" {
		return "namespace " + p.name
	}
	return fmt.Sprintf("the network namespace of pid %d with nsid %d", p.pid, p.nsid)
}

// command prefixes cmd so that it runs inside the namespace.
func (p netnsPlace) command(cmd string) string {
	if p.name != "" {
		return "ip netns exec " + p.name + " " + cmd
	}
	return "nsenter --net=" + p.path + " " + cmd
}

// netnsIno returns the inode of the network namespace of the calling thread.
func netnsIno() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// findNetns enumerates the network namespaces this host names (/run/netns/*) or that
// processes are in (/proc/[0-9]*/ns/net), each once (by inode, named ones first), skipping
// the calling thread's own, and returns the first one for which match, given an open file
// of the namespace, says yes. The caller closes the file.
func findNetns(match func(p netnsPlace, f *os.File) bool) (netnsPlace, *os.File, error) {
	self, err := netnsIno()
	if err != nil {
		return netnsPlace{}, nil, fmt.Errorf("own network namespace: %w", err)
	}
	seen := map[uint64]bool{self: true}
	try := func(p netnsPlace) (netnsPlace, *os.File, bool) {
		f, err := os.Open(p.path)
		if err != nil {
			return p, nil, false
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || seen[st.Ino] {
			f.Close()
			return p, nil, false
		}
		seen[st.Ino] = true
		p.ino = st.Ino
		if match(p, f) {
			return p, f, true
		}
		f.Close()
		return p, nil, false
	}
	for _, dir := range netnsDirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if p, f, ok := try(netnsPlace{path: filepath.Join(dir, e.Name()), name: e.Name(), nsid: -1}); ok {
				return p, f, nil
			}
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return netnsPlace{}, nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path := "/proc/" + e.Name() + "/ns/net"
		// Cheap dedupe first: the link reads "net:[INODE]".
		if l, err := os.Readlink(path); err == nil {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "net:["), "]"), 10, 64); err == nil && seen[ino] {
				continue
			}
		}
		if p, f, ok := try(netnsPlace{path: path, pid: pid, nsid: -1}); ok {
			return p, f, nil
		}
	}
	return netnsPlace{}, nil, os.ErrNotExist
}

// findNetnsByID finds the namespace whose id, as seen from the calling thread's
// namespace, is nsid.
func findNetnsByID(nsid int) (netnsPlace, *os.File, error) {
	p, f, err := findNetns(func(_ netnsPlace, f *os.File) bool {
		id, err := netlink.GetNetNsIdByFd(int(f.Fd()))
		return err == nil && id == nsid
	})
	p.nsid = nsid
	return p, f, err
}

// findNetnsByIno finds the namespace of inode ino (for the restore: the one changed).
func findNetnsByIno(ino uint64) (*os.File, error) {
	_, f, err := findNetns(func(p netnsPlace, _ *os.File) bool { return p.ino == ino })
	return f, err
}

// inNetns runs fn on an OS thread that has joined the network namespace of the open
// namespace file ns, and waits for it. The thread goes back to its namespace afterwards;
// if it cannot, its goroutine ends still locked, so the Go runtime discards the thread.
func inNetns(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current network namespace: %w", err)
			return // exits locked: thread discarded
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(ns.Fd())); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			return
		}
		ferr := fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		} // else: left locked, the thread dies with this goroutine
		errc <- ferr
	}()
	err := <-errc
	runtime.KeepAlive(ns)
	return err
}

// portOffloads is what was changed for one port.
type portOffloads struct {
	own      featureChange
	peer     *featureChange // nil: no veth peer, or not reached
	peerNS   *netnsPlace    // the peer's namespace; nil: ilbd's own
	peerDesc string         // "cl0 in namespace ilb-client", "lbs-br"
}

// kernelPortOffloads turns the offloads off for every kernel-backed port (see the top of
// this file) and logs what it did, one line per port, or one warning with the command to
// run where it could not. Call it in ilbd's network namespace, before dpdk.Init; it never
// fails. The returned function turns on again exactly what was turned off (call it in the
// same namespace, once the ports are closed).
func kernelPortOffloads(ports []Port, logger *log.Logger) (restore func()) {
	var done []portOffloads
	for _, ps := range ports {
		iface := kernelPortIface(ps.Device)
		if iface == "" {
			continue
		}
		if po, ok := portOffloadsOff(ps.Device, iface, logger); ok {
			done = append(done, po)
		}
	}
	return func() {
		for i := len(done) - 1; i >= 0; i-- {
			done[i].restore(logger)
		}
		done = nil
	}
}

// portOffloadsOff handles one port's interface iface and its veth peer.
func portOffloadsOff(device, iface string, logger *log.Logger) (po portOffloads, ok bool) {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		logger.Printf("port %s: warning: interface %s: %v; offloads not checked", device, iface, err)
		return po, false
	}
	var problems []string
	ownText := ""
	po.own, err = turnOff(iface, link.Attrs().Index, ownOffload)
	if err != nil {
		ownText = "offloads unchanged on " + iface
		problems = append(problems, fmt.Sprintf("%v; merged (GRO/LRO) frames may reach DPDK and be truncated; run: ethtool -K %s gro off lro off tso off gso off", err, iface))
	} else {
		ownText = fmt.Sprintf("offloads off on %s (%s)", iface, listOrAlready(po.own.off))
	}
	// Only receive merging matters on ilbd's side (DPDK transmits there through the PMD,
	// never with GSO); a fixed TSO variant is harmless.
	if rx := filterPrefix(po.own.stuck, "rx-"); len(rx) > 0 {
		problems = append(problems, fmt.Sprintf("%s keeps %s on (fixed by its driver): frames larger than an mbuf may reach DPDK and be truncated", iface, strings.Join(rx, " ")))
	}

	veth, isVeth := link.(*netlink.Veth)
	if !isVeth {
		if len(problems) > 0 {
			logger.Printf("port %s: warning: %s; %s", device, ownText, strings.Join(problems, "; "))
		} else {
			logger.Printf("port %s: %s so that no merged frame reaches DPDK; %s", device, ownText, restoreNote(po.changed()))
		}
		return po, true
	}

	peerIdx, nsid := veth.Attrs().ParentIndex, veth.Attrs().NetNsID
	unnamed := fmt.Sprintf("<the interface of ifindex %d>", peerIdx)
	var cmd string // what the administrator must run where the peer could not be changed
	var peerErr error
	switch {
	case peerIdx == 0:
		peerErr = errors.New("the kernel does not say which interface it is")
		cmd = fmt.Sprintf(peerFixCommand, "<the veth peer of "+iface+">")
	case nsid < 0: // the peer is in ilbd's own namespace
		fc, err := peerOffloadsOff(peerIdx)
		cmd, peerErr = fmt.Sprintf(peerFixCommand, unnamed), err
		if fc.dev != "" {
			po.peer, po.peerDesc, cmd = &fc, fc.dev, fmt.Sprintf(peerFixCommand, fc.dev)
		}
	default:
		place, f, err := findNetnsByID(nsid)
		if err != nil {
			peerErr = fmt.Errorf("it is in another network namespace (nsid %d as seen from ilbd's, ifindex %d there) that ilbd finds in none of %s, /proc/*/ns/net", nsid, peerIdx, strings.Join(netnsDirs, ", "))
			cmd = "in that namespace: " + fmt.Sprintf(peerFixCommand, unnamed)
			break
		}
		var fc featureChange
		peerErr = inNetns(f, func() error {
			var err error
			fc, err = peerOffloadsOff(peerIdx)
			return err
		})
		f.Close()
		po.peerNS = &place
		po.peerDesc = fmt.Sprintf("of ifindex %d in %s", peerIdx, place)
		cmd = place.command(fmt.Sprintf(peerFixCommand, unnamed))
		if fc.dev != "" {
			po.peer, po.peerDesc = &fc, fc.dev+" in "+place.String()
			cmd = place.command(fmt.Sprintf(peerFixCommand, fc.dev))
		}
	}
	// Only tx checksum offload matters on the peer: without it the kernel segments in
	// software whatever TSO/GSO variant the peer keeps.
	if csum := filterPrefix(po.peer.stuckOrNil(), "tx-checksum-"); peerErr == nil && len(csum) > 0 {
		peerErr = fmt.Errorf("it keeps %s on (fixed by its driver)", strings.Join(csum, " "))
	}
	if peerErr != nil {
		who := "its veth peer"
		if po.peerDesc != "" {
			who += " " + po.peerDesc
		}
		problems = append(problems, fmt.Sprintf("not on %s: %v; frames sent there with tx checksum offload reach DPDK with incomplete checksums and ilbd forwards them so; run: %s", who, peerErr, cmd))
		logger.Printf("port %s: warning: %s; %s", device, ownText, strings.Join(problems, "; "))
		return po, true
	}
	if len(problems) > 0 {
		logger.Printf("port %s: warning: %s and on its veth peer %s (%s); %s", device, ownText, po.peerDesc, listOrAlready(po.peer.off), strings.Join(problems, "; "))
		return po, true
	}
	logger.Printf("port %s: %s and on its veth peer %s (%s) so that every frame reaches DPDK with complete checksums; %s",
		device, ownText, po.peerDesc, listOrAlready(po.peer.off), restoreNote(po.changed()))
	return po, true
}

// peerOffloadsOff turns the peer's offloads off on the interface of index idx in the
// calling thread's namespace. fc.dev is set once the interface is found.
func peerOffloadsOff(idx int) (fc featureChange, err error) {
	peer, err := netlink.LinkByIndex(idx)
	if err != nil {
		return fc, fmt.Errorf("interface of ifindex %d: %w", idx, err)
	}
	name := peer.Attrs().Name
	fc, err = turnOff(name, idx, peerOffload)
	fc.dev = name
	return fc, err
}

func (po *portOffloads) changed() bool {
	return len(po.own.off) > 0 || (po.peer != nil && len(po.peer.off) > 0)
}

// restore turns on again what was turned off for the port, peer first.
func (po *portOffloads) restore(logger *log.Logger) {
	var restored []string
	if po.peer != nil && len(po.peer.off) > 0 {
		var done bool
		var err error
		if po.peerNS == nil {
			done, err = po.peer.turnOn()
		} else if f, ferr := findNetnsByIno(po.peerNS.ino); ferr == nil {
			err = inNetns(f, func() error {
				var err error
				done, err = po.peer.turnOn()
				return err
			})
			f.Close()
		} // else the namespace is gone, and the peer with it
		if err != nil {
			logger.Printf("offloads: restoring %s: %v", po.peerDesc, err)
		} else if done {
			restored = append(restored, fmt.Sprintf("%s (%s)", po.peerDesc, strings.Join(po.peer.off, " ")))
		}
	}
	if done, err := po.own.turnOn(); err != nil {
		logger.Printf("offloads: restoring %s: %v", po.own.dev, err)
	} else if done {
		restored = append(restored, fmt.Sprintf("%s (%s)", po.own.dev, strings.Join(po.own.off, " ")))
	}
	if len(restored) > 0 {
		logger.Printf("offloads restored on %s", strings.Join(restored, " and on "))
	}
}

func (fc *featureChange) stuckOrNil() []string {
	if fc == nil {
		return nil
	}
	return fc.stuck
}

func filterPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func listOrAlready(off []string) string {
	if len(off) == 0 {
		return "already off"
	}
	return strings.Join(off, " ")
}

func restoreNote(changed bool) string {
	if changed {
		return "restored at stop"
	}
	return "nothing to restore at stop"
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
