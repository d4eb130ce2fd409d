// Package lab builds a small, disposable network in Linux network namespaces for the
// end-to-end tests and the demo: one client, one load balancer ("lb", where ilbd runs on
// DPDK net_af_packet ports) and three kernel servers; optionally a return router (for
// DSR), a client on the servers' own subnet (for full-NAT) and IPv6 on every endpoint.
//
// The default lab (Options{}):
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
// Options.ReturnRouter (DSR): the client's link becomes a segment, bridge brc in the lb
// namespace, shared by the client, ilbd's lbc and a router namespace whose other leg is on
// br0, the servers' segment:
//
//	client ns                lb ns                                  router ns (forwarding)
//	cl0 198.51.100.2 ──── c0 ─┐
//	                   lbc-br ┼ brc     (lbc ── lbc-br: ilbd 198.51.100.1)
//	                       r1 ┘ ───────────────────────────────────── rt1 198.51.100.254
//	                       r0 ── br0 ──────────────────────────────── rt0 192.0.2.254
//
// The client's default route stays via ilbd and so do the servers'. SetReturnRoute(true)
// adds, on every server, a more specific route to the client network via the router
// (192.0.2.254): what a server sends to the client itself (DSR: from the VIP it holds on
// its loopback, see SetServerVIP) then reaches the client without crossing ilbd, as in a
// DSR site whose return traffic goes through the site router rather than the load
// balancer. ilbd only ever sees the client-to-server half; a capture on lbs proves it.
//
// Options.LocalClient: a fourth client namespace on the servers' segment (lc0 192.0.2.50/24
// on br0, default via ilbd 192.0.2.1). It reaches the VIP through ilbd's server-side port:
// with full-NAT the servers answer the proxy-src address (ilbd); with half-NAT they answer
// 192.0.2.50 directly, from their own address, which the client's socket rejects.
//
// Options.IPv6 adds 2001:db8: addresses everywhere (client 2001:db8:1::2/64 via
// 2001:db8:1::1, servers 2001:db8:2::11-13/64 via 2001:db8:2::1, router 2001:db8:1::fe and
// 2001:db8:2::fe, local client 2001:db8:2::50, VIP6 2001:db8:3::10), with duplicate address
// detection, router solicitations and RA processing off so that addresses are usable at
// once and the segments stay quiet. ilbd's port lines then carry both prefixes.
//
// lbc and lbs carry no kernel address (IPv6 disabled on them) so the lb namespace's kernel
// stays quiet; ilbd owns them.
//
// Offloads are the kernel's defaults on every interface, as on hosts ilbd does not own: a
// veth has tx checksum offload, TSO and GSO on, so the client's and the servers' kernels
// leave TCP/UDP checksums partial and may send frames larger than the MTU. ilbd itself,
// while it runs, turns GRO/LRO/TSO/GSO off on lbc and lbs and tx checksum offload, TSO and
// GSO on their veth peers (cl0, or lbc-br with ReturnRouter; lbs-br), and restores them
// when it stops cleanly (dataplane/offload.go); the lab never changes offloads. In KernelRouter mode (lab self-checks only) the lb
// namespace's kernel instead routes between the client and server subnets.
//
// Every server has arp_ignore=1 and arp_announce=2 (it answers ARP only for addresses of
// the interface asked, so a VIP on its loopback is never announced; IPv6 never answers
// neighbour solicitations for another interface's address). Servers listen on the wildcard
// address of each family and answer UDP from the address a request was sent to.
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
	"golang.org/x/sys/unix"
)

// Addresses of the lab (documentation ranges only).
const (
	ClientIP    = "198.51.100.2"
	ClientGW    = "198.51.100.1" // ilbd's client-side port address
	ServerGW    = "192.0.2.1"    // ilbd's server-side port address
	VIP         = "203.0.113.10"
	ServicePort = 80
	// AltPort is a second port every server listens on (TCP and UDP), for rules that
	// translate ports or bind servers to a port of their own.
	AltPort = 8080

	ClientNet = "198.51.100.0/24"
	ServerNet = "192.0.2.0/24"

	// IPv6 (Options.IPv6).
	ClientIP6  = "2001:db8:1::2"
	ClientGW6  = "2001:db8:1::1"
	ServerGW6  = "2001:db8:2::1"
	VIP6       = "2001:db8:3::10"
	ClientNet6 = "2001:db8:1::/64"
	ServerNet6 = "2001:db8:2::/64"

	// Return router (Options.ReturnRouter): its leg on the servers' segment and on the
	// client's.
	RouterServerIP  = "192.0.2.254"
	RouterClientIP  = "198.51.100.254"
	RouterServerIP6 = "2001:db8:2::fe"
	RouterClientIP6 = "2001:db8:1::fe"

	// Client on the servers' subnet (Options.LocalClient).
	LocalClientIP  = "192.0.2.50"
	LocalClientIP6 = "2001:db8:2::50"
)

