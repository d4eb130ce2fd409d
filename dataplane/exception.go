package dataplane

// The exception path (DESIGN.md, "How a packet flows", step 4): traffic for the host's own
// addresses that is not load-balanced (ping to an interface address, SSH, replies to the
// host's own sockets such as health checks) is handed to the kernel through a TAP device
// that carries the port's MAC and addresses; what the kernel sends into the TAP leaves by
// the port unchanged. Each data-plane port gets its own DPDK net_tap vdev, whose kernel
// interface ilbd configures here through netlink. The worker loop (dataplane.go) moves the
// frames.

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/dpdk"
)

// Sizes of an exception port: kernel traffic is light, and every rx descriptor of a
// net_tap queue holds an mbuf from the shared pool for good.
const tapDesc = 512

// maxTapMTU is the largest MTU whose frames fit one mbuf (data room minus headroom minus
// the Ethernet header and one VLAN tag), since the worker handles single-segment frames.
const maxTapMTU = mbufRoom - dpdk.Headroom - 18

// tapVdev is the DPDK device name of port i's exception TAP. It is not "net_tap<i>" so
// that it can never collide with a data-plane port that is itself a net_tap vdev; DPDK
// matches the driver by the name's "net_tap" prefix.
func tapVdev(i int) string { return fmt.Sprintf("net_tap_ilb%d", i) }

// tapDevargs is the --vdev argument creating port i's exception TAP.
func tapDevargs(i int, iface string) string { return tapVdev(i) + ",iface=" + iface }

// checkExceptionHost verifies, before EAL creates anything, that the exception TAPs can
// be created: /dev/net/tun is usable and no interface of the same name exists already
// (ilbd never takes over an interface it did not create).
func checkExceptionHost(s *Config) error {
	if err := s.CheckTaps(); err != nil {
		return err
	}
	haveTap := false
	for i := range s.Ports {
		name, ok := s.TapName(i)
		if !ok {
			continue
		}
		haveTap = true
		if _, err := netlink.LinkByName(name); err == nil {
			return fmt.Errorf("port %s: the exception interface %s already exists; ilbd creates its own and takes over none (another ilbd in this network namespace? name it with tap=NAME on the port line, or turn the exception path off with exception=off)",
				s.Ports[i].Name(), name)
		} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
			return fmt.Errorf("port %s: looking up interface %s: %w", s.Ports[i].Name(), name, err)
		}
	}
	if haveTap {
		f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("the exception path needs /dev/net/tun (modprobe tun), or turn it off with \"exception off\": %w", err)
		}
		f.Close()
	}
	return nil
}

// setupTap prepares the kernel side of an exception TAP before the DPDK port starts (which
// brings the interface up): the physical port's MAC (through DPDK, so that net_tap and the
// kernel agree), IPv6 off unless the port has IPv6 addresses (no router solicitations, MLD
// reports or DAD from an address the engine does not own), an MTU no larger than what one
// mbuf carries, and the port's addresses.
func setupTap(tap dpdk.Port, iface string, mac [6]byte, addrs []netip.Prefix, mtu int) error {
	if err := tap.SetMAC(mac); err != nil {
		return err
	}
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	if hw := link.Attrs().HardwareAddr; !strings.EqualFold(hw.String(), net.HardwareAddr(mac[:]).String()) {
		// DPDK said yes but the kernel interface disagrees: set it directly.
		if err := netlink.LinkSetHardwareAddr(link, net.HardwareAddr(mac[:])); err != nil {
			return fmt.Errorf("interface %s: setting MAC %s: %w", iface, macString(mac), err)
		}
	}
	has6 := false
	for _, a := range addrs {
		has6 = has6 || a.Addr().Is6()
	}
	// IPv6: off without IPv6 addresses; with them on, but quiet: no duplicate address
	// detection (the engine owns the addresses and answers for them), no router
	// solicitations, no autoconfiguration from router advertisements.
	v6 := [][2]string{{"disable_ipv6", "1"}}
	if has6 {
		v6 = [][2]string{{"accept_dad", "0"}, {"dad_transmits", "0"}, {"accept_ra", "0"},
			{"router_solicitations", "0"}, {"disable_ipv6", "0"}}
	}
	for _, kv := range v6 {
		_, err := writeSysctl("net/ipv6/conf/"+iface+"/"+kv[0], kv[1])
		if err != nil && !(errors.Is(err, os.ErrNotExist) && !has6) {
			return fmt.Errorf("interface %s: %w", iface, err)
		}
	}
	if mtu >= 68 {
		if err := netlink.LinkSetMTU(link, min(mtu, maxTapMTU)); err != nil {
			return fmt.Errorf("interface %s: MTU %d: %w", iface, min(mtu, maxTapMTU), err)
		}
	}
	for _, a := range addrs {
		na := &netlink.Addr{IPNet: prefixNet(a)}
		if a.Addr().Is6() {
			na.Flags = unix.IFA_F_NODAD // the engine owns the address and answers for it
		}
		if err := netlink.AddrAdd(link, na); err != nil {
			return fmt.Errorf("interface %s: adding %s: %w", iface, a, err)
		}
	}
	return nil
}

