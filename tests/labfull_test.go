package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestLabSelfCheckIPv6 proves the extended lab without ilbd: IPv6 on every endpoint, the
// return router and the client on the servers' subnet, with the lb namespace's kernel
// routing. It emulates DSR with a kernel route (VIP via a server: the packet reaches the
// server unchanged, by its MAC, as ilbd's DSR sends it) to check the servers' side of DSR
// (VIP on the loopback, never announced, answers from the VIP over UDP too) and the return
// path through the router, and checks that the capture on lbs used by the DSR tests does
// see server-to-client frames when they do cross lbs. If this fails, the DSR, full-NAT and
// IPv6 end-to-end failures are lab bugs.
func TestLabSelfCheckIPv6(t *testing.T) {
	opts := lab.Options{KernelRouter: true, IPv6: true, ReturnRouter: true, LocalClient: true}
	if why := lab.Unsupported(opts); why != "" {
		t.Skip(why)
	}
	before := netnsList(t)
	l := newLab(t, opts)
	names := l.Namespaces()
	if len(names) != 7 {
		t.Fatalf("lab created namespaces %v, want 7 (client, lb, 3 servers, router, local client)", names)
	}

	// Addresses, routes and sysctls as documented.
	if a := ipIn(t, l.ClientNS, "-o", "addr", "show", "dev", "cl0"); !strings.Contains(a, "inet6 "+lab.ClientIP6+"/64") || strings.Contains(a, "tentative") {
		t.Errorf("cl0 (want %s/64, not tentative): %s", lab.ClientIP6, a)
	}
	if r := ipIn(t, l.ClientNS, "-6", "route", "show", "default"); !strings.Contains(r, "via "+lab.ClientGW6+" dev cl0") {
		t.Errorf("client IPv6 default route: %q", r)
	}
	for i, s := range l.Servers {
		if a := ipIn(t, s.NS, "-o", "addr", "show", "dev", "srv0"); !strings.Contains(a, "inet6 "+lab.ServerIP6s[i]+"/64") || strings.Contains(a, "tentative") {
			t.Errorf("%s srv0: %s", s.Name, a)
		}
		if r := ipIn(t, s.NS, "-6", "route", "show", "default"); !strings.Contains(r, "via "+lab.ServerGW6+" dev srv0") {
			t.Errorf("%s IPv6 default route: %q", s.Name, r)
		}
		for _, kv := range [][2]string{{"net/ipv4/conf/srv0/arp_ignore", "1"}, {"net/ipv4/conf/srv0/arp_announce", "2"}, {"net/ipv6/conf/srv0/accept_dad", "0"}} {
			out, err := cmd(t, "ip", "netns", "exec", s.NS, "cat", "/proc/sys/"+kv[0]).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != kv[1] {
				t.Errorf("%s: %s = %q (%v), want %s", s.Name, kv[0], out, err, kv[1])
			}
		}
	}
	// The bridges are switches only: the lb namespace's kernel never answers ARP on them
	// and drops IPv4 arriving there.
	for _, br := range []string{"br0", "brc"} {
		for _, kv := range [][2]string{{"arp_ignore", "8"}, {"rp_filter", "1"}} {
			out, err := cmd(t, "ip", "netns", "exec", l.LBNS, "cat", "/proc/sys/net/ipv4/conf/"+br+"/"+kv[0]).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != kv[1] {
				t.Errorf("lb namespace: %s %s = %q (%v), want %s", br, kv[0], out, err, kv[1])
			}
		}
	}
	for _, d := range []string{"lbc-br", "c0", "r1"} {
		if m := ipIn(t, l.LBNS, "-o", "link", "show", "master", "brc"); !strings.Contains(m, " "+d+"@") {
			t.Errorf("%s is not a port of brc:\n%s", d, m)
		}
	}
	for _, d := range []string{"lbs-br", "s1", "s2", "s3", "r0", "lcl"} {
		if m := ipIn(t, l.LBNS, "-o", "link", "show", "master", "br0"); !strings.Contains(m, " "+d+"@") {
			t.Errorf("%s is not a port of br0:\n%s", d, m)
		}
	}
	for _, d := range []string{"lbc", "lbs", "lbc-br", "c0", "r1", "r0", "lcl", "lbs-br", "s1"} {
		checkStockOffloads(t, l, l.LBNS, d)
	}
	checkStockOffloads(t, l, l.RouterNS, "rt0")
	checkStockOffloads(t, l, l.RouterNS, "rt1")
	checkStockOffloads(t, l, l.LocalClientNS, "lc0")

	// Both families from the client to every server's own address (kernel routing), and
	// from the local client on the servers' segment (no routing at all).
	const n = 6
	for _, s := range l.Servers {
		for _, c := range []struct {
			who      *lab.Client
			dst, src string
		}{
			{l.Client(), s.IP, lab.ClientIP}, {l.Client(), s.IP6, lab.ClientIP6},
			{l.LocalClient(), s.IP, lab.LocalClientIP}, {l.LocalClient(), s.IP6, lab.LocalClientIP6},
		} {
			addr := lab.Addr(c.dst, lab.ServicePort)
			for _, proto := range []string{"tcp", "udp"} {
				rs, err := c.who.Replies(proto, addr, n, 3*time.Second)
				if err != nil {
					t.Fatalf("%s to %s: %v", proto, addr, err)
				}
				for _, r := range rs {
					if r.Server != s.Name || r.PeerIP() != c.src || r.LocalIP() != c.dst {
						t.Errorf("%s to %s: reply %+v, want server %s, peer %s, local %s", proto, addr, r, s.Name, c.src, c.dst)
						break
					}
				}
			}
		}
		// The alternative port answers too, and says so.
		r, err := l.Client().TCPRequest(lab.Addr(s.IP6, lab.AltPort), 3*time.Second)
		if err != nil || r.Local != lab.Addr(s.IP6, lab.AltPort) {
			t.Errorf("TCP to %s port %d: %+v %v", s.IP6, lab.AltPort, r, err)
		}
	}

	// A secondary client address is used as the source.
	c3, err := l.AddClientAddress("198.51.100.3")
	if err != nil {
		t.Fatal(err)
	}
	c3v6, err := l.AddClientAddress("2001:db8:1::3")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c3.UDPRequest(lab.Addr(lab.ServerIPs[0], lab.ServicePort), 2*time.Second); err != nil || r.PeerIP() != "198.51.100.3" {
		t.Errorf("UDP from 198.51.100.3: %+v %v", r, err)
	}
	if r, err := c3v6.TCPRequest(lab.Addr(lab.ServerIP6s[0], lab.ServicePort), 3*time.Second); err != nil || r.PeerIP() != "2001:db8:1::3" {
		t.Errorf("TCP from 2001:db8:1::3: %+v %v", r, err)
	}

	// A long-lived connection carries several exchanges on one flow.
	conn, err := l.Client().Dial(lab.Addr(lab.ServerIPs[1], lab.ServicePort), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		r, err := conn.Exchange(2 * time.Second)
		if err != nil || r.Server != "srv2" || r.Peer != conn.LocalAddr() {
			t.Errorf("exchange %d on one connection: %+v %v (local %s)", i, r, err, conn.LocalAddr())
		}
	}
	conn.Close()

	// DSR, emulated: the lb kernel routes each VIP to srv1 (next hop = srv1's MAC, packet
	// unchanged); srv1 holds the VIPs on its loopback and answers from them through the
	// return router.
	if err := l.SetServerVIP(lab.VIP, true); err != nil {
		t.Fatal(err)
	}
	if err := l.SetServerVIP(lab.VIP6, true); err != nil {
		t.Fatal(err)
	}
	ipIn(t, l.LBNS, "route", "add", lab.VIP+"/32", "via", lab.ServerIPs[0])
	ipIn(t, l.LBNS, "-6", "route", "add", lab.VIP6+"/128", "via", lab.ServerIP6s[0])
	capt, err := l.StartCapture(l.LBNS, "lbs")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	toClient := func(f []byte) bool { return lab.To(lab.ClientIP)(f) || lab.To(lab.ClientIP6)(f) }

	dsr := func(via string) (replies int) {
		t.Helper()
		for _, vip := range []string{lab.VIP, lab.VIP6} {
			src := lab.ClientIP
			if strings.Contains(vip, ":") {
				src = lab.ClientIP6
			}
			for _, proto := range []string{"tcp", "udp"} {
				rs, err := l.Client().Replies(proto, lab.Addr(vip, lab.ServicePort), n, 3*time.Second)
				if err != nil {
					t.Fatalf("%s to the VIP %s (return via %s): %v", proto, vip, via, err)
				}
				for _, r := range rs {
					if r.Server != "srv1" || r.PeerIP() != src || r.LocalIP() != vip {
						t.Errorf("%s to %s: reply %+v, want srv1, peer %s, local (the VIP) %s", proto, vip, r, src, vip)
						break
					}
				}
				replies += len(rs)
			}
		}
		return replies
	}

	// Replies via the lb kernel first: the capture on lbs must see them (positive control).
	if _, _, err := capt.Drain(nil); err != nil {
		t.Fatal(err)
	}
	dsr("the lb namespace")
	_, seen, err := capt.Drain(toClient)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 4*n {
		t.Fatalf("capture on lbs saw %d frames to the client while the servers' replies crossed lbs; want at least %d", len(seen), 4*n)
	}

	// Replies via the return router: none enters lbs, all cross the router.
	if err := l.SetReturnRoute(true); err != nil {
		t.Fatal(err)
	}
	if r := ipIn(t, l.Servers[0].NS, "route", "get", lab.ClientIP); !strings.Contains(r, "via "+lab.RouterServerIP) {
		t.Errorf("srv1 route to the client: %q, want via the router %s", r, lab.RouterServerIP)
	}
	rt0, err := l.LinkStats(l.RouterNS, "rt1")
	if err != nil {
		t.Fatal(err)
	}
	replies := dsr("the return router")
	rt1, err := l.LinkStats(l.RouterNS, "rt1")
	if err != nil {
		t.Fatal(err)
	}
	if fwd := rt1.TxPackets - rt0.TxPackets; fwd < uint64(replies) {
		t.Errorf("the router sent %d packets to the client's segment for %d replies", fwd, replies)
	}
	if _, seen, err := capt.Drain(toClient); err != nil {
		t.Fatal(err)
	} else if len(seen) != 0 {
		t.Errorf("%d server-to-client frames entered lbs although the servers route the client network via the router; first: %s", len(seen), lab.Describe(seen[0]))
	}
	// And back: SetReturnRoute(false) restores the route via the lb namespace.
	if err := l.SetReturnRoute(false); err != nil {
		t.Fatal(err)
	}
	if r := ipIn(t, l.Servers[0].NS, "route", "get", lab.ClientIP); !strings.Contains(r, "via "+lab.ServerGW) {
		t.Errorf("srv1 route to the client after SetReturnRoute(false): %q", r)
	}

	// Nobody on the servers' segment answers ARP or neighbour solicitations for the VIP
	// held on the servers' loopbacks: the local client, told the VIP is on-link, never
	// learns a link-layer address for it.
	ipIn(t, l.LocalClientNS, "route", "add", lab.VIP+"/32", "dev", "lc0")
	ipIn(t, l.LocalClientNS, "-6", "route", "add", lab.VIP6+"/128", "dev", "lc0")
	for _, vip := range []string{lab.VIP, lab.VIP6} {
		_, _ = l.LocalClient().UDPRequest(lab.Addr(vip, lab.ServicePort), 1500*time.Millisecond)
	}
	for _, vip := range []string{lab.VIP, lab.VIP6} {
		if nb := ipIn(t, l.LocalClientNS, "neigh", "show", vip); strings.Contains(nb, "lladdr") {
			t.Errorf("someone answered address resolution for the VIP %s on the servers' segment: %s", vip, strings.TrimSpace(nb))
		}
	}
	if err := l.SetServerVIP(lab.VIP, false); err != nil {
		t.Error(err)
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
		if !before[n] && strings.HasPrefix(n, l.Prefix+"-") {
			t.Errorf("namespace %s left behind", n)
		}
	}
}