// ServerIPs are the addresses of the three servers, in order.
var ServerIPs = []string{"192.0.2.11", "192.0.2.12", "192.0.2.13"}

// ServerIP6s are the servers' IPv6 addresses (Options.IPv6), in order.
var ServerIP6s = []string{"2001:db8:2::11", "2001:db8:2::12", "2001:db8:2::13"}

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
	// IPv6 gives every endpoint (client, servers, router, local client; lbc/lbs in
	// KernelRouter mode) an IPv6 address too, and ilbd's ports an IPv6 prefix each.
	IPv6 bool
	// ReturnRouter adds a router namespace joining the client's segment and the
	// servers' segment, for DSR replies that must not cross ilbd (see SetReturnRoute).
	ReturnRouter bool
	// LocalClient adds a client namespace on the servers' segment (LocalClientIP).
	LocalClient bool
	// Dir holds the settings, store, socket and ilbd log. Empty: a temporary directory
	// that Close removes (NewT uses t.TempDir()).
	Dir string
	// BinDir holds ilbd and ilbadm. Empty: $ILB_BIN, else <repo>/bin.
	BinDir string
	// EAL overrides the EAL arguments of the settings file.
	EAL string
	// Lcores, if set, is the EAL --lcores list of the default EAL arguments (and so ilbd's
	// number of workers: every lcore but the main one), e.g. "0@0,1@0,2@1"; else
	// $ILB_LAB_LCORES, else one worker ("-l 0-1").
	Lcores string
	// Gateway, if set, adds a "gateway" line to the settings file.
	Gateway string
	// ExtraSettings are further settings-file lines ("conn-table 4096"), written last.
	ExtraSettings []string
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

	ClientNS      string // namespace names (usable with `ip netns exec`)
	LBNS          string
	RouterNS      string // "" without Options.ReturnRouter
	LocalClientNS string // "" without Options.LocalClient
	Servers       []*Server

	client      *Client // the client namespace's client (ClientIP, ClientIP6)
	localClient *Client

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
// (not root, or `ip` missing, or no IPv6 when asked for); tests skip with it.
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
	if opts.IPv6 {
		if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
			return "needs a kernel with IPv6 (booted without ipv6.disable=1)"
		}
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
	if opts.ConfigOnly && (opts.KernelRouter || opts.IPv6 || opts.ReturnRouter || opts.LocalClient) {
		return nil, errors.New("ConfigOnly excludes KernelRouter, IPv6, ReturnRouter and LocalClient")
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
		ip6 := ""
		if opts.IPv6 {
			ip6 = ServerIP6s[i]
		}
		s, err := startServer(fmt.Sprintf("srv%d", i+1), l.serverNS(i), l.handles[l.serverNS(i)], ip, ip6)
		if err != nil {
			return l, err
		}
		l.Servers = append(l.Servers, s)
	}
	l.client = &Client{lab: l, NS: l.ClientNS, IP: ClientIP}
	if opts.IPv6 {
		l.client.IP6 = ClientIP6
	}
	if opts.LocalClient {
		l.localClient = &Client{lab: l, NS: l.LocalClientNS, IP: LocalClientIP}
		if opts.IPv6 {
			l.localClient.IP6 = LocalClientIP6
		}
	}
	l.opts.Logf("lab %s ready (client ns %s, lb ns %s)", prefix, l.ClientNS, l.LBNS)
	return l, nil
}

// Options returns the options the lab was built with.
func (l *Lab) Options() Options { return l.opts }

func (l *Lab) serverNS(i int) string { return fmt.Sprintf("%s-s%d", l.Prefix, i+1) }

// Namespaces lists the names of the namespaces this lab created.
func (l *Lab) Namespaces() []string { return append([]string(nil), l.nsNames...) }

