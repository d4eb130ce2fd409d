package tests

import (
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// holdConn opens a long-lived TCP connection to addr whose first exchange is answered by
// a server other than those in avoid, trying a few connections (round robin moves on).
func holdConn(t *testing.T, c *lab.Client, addr string, avoid ...string) (*lab.Conn, lab.Reply) {
	t.Helper()
	for try := 0; try < 6; try++ {
		conn, err := c.Dial(addr, tcpTimeout)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		r, err := conn.Exchange(tcpTimeout)
		if err != nil {
			conn.Close()
			t.Fatalf("first exchange on a new connection to %s: %v", addr, err)
		}
		ok := true
		for _, a := range avoid {
			ok = ok && r.Server != a
		}
		if ok {
			t.Cleanup(func() { conn.Close() })
			return conn, r
		}
		conn.Close()
	}
	t.Fatalf("6 connections to %s all reached %v", addr, avoid)
	return nil, lab.Reply{}
}

// TestE2EDisableServer: disable-server without conn-drain (spec §6.9): the disabled server
// gets no new connections or flows, while an established TCP connection to it keeps
// working for as long as it is used (here over 4 s: longer than the drain period of
// TestE2EConnDrain); enable-server brings it back into the rotation.
func TestE2EDisableServer(t *testing.T) {
	f := ipv4
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webtcp"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webudp"},
	)
	c := l.Client()
	vip := lab.VIPAddr()
	conn, r := holdConn(t, c, vip)
	x := r.Server
	id := serverID(t, l, "websg", serverOf(t, l, r.LocalIP()).IP)
	ilbadmAll(t, l, []string{"disable-server", id})
	start := time.Now()
	t.Logf("long-lived connection %s on %s (%s); disabled it", conn.LocalAddr(), x, id)

	// New connections and flows avoid it; the rest are shared by the two others.
	var others []string
	for _, s := range l.Servers {
		if s.Name != x {
			others = append(others, s.Name)
		}
	}
	onlyServers(t, "TCP while "+x+" is disabled", perServerOf(replies(t, c, "tcp", vip, 30)), 15, 1, others...)
	onlyServers(t, "UDP while "+x+" is disabled", perServerOf(replies(t, c, "udp", vip, 30)), 15, 1, others...)

	// The established connection keeps working, on the same server.
	for i := 0; time.Since(start) < 4*time.Second && i < 100; i++ {
		r, err := conn.Exchange(2 * time.Second)
		if err != nil {
			t.Fatalf("established connection to the disabled %s, %v after disable-server: %v", x, time.Since(start).Round(time.Millisecond), err)
		}
		if r.Server != x {
			t.Fatalf("established connection moved from %s to %s", x, r.Server)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// enable-server: back in the rotation.
	ilbadmAll(t, l, []string{"enable-server", id})
	balanced(t, "TCP after enable-server", perServerOf(replies(t, c, "tcp", vip, 30)), 10, 1)
	if _, err := conn.Exchange(2 * time.Second); err != nil {
		t.Errorf("established connection after enable-server: %v", err)
	}
}

// TestE2EConnDrain: disable-server with -t conn-drain=2 (spec §6.9): the established
// connection to the disabled server still works at first, and once the 2 s deadline has
// passed (plus the time ilbd takes to sweep) ilbd deletes its connections: the next
// exchange on it fails (reset by the server a new packet now reaches, or unanswered).
// A connection to another server is not touched.
func TestE2EConnDrain(t *testing.T) {
	f := ipv4
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT",
			"-t", "conn-drain=2", "-o", "servergroup=websg", "webtcp"},
	)
	c := l.Client()
	vip := lab.VIPAddr()
	conn, r := holdConn(t, c, vip)
	x := r.Server
	other, ro := holdConn(t, c, vip, x)
	id := serverID(t, l, "websg", serverOf(t, l, r.LocalIP()).IP)
	ilbadmAll(t, l, []string{"disable-server", id})
	start := time.Now()
	t.Logf("connection %s on %s, connection %s on %s; disabled %s (%s) with conn-drain=2",
		conn.LocalAddr(), x, other.LocalAddr(), ro.Server, x, id)

	// Exchanges that begin before 1.5 s must be answered (the deadline is 2 s after ilbd
	// took the command, which was at most a few milliseconds before start); after the
	// deadline and the sweep, an exchange fails.
	const bound = 25 * time.Second // 2 s + the sweep; Solaris' GC may take 15 s more
	var cut time.Duration
	for i := 0; time.Since(start) < bound; i++ {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		began := time.Since(start)
		rr, err := conn.Exchange(time.Second)
		if err == nil && rr.Server == x {
			continue
		}
		if began < 1500*time.Millisecond {
			t.Fatalf("the connection to %s failed in an exchange begun %v after disable-server, before the 2 s drain deadline: %+v %v",
				x, began.Round(time.Millisecond), rr, err)
		}
		cut = began
		t.Logf("connection to the drained %s cut: the exchange begun %v after disable-server failed: %+v %v", x, began.Round(time.Millisecond), rr, err)
		break
	}
	if cut == 0 {
		t.Fatalf("the connection to the disabled %s still worked %v after disable-server with conn-drain=2", x, bound)
	}
	if r, err := other.Exchange(2 * time.Second); err != nil || r.Server != ro.Server {
		t.Errorf("the connection to %s (not disabled) after %s was drained: %+v %v", ro.Server, x, r, err)
	}
	// New connections still avoid the disabled server.
	per := perServerOf(replies(t, c, "tcp", vip, 20))
	if per[x] != 0 {
		t.Errorf("new connections reached the disabled %s: %s", x, sortedCounts(per))
	}
}
