// Package lab builds a small, disposable network in Linux network namespaces for the
// end-to-end tests and the demo: one client, one load balancer ("lb", where ilbd runs on
// DPDK net_af_packet ports) and three kernel servers.
//
//	client ns              lb ns (ilbd)                              server ns i (1..3)
//	cl0 198.51.100.2/24 ── lbc (DPDK port 0: 198.51.100.1/24)
//	 default via .1         lbs (DPDK port 1: 192.0.2.1/24)
//	                         │ veth
//	                        lbs-br ─┐
//	                                br0 ── s1 ───────────────────── srv0 192.0.2.11/24
//	                                    ── s2 ───────────────────── srv0 192.0.2.12/24
//	                                    ── s3 ───────────────────── srv0 192.0.2.13/24
//	                                                                 default via 192.0.2.1
//
// lbc and lbs carry no kernel address (IPv6 disabled too) so the lb namespace's kernel
// stays quiet; ilbd owns them. In KernelRouter mode (lab self-check only) the lb
// namespace's kernel instead routes between 198.51.100.0/24 and 192.0.2.0/24.
//
// Every kernel object is created inside namespaces this package creates, with names
// unique to the run, and only documentation addresses are used. Close removes everything.
package lab

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Addresses of the lab (documentation ranges only).
const (
	ClientIP    = "198.51.100.2"
	ClientGW    = "198.51.100.1" // ilbd's client-side port address
	ServerGW    = "192.0.2.1"    // ilbd's server-side port address
	VIP         = "203.0.113.10"
	ServicePort = 80
)

// ServerIPs are the addresses of the three servers, in order.
var ServerIPs = []string{"192.0.2.11", "192.0.2.12", "192.0.2.13"}

// Options select the flavour of lab.
type Options struct {
	// KernelRouter gives lbc/lbs kernel addresses and turns on IP forwarding in the lb
	// namespace instead of leaving them to ilbd. Only for checking the lab itself:
	// clients can then reach the servers' own addresses (not the VIP). ilbd cannot be
	// started in this mode.
	KernelRouter bool
	// ConfigOnly creates no namespaces and no servers; ilbd runs in the caller's
	// namespace with no "eal" and no "port" lines (configuration only, no data plane).
	ConfigOnly bool
	// Dir holds the settings, store, socket and ilbd log. Empty: a temporary directory
	// that Close removes (NewT uses t.TempDir()).
	Dir string
	// BinDir holds ilbd and ilbadm. Empty: $ILB_BIN, else <repo>/bin.
	BinDir string
	// EAL overrides the EAL arguments of the settings file.
	EAL string
	// Gateway, if set, adds a "gateway" line to the settings file.
	Gateway string
	// ReadyTimeout bounds ilbd's start-up (default 30 s).
	ReadyTimeout time.Duration
	// Logf receives progress messages (default: discarded).
	Logf func(format string, args ...any)
	// Transcript, if set, receives each ilbadm command line before it runs ("# ilbadm ...").
	Transcript io.Writer
}

// Lab is a running lab. Its methods are safe for use by one goroutine at a time, except
// Close, which may be called concurrently (e.g. from a signal handler) and more than once.
type Lab struct {
	opts   Options
	Prefix string // unique per lab: names of namespaces, DPDK file prefix
	Dir    string

	ClientNS string // namespace names (usable with `ip netns exec`)
	LBNS     string
	Servers  []*Server

	nsNames   []string // every namespace created, for Close
	handles   map[string]netns.NsHandle
	ownDir    bool
	ilbd      *Ilbd
	closeOnce sync.Once
	closeErr  error
	mu        sync.Mutex // guards ilbd, closed
	closed    bool

	portMu sync.Mutex // next client source port (client.go)
	port   int
}

var labSeq atomic.Int32

// Unsupported returns a non-empty reason when this machine cannot build a namespace lab
// (not root, or `ip`/`ethtool` missing); tests skip with it.
func Unsupported(opts Options) string {
	if opts.ConfigOnly {
		if os.Geteuid() != 0 {
			return "needs root: ilbd accepts configuration changes only from root (peer credentials)"
		}
		return ""
	}
	if os.Geteuid() != 0 {
		return "needs root: creates network namespaces"
	}
	if _, err := Tool("ip"); err != nil {
		return "needs the ip command (iproute2): " + err.Error()
	}
	if _, err := Tool("ethtool"); err != nil {
		return "needs ethtool (apt-get install -y ethtool; `make deps` does it): " + err.Error()
	}
	return ""
}

// TB is the part of testing.TB the lab uses.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Skip(args ...any)
	TempDir() string
}

// NewT builds a lab for a test: skips when the machine cannot run it, fails the test on
// error, registers Close with t.Cleanup and prints ilbd's log if the test failed.
func NewT(t TB, opts Options) *Lab {
	t.Helper()
	if why := Unsupported(opts); why != "" {
		t.Skip(why)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	l, err := New(opts)
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if log := l.IlbdLog(); log != "" {
				t.Logf("ilbd log (%s):\n%s", l.IlbdLogPath(), log)
			}
		}
		if err := l.Close(); err != nil {
			t.Logf("lab cleanup: %v", err)
		}
	})
	return l
}