// addNS creates a namespace. endpoint6: an endpoint of an IPv6 lab (IPv6 on, no DAD, no
// router solicitations/advertisements); otherwise IPv6 starts off on every interface, so
// no router/neighbour solicitations or MLD reports disturb the captures.
func (l *Lab) addNS(name string, endpoint6 bool) (netns.NsHandle, error) {
	if _, err := run(10*time.Second, "ip", "netns", "add", name); err != nil {
		return -1, err
	}
	l.nsNames = append(l.nsNames, name) // from now on Close deletes it
	h, err := netns.GetFromName(name)
	if err != nil {
		return -1, fmt.Errorf("open netns %s: %w", name, err)
	}
	l.handles[name] = h
	if !endpoint6 {
		for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
			if err := sysctl(h, k, "1"); err != nil {
				return h, err
			}
		}
		if l.opts.IPv6 { // lb namespace of an IPv6 lab: KernelRouter may enable lbc/lbs
			for _, k := range []string{"all", "default"} {
				if err := sysctl(h, "net/ipv6/conf/"+k+"/accept_dad", "0"); err != nil {
					return h, err
				}
			}
		}
		return h, nil
	}
	for _, kv := range [][2]string{
		{"all/accept_dad", "0"}, {"default/accept_dad", "0"},
		{"all/accept_ra", "0"}, {"default/accept_ra", "0"},
		{"all/router_solicitations", "0"}, {"default/router_solicitations", "0"},
		{"all/disable_ipv6", "0"}, {"default/disable_ipv6", "0"},
	} {
		if err := sysctl(h, "net/ipv6/conf/"+kv[0], kv[1]); err != nil {
			return h, err
		}
	}
	return h, nil
}

type vethSpec struct {
	name   string // end in the lb namespace
	peer   string
	peerNS string // namespace of the peer (may be the lb namespace)
	bridge string // bridge in the lb namespace the name end joins ("" none)
}

