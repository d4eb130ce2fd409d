package tests

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// cmd builds a command for an administration tool found by lab.Tool (PATH, /usr/sbin, /sbin).
func cmd(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	p, err := lab.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(p, args...)
}

func netnsList(t *testing.T) map[string]bool {
	t.Helper()
	out, err := cmd(t, "ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	m := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = true
		}
	}
	return m
}

func ipIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := cmd(t, "ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestLabSelfCheck proves the lab without ilbd: the lb namespace's kernel routes between
// the client and server subnets, so the servers, the client helpers, the addressing and the
// cleanup can be checked on their own. If this fails, the e2e failures are lab bugs.
func TestLabSelfCheck(t *testing.T) {
	opts := lab.Options{KernelRouter: true}
	if why := lab.Unsupported(opts); why != "" {
		t.Skip(why)
	}
	before := netnsList(t)
	l := newLab(t, opts)
	names := l.Namespaces()
	if len(names) != 5 {
		t.Fatalf("lab created namespaces %v, want 5", names)
	}
	for _, n := range names {
		if before[n] {
			t.Fatalf("namespace %s existed before the lab", n)
		}
	}

	// Every veth end keeps the kernel's stock offloads; IPv6 is off on the lb side.
	checkStockOffloads(t, l, l.ClientNS, "cl0")
	for _, d := range []string{"lbc", "lbs", "lbs-br", "s1", "s2", "s3"} {
		checkStockOffloads(t, l, l.LBNS, d)
	}
	for _, s := range l.Servers {
		checkStockOffloads(t, l, s.NS, "srv0")
	}

	const n = 12
	for _, s := range l.Servers {
		addr := net.JoinHostPort(s.IP, "80")
		per, err := l.TCPRequests(addr, n, 3*time.Second)
		if err != nil {
			t.Fatalf("TCP to %s: %v", addr, err)
		}
		if per[s.Name] != n || len(per) != 1 {
			t.Errorf("TCP to %s answered by %v, want %s=%d", addr, per, s.Name, n)
		}
		per, err = l.UDPRequests(addr, n, 2*time.Second)
		if err != nil {
			t.Fatalf("UDP to %s: %v", addr, err)
		}
		if per[s.Name] != n || len(per) != 1 {
			t.Errorf("UDP to %s answered by %v, want %s=%d", addr, per, s.Name, n)
		}
		if s.TCPCount() != n || s.UDPCount() != n {
			t.Errorf("%s counted tcp=%d udp=%d, want %d each", s.Name, s.TCPCount(), s.UDPCount(), n)
		}
		// Each request was a new flow (its own source port).
		if s.TCPFlows() != n || s.UDPFlows() != n {
			t.Errorf("%s saw %d TCP and %d UDP distinct flows, want %d each", s.Name, s.TCPFlows(), s.UDPFlows(), n)
		}
		// What the client parsed is what the server saw: the client's own address.
		r, err := l.TCPRequest(addr, 3*time.Second)
		if err != nil {
			t.Fatalf("TCP to %s: %v", addr, err)
		}
		if r.Server != s.Name || r.PeerIP() != lab.ClientIP {
			t.Errorf("TCP reply %+v, want server %s peer %s:port", r, s.Name, lab.ClientIP)
		}
		r, err = l.UDPRequest(addr, 2*time.Second)
		if err != nil {
			t.Fatalf("UDP to %s: %v", addr, err)
		}
		if r.Server != s.Name || r.PeerIP() != lab.ClientIP {
			t.Errorf("UDP reply %+v, want server %s peer %s:port", r, s.Name, lab.ClientIP)
		}
	}
	if peers := l.PeerIPs(); len(peers) != 1 || peers[lab.ClientIP] != 3*(2*n+2) {
		t.Errorf("servers saw peers %v, want only %s (%d requests)", peers, lab.ClientIP, 3*(2*n+2))
	}
	tcp, udp := l.Counts()
	t.Logf("answered: tcp %v udp %v", tcp, udp)

	// Nothing answers on the VIP without ilbd: a bounded failure, not a hang.
	if _, err := l.TCPRequest(lab.VIPAddr(), time.Second); err == nil {
		t.Errorf("TCP to the VIP %s answered without ilbd", lab.VIPAddr())
	}

	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	after := netnsList(t)
	for _, n := range names {
		if after[n] {
			t.Errorf("namespace %s left behind", n)
		}
	}
	for n := range after {
		// Only this lab's names: other programs may create namespaces meanwhile.
		if !before[n] && strings.HasPrefix(n, l.Prefix+"-") {
			t.Errorf("namespace %s left behind", n)
		}
	}
}

// TestLabTopology checks the lab as ilbd will get it (no kernel routing): lbc and lbs up,
// promiscuous, without any kernel address and with IPv6 off; the bridge joins lbs' peer
// and the three server links; the client and the servers have their addresses and routes.
func TestLabTopology(t *testing.T) {
	opts := lab.Options{}
	if why := lab.Unsupported(opts); why != "" {
		t.Skip(why)
	}
	l := lab.NewT(t, opts) // no ilbd needed: lab.NewT, not newLab (no binaries check)
	for _, dev := range []string{"lbc", "lbs"} {
		link := ipIn(t, l.LBNS, "-o", "link", "show", "dev", dev)
		if !strings.Contains(link, "PROMISC") || !strings.Contains(link, ",UP") {
			t.Errorf("%s not UP and PROMISC: %s", dev, link)
		}
		if a := strings.TrimSpace(ipIn(t, l.LBNS, "-o", "addr", "show", "dev", dev)); a != "" {
			t.Errorf("%s has kernel addresses (ilbd must own it alone): %s", dev, a)
		}
		out, err := cmd(t, "ip", "netns", "exec", l.LBNS, "cat", "/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) != "1" {
			t.Errorf("%s: disable_ipv6=%s, want 1", dev, out)
		}
	}
	members := ipIn(t, l.LBNS, "-o", "link", "show", "master", "br0")
	for _, dev := range []string{"lbs-br", "s1", "s2", "s3"} {
		if !strings.Contains(members, " "+dev+"@") {
			t.Errorf("%s is not a port of br0:\n%s", dev, members)
		}
	}
	if fwd, _ := cmd(t, "ip", "netns", "exec", l.LBNS, "cat", "/proc/sys/net/ipv4/ip_forward").Output(); strings.TrimSpace(string(fwd)) != "0" {
		t.Errorf("ip_forward in the lb namespace = %q, want 0", fwd)
	}
	if a := ipIn(t, l.ClientNS, "-o", "-4", "addr", "show", "dev", "cl0"); !strings.Contains(a, "inet "+lab.ClientIP+"/24") {
		t.Errorf("cl0: %s", a)
	}
	if r := ipIn(t, l.ClientNS, "route", "show", "default"); !strings.Contains(r, "via "+lab.ClientGW+" dev cl0") {
		t.Errorf("client default route: %q", r)
	}
	for i, s := range l.Servers {
		if a := ipIn(t, s.NS, "-o", "-4", "addr", "show", "dev", "srv0"); !strings.Contains(a, "inet "+lab.ServerIPs[i]+"/24") {
			t.Errorf("%s srv0: %s", s.NS, a)
		}
		if r := ipIn(t, s.NS, "route", "show", "default"); !strings.Contains(r, "via "+lab.ServerGW+" dev srv0") {
			t.Errorf("%s default route: %q", s.NS, r)
		}
	}
}

// TestLabChecksums checks the premise of ilbd's offload handling (dataplane/offload.go): with
// the kernel's stock offloads (the lab changes none), the frames the client's kernel sends
// reach an AF_PACKET socket on lbc (as DPDK's net_af_packet reads them) with a correct IPv4
// header checksum but a partial TCP/UDP checksum (CHECKSUM_PARTIAL: only the pseudo-header
// sum in the field), which nothing in the frame tells. TestOffloadLab shows that they are
// complete while ilbd runs.
func TestLabChecksums(t *testing.T) {
	opts := lab.Options{}
	if why := lab.Unsupported(opts); why != "" {
		t.Skip(why)
	}
	l := lab.NewT(t, opts)
	// Nobody answers ARP for the gateway without ilbd: tell the client the gateway's MAC
	// (lbc's), so that its packets leave.
	link := strings.Fields(ipIn(t, l.LBNS, "-o", "link", "show", "dev", "lbc"))
	mac := ""
	for i, f := range link {
		if f == "link/ether" && i+1 < len(link) {
			mac = link[i+1]
		}
	}
	if mac == "" {
		t.Fatalf("no MAC for lbc in %v", link)
	}
	ipIn(t, l.ClientNS, "neigh", "replace", lab.ClientGW, "lladdr", mac, "dev", "cl0", "nud", "permanent")

	capt, err := l.StartCapture(l.LBNS, "lbc")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	dst := net.ParseIP(lab.ServerIPs[0]).To4()
	for _, proto := range []byte{17, 6} {
		match := func(f []byte) bool {
			return len(f) >= 34 && f[12] == 0x08 && f[13] == 0x00 && f[23] == proto && net.IP(f[30:34]).Equal(dst)
		}
		addr := net.JoinHostPort(lab.ServerIPs[0], "80")
		if proto == 17 {
			_, _ = l.UDPRequest(addr, 200*time.Millisecond) // no answer expected
		} else {
			_, _ = l.TCPRequest(addr, 200*time.Millisecond) // only the SYN leaves
		}
		f, err := capt.Next(2*time.Second, match)
		if err != nil {
			t.Fatalf("protocol %d: no frame from the client on lbc: %v", proto, err)
		}
		if len(f) > 1514 {
			t.Errorf("protocol %d: %d-byte frame: larger than the MTU (GSO/GRO left on?)", proto, len(f))
		}
		ip := f[14:]
		ihl := int(ip[0]&0x0f) * 4
		if sum := csum(0, ip[:ihl]); sum != 0xffff {
			t.Errorf("protocol %d: bad IPv4 header checksum (sum %#04x)", proto, sum)
		}
		total := int(ip[2])<<8 | int(ip[3])
		l4 := ip[ihl:total]
		pseudo := []byte{ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19], 0, proto, byte(len(l4) >> 8), byte(len(l4))}
		off := 6 // UDP checksum field
		if proto == 6 {
			off = 16
		}
		field := uint32(l4[off])<<8 | uint32(l4[off+1])
		if sum := csum(csum(0, pseudo), l4); sum == 0xffff {
			t.Errorf("protocol %d: complete L4 checksum on lbc: is tx checksum offload off on cl0? The lab must leave the stock offloads", proto)
		} else if want := csum(0, pseudo); field != want {
			t.Errorf("protocol %d: L4 checksum field %#04x is neither complete nor the pseudo-header sum %#04x", proto, field, want)
		}
	}
}

// csum adds b to the ones' complement sum s (folded); a correct packet sums to 0xffff.
func csum(s uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return s
}
