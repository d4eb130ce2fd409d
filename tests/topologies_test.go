package tests

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestE2EDSR: direct server return over IPv4 (runDSR).
func TestE2EDSR(t *testing.T) { runDSR(t, ipv4) }

// TestE2EFullNAT: full-NAT over IPv4, and the same-subnet client (runFullNAT).
func TestE2EFullNAT(t *testing.T) { runFullNAT(t, ipv4) }

// runDSR checks DSR end to end (spec §6.2 step 5, §6.9): ilbd only rewrites the MAC; the
// servers hold the VIP on their loopback, see the real client address and the VIP as the
// destination, and answer the client directly through the return router, so that no
// server-to-client packet enters ilbd (an AF_PACKET capture on lbs, ilbd's server-side
// port, proves it; a half-NAT exchange first proves the capture sees such packets when
// they do cross lbs). TCP uses hash-ip-port (Solaris DSR round robin balances per packet,
// which would tear a TCP connection apart); UDP uses round robin, which in DSR balances
// every datagram.
func runDSR(t *testing.T, f family) {
	l := newLab(t, lab.Options{IPv6: f.v6, ReturnRouter: true})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	c := l.Client()
	vip := lab.Addr(f.vip, lab.ServicePort)

	capt, err := l.StartCapture(l.LBNS, "lbs")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()

	// Positive control: with half-NAT the servers' answers enter lbs, and the capture sees them.
	ilbadmAll(t, l, []string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"),
		"-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "control"})
	first(t, c, "tcp", vip, "half-NAT (capture control)")
	if _, seen, err := capt.Drain(lab.To(f.client)); err != nil {
		t.Fatal(err)
	} else if len(seen) == 0 {
		t.Fatalf("the capture on lbs saw no frame to the client %s although half-NAT replies cross lbs: capture broken", f.client)
	}
	ilbadmAll(t, l, []string{"delete-rule", "control"})

	// DSR: VIP on the servers' loopback, replies to the client network via the router.
	if err := l.SetServerVIP(f.vip, true); err != nil {
		t.Fatal(err)
	}
	if err := l.SetReturnRoute(true); err != nil {
		t.Fatal(err)
	}
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"),
			"-m", "lbalg=hash-ip-port,type=DSR", "-o", "servergroup=websg", "dsrtcp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"),
			"-m", "lbalg=rr,type=DSR", "-o", "servergroup=websg", "dsrudp"},
	)
	if _, _, err := capt.Drain(nil); err != nil {
		t.Fatal(err)
	}
	// Every client-to-VIP frame ilbd receives, to compare with its counters.
	captC, err := l.StartCapture(l.LBNS, "lbc")
	if err != nil {
		t.Fatal(err)
	}
	defer captC.Close()
	rt0, err := l.LinkStats(l.RouterNS, "rt1")
	if err != nil {
		t.Fatal(err)
	}
	tcp0, udp0 := l.Counts()

	r := first(t, c, "tcp", vip, "DSR TCP (hash-ip-port)")
	if r.PeerIP() != f.client || r.LocalIP() != f.vip {
		t.Fatalf("DSR: %s saw peer %s, local %s; want the client %s and the VIP %s", r.Server, r.Peer, r.Local, f.client, f.vip)
	}
	first(t, c, "udp", vip, "DSR UDP (round robin)")

	const n = 90
	rsT := replies(t, c, "tcp", vip, n)
	rsU := replies(t, c, "udp", vip, n)
	checkReplies(t, "DSR TCP", rsT, []string{f.client}, localIs(f.vip), "the VIP")
	checkReplies(t, "DSR UDP", rsU, []string{f.client}, localIs(f.vip), "the VIP")
	// hash-ip-port over 90 source ports spreads connections over all three servers.
	atLeast(t, "DSR TCP hash-ip-port", perServerOf(rsT), 5)
	// Round robin per datagram.
	balanced(t, "DSR UDP round robin", perServerOf(rsU), n/3, 1)

	// One connection stays on one server (hash-ip-port), over several exchanges.
	conn, err := c.Dial(vip, tcpTimeout)
	if err != nil {
		t.Fatalf("DSR: dial %s: %v", vip, err)
	}
	var on string
	for i := 0; i < 5; i++ {
		r, err := conn.Exchange(tcpTimeout)
		if err != nil {
			t.Errorf("DSR: exchange %d on one connection: %v", i+1, err)
			break
		}
		if on == "" {
			on = r.Server
		} else if r.Server != on {
			t.Errorf("DSR: exchange %d on one connection answered by %s, earlier ones by %s", i+1, r.Server, on)
		}
	}
	conn.Close()

	// What the servers counted is what the client received (plus the first requests and
	// the long-lived connection's exchanges).
	tcp1, udp1 := l.Counts()
	if got, want := sum(diffCounts(tcp0, tcp1)), len(rsT)+1+5; got != want {
		t.Errorf("DSR: servers answered %d TCP requests, the client sent %d", got, want)
	}
	if got, want := sum(diffCounts(udp0, udp1)), len(rsU)+1; got != want {
		t.Errorf("DSR: servers answered %d UDP requests, the client sent %d", got, want)
	}

	// The answers went through the router, none through ilbd.
	time.Sleep(100 * time.Millisecond) // let the last FINs pass
	rt1, err := l.LinkStats(l.RouterNS, "rt1")
	if err != nil {
		t.Fatal(err)
	}
	if fwd, min := rt1.TxPackets-rt0.TxPackets, uint64(2*len(rsT)+len(rsU)); fwd < min {
		t.Errorf("DSR: the return router sent %d packets to the client's segment; want at least %d (a SYN-ACK and an answer per connection, an answer per datagram)", fwd, min)
	}
	total, seen, err := capt.Drain(lab.To(f.client))
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) > 0 {
		t.Errorf("DSR: %d server-to-client frames entered ilbd on lbs (of %d frames received there); first: %s",
			len(seen), total, lab.Describe(seen[0]))
	}
	t.Logf("DSR: router forwarded %d packets to the client; lbs received %d frames, none to the client", rt1.TxPackets-rt0.TxPackets, total)

	// ilbd's own counters agree: each DSR rule processed exactly the client-to-VIP packets
	// that arrived on lbc (Solaris counts both directions of NAT flows, so answers crossing
	// ilbd would show), and DSR keeps no NAT entries.
	_, in, err := captC.Drain(func(fr []byte) bool {
		src, dst, _, ok := lab.IPHeader(fr)
		return ok && src.String() == f.client && dst.String() == f.vip
	})
	if err != nil {
		t.Fatal(err)
	}
	if drops, err := captC.Drops(); err != nil || drops != 0 {
		t.Fatalf("the capture on lbc lost %d frames (%v): cannot compare with ilbd's counters", drops, err)
	}
	perProto := map[uint8]int{}
	for _, fr := range in {
		_, _, p, _ := lab.IPHeader(fr)
		perProto[p]++
	}
	for _, rc := range []struct {
		rule  string
		proto uint8
	}{{"dsrtcp", 6}, {"dsrudp", 17}} {
		got := strings.TrimSpace(ilbadmOK(t, l, "show-statistics", "-A", "-r", rc.rule, "-p", "-o", "PKT_P"))
		t.Logf("DSR: rule %s: PKT_P %s, client-to-VIP packets on lbc %d", rc.rule, got, perProto[rc.proto])
		if want := fmt.Sprint(perProto[rc.proto]); got != want {
			t.Errorf("DSR: ilbadm show-statistics -A -r %s: PKT_P %s; the client sent %s packets to the VIP for that rule (and the servers answered directly)",
				rc.rule, got, want)
		}
	}
	nat := ilbadmOK(t, l, "show-nat")
	for _, r := range append(rsT, rsU...) {
		_, port, _ := net.SplitHostPort(r.Peer)
		if key := f.client + "." + port + " "; strings.Contains(nat, key) {
			t.Errorf("DSR: show-nat lists an entry for the DSR flow from %s (DSR is stateless):\n%s", r.Peer, nat)
			break
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// runFullNAT checks full-NAT (spec §6.3, §6.4) and why it exists: the servers see a
// proxy-src address (round robin over the range), never the client's; and a client on
// the servers' own subnet reaches the VIP with full-NAT but not with half-NAT, where the
// server answers it directly from the server's own address, which the client's socket
// (connected to the VIP) rejects. A capture on the local client shows that direct answer.
func runFullNAT(t *testing.T, f family) {
	l := newLab(t, lab.Options{IPv6: f.v6, LocalClient: true})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	c, lc := l.Client(), l.LocalClient()
	vip := lab.Addr(f.vip, lab.ServicePort)

	// Half-NAT: works for the client behind ilbd, fails for the client on the servers' subnet.
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"),
			"-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "hntcp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"),
			"-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "hnudp"},
	)
	first(t, c, "tcp", vip, "half-NAT from the client")
	capt, err := l.StartCapture(l.LocalClientNS, "lc0")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	fromServer := func(fr []byte) bool {
		for _, s := range f.servers {
			if lab.FromTo(s, f.localClient)(fr) {
				return true
			}
		}
		return false
	}
	_, udp0 := l.Counts()
	if r, err := lc.TCPRequest(vip, 2*time.Second); err == nil {
		t.Errorf("half-NAT: the client on the servers' subnet (%s) got a TCP answer from %s (peer %s); want a failure", f.localClient, r.Server, r.Peer)
	}
	// Each datagram reaches a server, which answers it directly; the client gets nothing.
	const tries = 3
	for i := 0; i < tries; i++ {
		if r, err := lc.UDPRequest(vip, time.Second); err == nil {
			t.Errorf("half-NAT: the client on the servers' subnet (%s) got a UDP answer from %s (peer %s); want a failure", f.localClient, r.Server, r.Peer)
		}
	}
	var answered int
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, udp1 := l.Counts()
		if answered = sum(diffCounts(udp0, udp1)); answered == tries {
			break
		}
	}
	if answered == 0 {
		t.Errorf("half-NAT: servers answered none of the %d UDP requests of the client on their subnet; want them answered (directly, to no avail)", tries)
	} else if answered != tries {
		t.Logf("half-NAT: servers answered %d of the %d UDP requests of the client on their subnet", answered, tries)
	}
	if _, seen, err := capt.Drain(fromServer); err != nil {
		t.Fatal(err)
	} else if len(seen) == 0 {
		t.Errorf("half-NAT: no frame from a server's own address reached the client on the servers' subnet; want the direct answers that its sockets reject")
	} else {
		t.Logf("half-NAT, client on the servers' subnet: %d direct answers from the servers' own addresses, e.g. %s", len(seen), lab.Describe(seen[0]))
	}
	ilbadmAll(t, l, []string{"delete-rule", "hntcp", "hnudp"})

	// Full-NAT.
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"),
			"-m", "lbalg=rr,type=NAT,proxy-src=" + f.proxyRange, "-o", "servergroup=websg", "nattcp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"),
			"-m", "lbalg=rr,type=NAT,proxy-src=" + f.proxyRange, "-o", "servergroup=websg", "natudp"},
	)
	r := first(t, c, "tcp", vip, "full-NAT TCP")
	if r.PeerIP() == f.client {
		t.Fatalf("full-NAT: %s saw the client address %s; want a proxy-src address %v", r.Server, r.Peer, f.proxy)
	}
	first(t, c, "udp", vip, "full-NAT UDP")
	const n = 90
	rsT := replies(t, c, "tcp", vip, n)
	rsU := replies(t, c, "udp", vip, n)
	balanced(t, "full-NAT TCP", perServerOf(rsT), n/3, 1)
	balanced(t, "full-NAT UDP", perServerOf(rsU), n/3, 1)
	local := localIsServer(l, f)
	checkReplies(t, "full-NAT TCP", rsT, f.proxy, local, "the server's address")
	checkReplies(t, "full-NAT UDP", rsU, f.proxy, local, "the server's address")
	var used []string
	for _, r := range append(rsT, rsU...) {
		used = append(used, r.PeerIP())
	}
	if u := distinct(used...); len(u) != len(f.proxy) {
		t.Errorf("full-NAT: servers saw source addresses %v; want every proxy-src address %v (chosen round robin)", u, f.proxy)
	}

	// The client on the servers' subnet now gets its answers (through ilbd).
	if r, err := lc.TCPRequest(vip, tcpTimeout); err != nil {
		t.Errorf("full-NAT: the client on the servers' subnet (%s): TCP to %s: %v", f.localClient, vip, err)
	} else if r.PeerIP() == f.localClient {
		t.Errorf("full-NAT: %s saw the local client's own address %s", r.Server, r.Peer)
	}
	rsLT := replies(t, lc, "tcp", vip, 30)
	rsLU := replies(t, lc, "udp", vip, 30)
	checkReplies(t, "full-NAT TCP from the servers' subnet", rsLT, f.proxy, local, "the server's address")
	checkReplies(t, "full-NAT UDP from the servers' subnet", rsLU, f.proxy, local, "the server's address")
	balanced(t, "full-NAT TCP from the servers' subnet", perServerOf(rsLT), 10, 1)
	balanced(t, "full-NAT UDP from the servers' subnet", perServerOf(rsLU), 10, 1)
}