func (l *Lab) buildTopology() error {
	o := l.opts
	l.ClientNS = l.Prefix + "-cl"
	l.LBNS = l.Prefix + "-lb"
	type nsSpec struct {
		name      string
		endpoint6 bool
	}
	spaces := []nsSpec{{l.ClientNS, o.IPv6}, {l.LBNS, false}}
	for i := range ServerIPs {
		spaces = append(spaces, nsSpec{l.serverNS(i), o.IPv6})
	}
	if o.ReturnRouter {
		l.RouterNS = l.Prefix + "-rt"
		spaces = append(spaces, nsSpec{l.RouterNS, o.IPv6})
	}
	if o.LocalClient {
		l.LocalClientNS = l.Prefix + "-lc"
		spaces = append(spaces, nsSpec{l.LocalClientNS, o.IPv6})
	}
	nl := map[string]*netlink.Handle{}
	defer func() {
		for _, h := range nl {
			h.Close()
		}
	}()
	for _, n := range spaces {
		h, err := l.addNS(n.name, n.endpoint6)
		if err != nil {
			return err
		}
		nh, err := netlink.NewHandleAt(h)
		if err != nil {
			return fmt.Errorf("netlink handle in %s: %w", n.name, err)
		}
		nl[n.name] = nh
		if err := setUp(nh, "lo"); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	lb := nl[l.LBNS]

	// Bridges in the lb namespace: br0 joins lbs' peer and the servers' links (the
	// servers' segment); brc, with ReturnRouter, is the client's segment. Multicast
	// snooping off: with no querier on the segment, plain flooding is what a switch does
	// with neighbour solicitations.
	bridges := []string{"br0"}
	if o.ReturnRouter {
		bridges = append(bridges, "brc")
	}
	noSnoop := false
	for _, b := range bridges {
		if err := lb.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b}, MulticastSnooping: &noSnoop}); err != nil {
			return fmt.Errorf("add %s: %w", b, err)
		}
	}
	// Veth pairs are created directly with each end in its namespace: no name ever
	// appears in the caller's namespace.
	var veths []vethSpec
	if o.ReturnRouter {
		veths = append(veths,
			vethSpec{"lbc", "lbc-br", l.LBNS, ""},
			vethSpec{"c0", "cl0", l.ClientNS, "brc"},
			vethSpec{"r1", "rt1", l.RouterNS, "brc"},
			vethSpec{"r0", "rt0", l.RouterNS, "br0"},
		)
	} else {
		veths = append(veths, vethSpec{"lbc", "cl0", l.ClientNS, ""})
	}
	veths = append(veths, vethSpec{"lbs", "lbs-br", l.LBNS, ""})
	for i := range ServerIPs {
		veths = append(veths, vethSpec{fmt.Sprintf("s%d", i+1), "srv0", l.serverNS(i), "br0"})
	}
	if o.LocalClient {
		veths = append(veths, vethSpec{"lcl", "lc0", l.LocalClientNS, "br0"})
	}
	// Bridge ports whose peer also lives in the lb namespace.
	enslave := map[string]string{"lbs-br": "br0"}
	if o.ReturnRouter {
		enslave["lbc-br"] = "brc"
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
		if v.bridge != "" {
			enslave[v.name] = v.bridge
		}
	}
	for port, bridge := range enslave {
		br, err := lb.LinkByName(bridge)
		if err != nil {
			return err
		}
		ln, err := lb.LinkByName(port)
		if err != nil {
			return err
		}
		if err := lb.LinkSetMaster(ln, br); err != nil {
			return fmt.Errorf("enslave %s to %s: %w", port, bridge, err)
		}
	}
	// Every interface of the lb namespace: the two bridges, the bridge ports, lbc, lbs.
	lbDevs := append([]string(nil), bridges...)
	for _, v := range veths {
		lbDevs = append(lbDevs, v.name)
		if v.peerNS == l.LBNS {
			lbDevs = append(lbDevs, v.peer)
		}
	}

	// IPv6 off on every interface of the lb namespace (the "default" sysctl covers
	// interfaces created after it, this makes sure for the ones ilbd owns), and on every
	// endpoint interface of an IPv4-only lab.
	for _, dev := range lbDevs {
		if err := sysctl(l.handles[l.LBNS], "net/ipv6/conf/"+dev+"/disable_ipv6", "1"); err != nil {
			return err
		}
	}
	endpoints := []struct{ ns, dev string }{{l.ClientNS, "cl0"}}
	for i := range ServerIPs {
		endpoints = append(endpoints, struct{ ns, dev string }{l.serverNS(i), "srv0"})
	}
	if o.ReturnRouter {
		endpoints = append(endpoints, struct{ ns, dev string }{l.RouterNS, "rt0"}, struct{ ns, dev string }{l.RouterNS, "rt1"})
	}
	if o.LocalClient {
		endpoints = append(endpoints, struct{ ns, dev string }{l.LocalClientNS, "lc0"})
	}
	if !o.IPv6 {
		for _, e := range endpoints {
			if err := sysctl(l.handles[e.ns], "net/ipv6/conf/"+e.dev+"/disable_ipv6", "1"); err != nil {
				return err
			}
		}
	}

	// The bridges are switches, not hosts: the lb namespace's kernel must never answer
	// ARP or accept IPv4 on them. Once ilbd's exception path gives that kernel the ports'
	// addresses (TAP interfaces in this namespace), Linux, a weak-host system, would
	// otherwise answer a client's or a server's ARP request for 198.51.100.1 or 192.0.2.1
	// on the bridge with the bridge's own MAC, and the frames sent there would end in the
	// lb namespace's kernel instead of reaching ilbd. arp_ignore=8: never answer; strict
	// rp_filter: no route points out of a bridge, so every IPv4 packet arriving is dropped.
	for _, b := range bridges {
		for _, kv := range [][2]string{{"arp_ignore", "8"}, {"rp_filter", "1"}} {
			if err := sysctl(l.handles[l.LBNS], "net/ipv4/conf/"+b+"/"+kv[0], kv[1]); err != nil {
				return err
			}
		}
	}

	// Offloads: every interface keeps the kernel's stock settings, as on real hosts (a veth
	// has tx checksum offload, TSO and GSO on, so senders leave checksums partial). ilbd
	// turns them off where it must while it runs: on lbc and lbs and on their veth peers
	// (dataplane/offload.go); the lab touches none of them.

	// lb namespace: links up; lbc/lbs promiscuous, as a NIC owned by DPDK would be, so
	// that the AF_PACKET sockets of net_af_packet see every frame whatever its MAC.
	for _, dev := range lbDevs {
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
	if o.KernelRouter {
		if err := l.kernelRouter(lb); err != nil {
			return err
		}
	}

	// Client.
	cl := nl[l.ClientNS]
	if err := l.endpoint(cl, "cl0", ClientIP+"/24", ClientGW, ClientIP6+"/64", ClientGW6); err != nil {
		return err
	}

	// Servers: never announce or answer ARP for an address of another interface (a VIP
	// on the loopback, DSR).
	for i, ip := range ServerIPs {
		h := l.handles[l.serverNS(i)]
		for _, k := range []string{"all", "default", "srv0"} {
			if err := sysctl(h, "net/ipv4/conf/"+k+"/arp_ignore", "1"); err != nil {
				return err
			}
			if err := sysctl(h, "net/ipv4/conf/"+k+"/arp_announce", "2"); err != nil {
				return err
			}
		}
		if err := l.endpoint(nl[l.serverNS(i)], "srv0", ip+"/24", ServerGW, ServerIP6s[i]+"/64", ServerGW6); err != nil {
			return err
		}
	}

	// Router: forwards between the two segments (no route to the VIPs, no default route:
	// it only ever carries server-to-client traffic). rp_filter off: the servers' DSR
	// replies come from a VIP the router has no route to.
	if o.ReturnRouter {
		rt := nl[l.RouterNS]
		h := l.handles[l.RouterNS]
		for _, kv := range [][2]string{
			{"net/ipv4/ip_forward", "1"},
			{"net/ipv4/conf/all/rp_filter", "0"}, {"net/ipv4/conf/default/rp_filter", "0"},
			{"net/ipv4/conf/rt0/rp_filter", "0"}, {"net/ipv4/conf/rt1/rp_filter", "0"},
			{"net/ipv4/conf/all/send_redirects", "0"},
		} {
			if err := sysctl(h, kv[0], kv[1]); err != nil {
				return err
			}
		}
		if o.IPv6 {
			if err := sysctl(h, "net/ipv6/conf/all/forwarding", "1"); err != nil {
				return err
			}
		}
		if err := l.endpoint(rt, "rt0", RouterServerIP+"/24", "", RouterServerIP6+"/64", ""); err != nil {
			return err
		}
		if err := l.endpoint(rt, "rt1", RouterClientIP+"/24", "", RouterClientIP6+"/64", ""); err != nil {
			return err
		}
	}

	// Local client: on the servers' segment, default route via ilbd's server-side port.
	if o.LocalClient {
		if err := l.endpoint(nl[l.LocalClientNS], "lc0", LocalClientIP+"/24", ServerGW, LocalClientIP6+"/64", ServerGW6); err != nil {
			return err
		}
	}
	return nil
}