// upTap brings an exception interface up once its DPDK port runs (net_tap does so when it
// starts; this makes sure) and checks that it carries the port's MAC.
func upTap(iface string, mac [6]byte) error {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("interface %s: set up: %w", iface, err)
	}
	if hw := link.Attrs().HardwareAddr; !strings.EqualFold(hw.String(), net.HardwareAddr(mac[:]).String()) {
		return fmt.Errorf("interface %s has MAC %s, want the port's %s", iface, hw, macString(mac))
	}
	return nil
}

// addGatewayRoute makes the gateway the kernel's default route through the exception
// interface of the port whose subnet holds it, so that the host's own sockets reach
// beyond the ports' subnets. An existing default route is left alone (logged).
func addGatewayRoute(gw netip.Addr, iface string, logger *log.Logger) error {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if gw.Is6() {
		dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(dst), Gw: net.IP(gw.AsSlice())}
	if err := netlink.RouteAdd(r); err != nil {
		if errors.Is(err, unix.EEXIST) {
			logger.Printf("exception path: the kernel already has a default route; not adding one via %s %s", gw, iface)
			return nil
		}
		return fmt.Errorf("default route via %s dev %s: %w", gw, iface, err)
	}
	logger.Printf("exception path: kernel default route via %s dev %s", gw, iface)
	return nil
}

// quietRawInterface applies to the kernel interface under a net_af_packet port. An
// AF_PACKET socket only taps frames: the kernel still receives each of them on that
// interface too, and now that the exception TAP gives the host the port's addresses, it
// would accept them there as well (Linux is a weak-host system), answer ARP there, and
// so see every exception packet twice. Strict reverse-path filtering (no route points
// out of the raw interface, so every IPv4 packet arriving there fails it), arp_ignore=8
// (never answer) and IPv6 off make the kernel leave that interface to ilbd. The returned
// function restores the values found (after a kill -9 they stay as ilbd set them, and the
// next ilbd finds nothing to restore).
func quietRawInterface(device string) (restore func(), err error) {
	iface := afPacketIface(device)
	if iface == "" {
		return func() {}, nil
	}
	var undo []func()
	restore = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for _, kv := range [][2]string{
		{"net/ipv4/conf/" + iface + "/rp_filter", "1"},
		{"net/ipv4/conf/" + iface + "/arp_ignore", "8"},
		{"net/ipv6/conf/" + iface + "/disable_ipv6", "1"},
	} {
		old, err := writeSysctl(kv[0], kv[1])
		if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(kv[0], "net/ipv6/") {
			continue // kernel without IPv6
		}
		if err != nil {
			restore()
			return nil, fmt.Errorf("interface %s under %s: %w", iface, device, err)
		}
		if old == kv[1] {
			continue // already so: set by the admin, or left by an ilbd that was killed
		}
		key := kv[0]
		undo = append(undo, func() { _, _ = writeSysctl(key, old) })
	}
	return restore, nil
}

// afPacketIface returns the kernel interface of a net_af_packet device argument
// ("net_af_packet0,iface=eth1" -> "eth1"), or "" for other devices.
func afPacketIface(device string) string {
	name, _, _ := strings.Cut(device, ",")
	if !strings.HasPrefix(name, "net_af_packet") && !strings.HasPrefix(name, "eth_af_packet") {
		return ""
	}
	return deviceIface(device)
}

// deviceIface returns the iface= argument of a vdev device argument, or "".
func deviceIface(device string) string {
	_, args, _ := strings.Cut(device, ",")
	for _, kv := range strings.Split(args, ",") {
		if v, ok := strings.CutPrefix(kv, "iface="); ok {
			return v
		}
	}
	return ""
}

// writeSysctl sets /proc/sys/<key> (of ilbd's own network namespace) to value and returns
// the previous value.
func writeSysctl(key, value string) (old string, err error) {
	p := filepath.Join("/proc/sys", key)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", key, err)
	}
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return "", fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}