// TestE2EPortRules: "Cisco-style" rules on one VIP, one per port, each with its own group of
// port-bound servers (spec §6.2 step 6): VIP:80 -> websg (srv1:80, srv2:80), VIP:8080 ->
// altsg (srv2:8080, srv3:8080) for TCP and UDP, and VIP:81 -> trsg (srv1:8080, srv3:8080),
// which translates the port. Each port reaches exactly its own group, on the servers' port.
func TestE2EPortRules(t *testing.T) {
	f := ipv4
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	s := lab.ServerIPs
	ilbadmAll(t, l,
		[]string{"create-servergroup", "-s", serverList([]string{s[0], s[1]}, lab.ServicePort), "websg"},
		[]string{"create-servergroup", "-s", serverList([]string{s[1], s[2]}, lab.AltPort), "altsg"},
		[]string{"create-servergroup", "-s", serverList([]string{s[0], s[2]}, lab.AltPort), "trsg"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "web"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.AltPort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=altsg", "alt"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.AltPort, "udp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=altsg", "altudp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, 81, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=trsg", "translate"},
	)
	c := l.Client()
	for _, tc := range []struct {
		proto   string
		port    int
		servers []string
		local   int
	}{
		{"tcp", lab.ServicePort, []string{"srv1", "srv2"}, lab.ServicePort},
		{"tcp", lab.AltPort, []string{"srv2", "srv3"}, lab.AltPort},
		{"udp", lab.AltPort, []string{"srv2", "srv3"}, lab.AltPort},
		{"tcp", 81, []string{"srv1", "srv3"}, lab.AltPort},
	} {
		addr := lab.Addr(f.vip, tc.port)
		first(t, c, tc.proto, addr, "port rules")
		rs := replies(t, c, tc.proto, addr, 30)
		what := tc.proto + " " + addr
		onlyServers(t, what, perServerOf(rs), 15, 1, tc.servers...)
		checkReplies(t, what, rs, []string{f.client}, func(r lab.Reply) bool {
			srv := l.ServerByName(r.Server)
			return srv != nil && r.Local == lab.Addr(srv.IP, tc.local)
		}, lab.Addr("<server>", tc.local))
	}
	// Nothing listens on the VIP's other ports: a port without a rule is not balanced.
	if r, err := c.TCPRequest(lab.Addr(f.vip, 82), time.Second); err == nil {
		t.Errorf("TCP to %s (no rule) answered by %s", lab.Addr(f.vip, 82), r.Server)
	}
}