// kernelRouter gives lbc/lbs the addresses ilbd would own and turns on forwarding.
func (l *Lab) kernelRouter(lb *netlink.Handle) error {
	h := l.handles[l.LBNS]
	if err := addAddr(lb, "lbc", ClientGW+"/24"); err != nil {
		return err
	}
	if err := addAddr(lb, "lbs", ServerGW+"/24"); err != nil {
		return err
	}
	if err := sysctl(h, "net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	if !l.opts.IPv6 {
		return nil
	}
	for _, dev := range []string{"lbc", "lbs"} {
		for _, kv := range [][2]string{{"accept_dad", "0"}, {"accept_ra", "0"}, {"router_solicitations", "0"}, {"disable_ipv6", "0"}} {
			if err := sysctl(h, "net/ipv6/conf/"+dev+"/"+kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	if err := sysctl(h, "net/ipv6/conf/all/forwarding", "1"); err != nil {
		return err
	}
	if err := addAddr(lb, "lbc", ClientGW6+"/64"); err != nil {
		return err
	}
	return addAddr(lb, "lbs", ServerGW6+"/64")
}

// endpoint configures an endpoint interface: its IPv4 address, the link up, a default
// route via gw4 (if any) and, in an IPv6 lab, its IPv6 address and default route via gw6.
func (l *Lab) endpoint(h *netlink.Handle, dev, cidr4, gw4, cidr6, gw6 string) error {
	if err := addAddr(h, dev, cidr4); err != nil {
		return err
	}
	if l.opts.IPv6 {
		if err := addAddr(h, dev, cidr6); err != nil {
			return err
		}
	}
	if err := setUp(h, dev); err != nil {
		return err
	}
	if gw4 != "" {
		if err := addDefaultRoute(h, dev, gw4); err != nil {
			return err
		}
	}
	if l.opts.IPv6 && gw6 != "" {
		if err := addDefaultRoute(h, dev, gw6); err != nil {
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
	if a.IP.To4() == nil {
		a.Flags |= unix.IFA_F_NODAD // usable at once
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
	dst := "0.0.0.0/0"
	if net.ParseIP(gw).To4() == nil {
		dst = "::/0"
	}
	_, all, _ := net.ParseCIDR(dst)
	r := &netlink.Route{LinkIndex: ln.Attrs().Index, Dst: all, Gw: net.ParseIP(gw)}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, dev, err)
	}
	return nil
}

// netlinkIn opens a netlink handle in one of the lab's namespaces (Close it after use).
func (l *Lab) netlinkIn(nsName string) (*netlink.Handle, error) {
	h, ok := l.handles[nsName]
	if !ok {
		return nil, fmt.Errorf("namespace %s is not part of this lab", nsName)
	}
	return netlink.NewHandleAt(h)
}

// SetServerVIP adds (present) or removes the address vip (IPv4 or IPv6) on the loopback
// of every server, as DSR requires: the servers then accept packets for the VIP and answer
// from it, without announcing it (arp_ignore=1, arp_announce=2; IPv6 answers neighbour
// solicitations only for addresses of the interface asked).
func (l *Lab) SetServerVIP(vip string, present bool) error {
	ip := net.ParseIP(vip)
	if ip == nil {
		return fmt.Errorf("bad VIP %q", vip)
	}
	cidr := vip + "/32"
	if ip.To4() == nil {
		cidr = vip + "/128"
	}
	for _, s := range l.Servers {
		h, err := l.netlinkIn(s.NS)
		if err != nil {
			return err
		}
		if present {
			err = addAddr(h, "lo", cidr)
		} else {
			var a *netlink.Addr
			if a, err = netlink.ParseAddr(cidr); err == nil {
				var ln netlink.Link
				if ln, err = h.LinkByName("lo"); err == nil {
					err = h.AddrDel(ln, a)
				}
			}
		}
		h.Close()
		if err != nil {
			return fmt.Errorf("%s: VIP %s on lo: %w", s.Name, vip, err)
		}
	}
	return nil
}

// SetReturnRoute (Options.ReturnRouter) points every server's route to the client network
// (both families in an IPv6 lab) at the return router (viaRouter) or removes that route,
// so that replies follow the servers' default route, via ilbd, again.
func (l *Lab) SetReturnRoute(viaRouter bool) error {
	if l.RouterNS == "" {
		return errors.New("lab has no return router (Options.ReturnRouter)")
	}
	type rt struct{ dst, gw string }
	routes := []rt{{ClientNet, RouterServerIP}}
	if l.opts.IPv6 {
		routes = append(routes, rt{ClientNet6, RouterServerIP6})
	}
	for _, s := range l.Servers {
		h, err := l.netlinkIn(s.NS)
		if err != nil {
			return err
		}
		ln, err := h.LinkByName("srv0")
		for _, r := range routes {
			if err != nil {
				break
			}
			_, dst, _ := net.ParseCIDR(r.dst)
			route := &netlink.Route{LinkIndex: ln.Attrs().Index, Dst: dst, Gw: net.ParseIP(r.gw)}
			if viaRouter {
				err = h.RouteReplace(route)
			} else if derr := h.RouteDel(route); derr != nil && !errors.Is(derr, unix.ESRCH) {
				err = derr
			}
		}
		h.Close()
		if err != nil {
			return fmt.Errorf("%s: return route: %w", s.Name, err)
		}
	}
	return nil
}

// LinkCounters are an interface's kernel packet counters.
type LinkCounters struct {
	RxPackets, TxPackets uint64
}

// LinkStats reads the packet counters of dev in the lab namespace nsName, e.g. the return
// router's rt1 (RouterNS) to see how many packets it forwarded to the client's segment.
func (l *Lab) LinkStats(nsName, dev string) (LinkCounters, error) {
	h, err := l.netlinkIn(nsName)
	if err != nil {
		return LinkCounters{}, err
	}
	defer h.Close()
	ln, err := h.LinkByName(dev)
	if err != nil {
		return LinkCounters{}, fmt.Errorf("%s/%s: %w", nsName, dev, err)
	}
	st := ln.Attrs().Statistics
	if st == nil {
		return LinkCounters{}, fmt.Errorf("%s/%s: no statistics", nsName, dev)
	}
	return LinkCounters{RxPackets: st.RxPackets, TxPackets: st.TxPackets}, nil
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
