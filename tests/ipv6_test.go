package tests

import (
	"testing"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestE2EIPv6HalfNAT: half-NAT over IPv6 in a dual-stack lab, with IPv4 rules on the same
// servers at the same time. ilbd resolves the servers and the client with neighbour
// discovery and answers it for its own port addresses; the servers see the real client
// address (2001:db8:1::2) on their own address; round robin balances TCP connections and
// UDP flows; IPv4 keeps working beside it.
func TestE2EIPv6HalfNAT(t *testing.T) {
	f := ipv6
	l := newLab(t, lab.Options{IPv6: true})
	startIlbd(t, l)
	createGroup(t, l, f, "web6")
	createGroup(t, l, ipv4, "web4")
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=web6", "web6tcp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=web6", "web6udp"},
		[]string{"create-rule", "-e", "-i", incoming(ipv4.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=web4", "web4tcp"},
	)
	c := l.Client()
	vip := lab.Addr(f.vip, lab.ServicePort)
	r := first(t, c, "tcp", vip, "IPv6 half-NAT TCP")
	if r.PeerIP() != f.client {
		t.Fatalf("IPv6 half-NAT: %s saw peer %s, want the client %s", r.Server, r.Peer, f.client)
	}
	first(t, c, "udp", vip, "IPv6 half-NAT UDP")
	const n = 90
	rsT := replies(t, c, "tcp", vip, n)
	rsU := replies(t, c, "udp", vip, n)
	balanced(t, "IPv6 half-NAT TCP", perServerOf(rsT), n/3, 1)
	balanced(t, "IPv6 half-NAT UDP", perServerOf(rsU), n/3, 1)
	checkReplies(t, "IPv6 half-NAT TCP", rsT, []string{f.client}, localIsServer(l, f), "the server's IPv6 address")
	checkReplies(t, "IPv6 half-NAT UDP", rsU, []string{f.client}, localIsServer(l, f), "the server's IPv6 address")

	// IPv4 beside it.
	rs4 := replies(t, c, "tcp", lab.VIPAddr(), 30)
	balanced(t, "IPv4 half-NAT TCP in the dual-stack lab", perServerOf(rs4), 10, 1)
	checkReplies(t, "IPv4 half-NAT TCP in the dual-stack lab", rs4, []string{ipv4.client}, localIsServer(l, ipv4), "the server's IPv4 address")
}

// TestE2EIPv6DSR: direct server return over IPv6 (runDSR): VIP 2001:db8:3::10/128 on the
// servers' loopback, answers through the return router, none through ilbd.
func TestE2EIPv6DSR(t *testing.T) { runDSR(t, ipv6) }

// TestE2EIPv6FullNAT: full-NAT over IPv6 with proxy-src 2001:db8:2::100-101, and the
// client on the servers' subnet (2001:db8:2::50) (runFullNAT).
func TestE2EIPv6FullNAT(t *testing.T) { runFullNAT(t, ipv6) }