// New builds the lab. On error everything already created is removed again.
func New(opts Options) (l *Lab, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.KernelRouter && opts.ConfigOnly {
		return nil, errors.New("KernelRouter and ConfigOnly are exclusive")
	}
	if why := Unsupported(opts); why != "" {
		return nil, errors.New(why)
	}
	// Short and unique per run: "ilbt" + pid + per-process sequence number.
	prefix := fmt.Sprintf("ilbt%d-%d", os.Getpid(), labSeq.Add(1))
	l = &Lab{opts: opts, Prefix: prefix, handles: map[string]netns.NsHandle{}}
	defer func() {
		if err != nil {
			if cerr := l.Close(); cerr != nil {
				err = fmt.Errorf("%w (cleanup: %v)", err, cerr)
			}
			l = nil
		}
	}()
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", prefix+"-")
		if err != nil {
			return l, err
		}
		l.Dir, l.ownDir = d, true
	} else {
		l.Dir = opts.Dir
	}
	if opts.ConfigOnly {
		return l, nil
	}
	if err := l.buildTopology(); err != nil {
		return l, fmt.Errorf("building topology: %w", err)
	}
	for i, ip := range ServerIPs {
		s, err := startServer(fmt.Sprintf("srv%d", i+1), l.serverNS(i), l.handles[l.serverNS(i)], ip)
		if err != nil {
			return l, err
		}
		l.Servers = append(l.Servers, s)
	}
	l.opts.Logf("lab %s ready (client ns %s, lb ns %s)", prefix, l.ClientNS, l.LBNS)
	return l, nil
}

func (l *Lab) serverNS(i int) string { return fmt.Sprintf("%s-s%d", l.Prefix, i+1) }

// Namespaces lists the names of the namespaces this lab created.
func (l *Lab) Namespaces() []string { return append([]string(nil), l.nsNames...) }

func (l *Lab) addNS(name string) (netns.NsHandle, error) {
	if _, err := run(10*time.Second, "ip", "netns", "add", name); err != nil {
		return -1, err
	}
	l.nsNames = append(l.nsNames, name) // from now on Close deletes it
	h, err := netns.GetFromName(name)
	if err != nil {
		return -1, fmt.Errorf("open netns %s: %w", name, err)
	}
	l.handles[name] = h
	// No IPv6 in this lab (IPv4 only for now): every new interface starts with IPv6 off,
	// so no router/neighbour solicitations or MLD reports disturb the captures.
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := sysctl(h, k, "1"); err != nil {
			return h, err
		}
	}
	return h, nil
}

