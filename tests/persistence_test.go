package tests

import (
	"strings"
	"testing"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestE2EPersistence: persistent (sticky) rules over IPv4 (runPersistence).
func TestE2EPersistence(t *testing.T) { runPersistence(t, ipv4) }

// TestE2EIPv6Persistence: persistent rules over IPv6, pmask /128 and /64 (runPersistence).
func TestE2EIPv6Persistence(t *testing.T) { runPersistence(t, ipv6) }

// runPersistence checks create-rule -p (spec §1.4, §6.2 step 4, §6.7) with round robin and
// half-NAT: the source address masked with pmask chooses the server once, and every later
// connection or flow of that client (or, with a wider mask, of its whole subnet) goes to
// the same server, while round robin would have spread them.
//
//   - host mask (/32, /128), TCP: 30 connections from the client all reach one server;
//     two further client addresses each stick to a server of their own, and round robin
//     gives them different ones (their first connections come one after the other);
//     show-persist lists the three masked addresses;
//   - subnet mask (/24, /64) on a second VIP: the three addresses share one server;
//   - host mask, UDP: 30 flows (new source port each) from the client reach one server.
func runPersistence(t *testing.T, f family) {
	// The subnet pmask is the shortest in use: with several workers it must be the steering
	// prefix, so that the whole subnet is owned by one worker.
	l := newLab(t, lab.Options{IPv6: f.v6, ExtraSettings: []string{"steer-prefix 24 64"}})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-p", "-i", incoming(f.vip, lab.ServicePort, "tcp"),
			"-m", "lbalg=rr,type=HALF-NAT,pmask=" + f.hostMask, "-o", "servergroup=websg", "sticky"},
		[]string{"create-rule", "-e", "-p", "-i", incoming(f.vip2, lab.ServicePort, "tcp"),
			"-m", "lbalg=rr,type=HALF-NAT,pmask=" + f.netMask, "-o", "servergroup=websg", "stickynet"},
		[]string{"create-rule", "-e", "-p", "-i", incoming(f.vip, lab.ServicePort, "udp"),
			"-m", "lbalg=rr,type=HALF-NAT,pmask=" + f.hostMask, "-o", "servergroup=websg", "stickyudp"},
	)
	c := l.Client()
	others := []*lab.Client{}
	for _, ip := range f.extra {
		o, err := l.AddClientAddress(ip)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, o)
	}
	vip, vip2 := lab.Addr(f.vip, lab.ServicePort), lab.Addr(f.vip2, lab.ServicePort)

	// Host mask: one client, one server.
	r := first(t, c, "tcp", vip, "persistent rule")
	rs := replies(t, c, "tcp", vip, 30)
	per := perServerOf(rs)
	if per[r.Server] != len(rs) {
		t.Errorf("pmask=%s: 31 connections from %s went to %s; want all on %s (the first one's server)",
			f.hostMask, f.client, sortedCounts(per), r.Server)
	}
	// Two more client addresses: each sticks to its own server; consecutive first
	// connections get consecutive round-robin choices.
	var firsts []string
	for _, o := range others {
		firsts = append(firsts, first(t, o, "tcp", vip, "persistent rule, second address").Server)
	}
	if d := distinct(firsts...); len(d) != 2 {
		t.Errorf("pmask=%s: the first connections of %v went to %v; round robin gives different servers to different clients",
			f.hostMask, f.extra, firsts)
	}
	for round := 0; round < 10; round++ {
		for i, who := range append([]*lab.Client{c}, others...) {
			want := r.Server
			if i > 0 {
				want = firsts[i-1]
			}
			got, err := who.TCPRequest(vip, tcpTimeout)
			if err != nil {
				t.Errorf("pmask=%s: TCP from %s: %v", f.hostMask, srcOf(who, f), err)
			} else if got.Server != want {
				t.Errorf("pmask=%s: connection %d from %s went to %s; it sticks to %s", f.hostMask, round+1, srcOf(who, f), got.Server, want)
			}
		}
		if t.Failed() {
			break
		}
	}
	// The persistence table: one entry per masked client address, to its server.
	pt := ilbadmOK(t, l, "show-persist")
	for i, ip := range append([]string{f.client}, f.extra...) {
		want := r.Server
		if i > 0 {
			want = firsts[i-1]
		}
		line := "sticky: " + ip + " --> " + f.addrOf(l.ServerByName(want))
		if !containsLine(pt, line) {
			t.Errorf("show-persist lacks %q:\n%s", line, pt)
		}
	}

	// Subnet mask: every address of the client subnet on one server.
	r2 := first(t, c, "tcp", vip2, "persistent rule, subnet mask")
	for _, who := range append([]*lab.Client{c}, others...) {
		per := perServerOf(replies(t, who, "tcp", vip2, 10))
		if per[r2.Server] != 10 {
			t.Errorf("pmask=%s: connections from %s went to %s; the whole subnet sticks to %s", f.netMask, srcOf(who, f), sortedCounts(per), r2.Server)
		}
	}

	// UDP, host mask: every flow of the client on one server.
	ru := first(t, c, "udp", vip, "persistent UDP rule")
	per = perServerOf(replies(t, c, "udp", vip, 30))
	if per[ru.Server] != 30 {
		t.Errorf("pmask=%s: 30 UDP flows from %s went to %s; want all on %s", f.hostMask, f.client, sortedCounts(per), ru.Server)
	}
}

func srcOf(c *lab.Client, f family) string {
	if f.v6 {
		return c.IP6
	}
	return c.IP
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