func (l *Lab) buildTopology() error {
	l.ClientNS = l.Prefix + "-cl"
	l.LBNS = l.Prefix + "-lb"
	names := []string{l.ClientNS, l.LBNS}
	for i := range ServerIPs {
		names = append(names, l.serverNS(i))
	}
	nl := map[string]*netlink.Handle{}
	defer func() {
		for _, h := range nl {
			h.Close()
		}
	}()
	for _, n := range names {
		h, err := l.addNS(n)
		if err != nil {
			return err
		}
		nh, err := netlink.NewHandleAt(h)
		if err != nil {
			return fmt.Errorf("netlink handle in %s: %w", n, err)
		}
		nl[n] = nh
		if err := setUp(nh, "lo"); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	lb := nl[l.LBNS]

	// The bridge joining lbs' peer and the three server links, inside the lb namespace.
	if err := lb.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}); err != nil {
		return fmt.Errorf("add br0: %w", err)
	}
	// Veth pairs are created directly with each end in its namespace: no name ever
	// appears in the caller's namespace.
	veths := []struct{ name, peer, peerNS string }{
		{"lbc", "cl0", l.ClientNS},
		{"lbs", "lbs-br", l.LBNS},
	}
	for i := range ServerIPs {
		veths = append(veths, struct{ name, peer, peerNS string }{fmt.Sprintf("s%d", i+1), "srv0", l.serverNS(i)})
	}
	for _, v := range veths {
		la := netlink.NewLinkAttrs()
		la.Name = v.name
		veth := &netlink.Veth{LinkAttrs: la, PeerName: v.peer}
		if v.peerNS != l.LBNS {
			veth.PeerNamespace = netlink.NsFd(l.handles[v.peerNS])
		}
		if err := lb.LinkAdd(veth); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", v.name, v.peer, err)
		}
	}
	br, err := lb.LinkByName("br0")
	if err != nil {
		return err
	}
	for _, port := range []string{"lbs-br", "s1", "s2", "s3"} {
		ln, err := lb.LinkByName(port)
		if err != nil {
			return err
		}
		if err := lb.LinkSetMaster(ln, br); err != nil {
			return fmt.Errorf("enslave %s to br0: %w", port, err)
		}
	}

	// IPv6 off on every interface of the lab (the "default" sysctl covers interfaces
	// created after it, this makes sure for the ones ilbd owns).
	for _, dev := range []string{"lbc", "lbs", "lbs-br", "br0", "s1", "s2", "s3"} {
		if err := sysctl(l.handles[l.LBNS], "net/ipv6/conf/"+dev+"/disable_ipv6", "1"); err != nil {
			return err
		}
	}
	if err := sysctl(l.handles[l.ClientNS], "net/ipv6/conf/cl0/disable_ipv6", "1"); err != nil {
		return err
	}
	for i := range ServerIPs {
		if err := sysctl(l.handles[l.serverNS(i)], "net/ipv6/conf/srv0/disable_ipv6", "1"); err != nil {
			return err
		}
	}

	// Offloads off on every veth end (see disableOffloads), before any traffic.
	offl := []struct{ ns, dev string }{{l.ClientNS, "cl0"}}
	for _, d := range []string{"lbc", "lbs", "lbs-br", "s1", "s2", "s3"} {
		offl = append(offl, struct{ ns, dev string }{l.LBNS, d})
	}
	for i := range ServerIPs {
		offl = append(offl, struct{ ns, dev string }{l.serverNS(i), "srv0"})
	}
	for _, o := range offl {
		if err := disableOffloads(o.ns, o.dev); err != nil {
			return err
		}
	}

	// lb namespace: links up; lbc/lbs promiscuous, as a NIC owned by DPDK would be, so
	// that the AF_PACKET sockets of net_af_packet see every frame whatever its MAC.
	for _, dev := range []string{"br0", "lbs-br", "s1", "s2", "s3", "lbc", "lbs"} {
		if err := setUp(lb, dev); err != nil {
			return err
		}
	}
	for _, dev := range []string{"lbc", "lbs"} {
		ln, err := lb.LinkByName(dev)
		if err != nil {
			return err
		}
		if err := lb.SetPromiscOn(ln); err != nil {
			return fmt.Errorf("promisc %s: %w", dev, err)
		}
	}
	if l.opts.KernelRouter {
		if err := addAddr(lb, "lbc", ClientGW+"/24"); err != nil {
			return err
		}
		if err := addAddr(lb, "lbs", ServerGW+"/24"); err != nil {
			return err
		}
		if err := sysctl(l.handles[l.LBNS], "net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
	}

	// Client.
	cl := nl[l.ClientNS]
	if err := addAddr(cl, "cl0", ClientIP+"/24"); err != nil {
		return err
	}
	if err := setUp(cl, "cl0"); err != nil {
		return err
	}
	if err := addDefaultRoute(cl, "cl0", ClientGW); err != nil {
		return err
	}

	// Servers.
	for i, ip := range ServerIPs {
		h := nl[l.serverNS(i)]
		if err := addAddr(h, "srv0", ip+"/24"); err != nil {
			return err
		}
		if err := setUp(h, "srv0"); err != nil {
			return err
		}
		if err := addDefaultRoute(h, "srv0", ServerGW); err != nil {
			return err
		}
	}
	return nil
}

func setUp(h *netlink.Handle, dev string) error {
	ln, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("link %s: %w", dev, err)
	}
	if err := h.LinkSetUp(ln); err != nil {
		return fmt.Errorf("set %s up: %w", dev, err)
	}
	return nil
}

func addAddr(h *netlink.Handle, dev, cidr string) error {
	ln, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("link %s: %w", dev, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(ln, a); err != nil {
		return fmt.Errorf("add %s to %s: %w", cidr, dev, err)
	}
	return nil
}

func addDefaultRoute(h *netlink.Handle, dev, gw string) error {
	ln, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("link %s: %w", dev, err)
	}
	_, all, _ := net.ParseCIDR("0.0.0.0/0")
	r := &netlink.Route{LinkIndex: ln.Attrs().Index, Dst: all, Gw: net.ParseIP(gw)}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, dev, err)
	}
	return nil
}

// Close stops ilbd, the servers, deletes the namespaces (which destroys their veths and
// the bridge), removes DPDK's runtime directory for this lab's file prefix and, if the lab
// created it, its directory. It is idempotent and safe to call concurrently.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		l.mu.Lock()
		l.closed = true
		d := l.ilbd
		l.mu.Unlock()
		if d != nil {
			if err := d.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		for _, s := range l.Servers {
			s.Close()
		}
		for _, h := range l.handles {
			h.Close()
		}
		for i := len(l.nsNames) - 1; i >= 0; i-- {
			if _, err := run(10*time.Second, "ip", "netns", "del", l.nsNames[i]); err != nil {
				errs = append(errs, err)
			}
		}
		// DPDK keeps its runtime files (config, fbarray, mp socket) in /var/run/dpdk/<prefix>.
		if !l.opts.ConfigOnly && l.ilbdStarted() {
			_ = os.RemoveAll("/var/run/dpdk/" + l.Prefix)
		}
		if l.ownDir && l.Dir != "" {
			_ = os.RemoveAll(l.Dir)
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

func (l *Lab) ilbdStarted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ilbd != nil
}

// String describes the lab briefly.
func (l *Lab) String() string {
	return fmt.Sprintf("lab %s: namespaces %s", l.Prefix, strings.Join(l.nsNames, " "))
}
