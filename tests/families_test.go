package tests

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// family gathers what the end-to-end tests of DSR, full-NAT, persistence and draining
// need per address family, so that one test body runs over IPv4 and IPv6.
type family struct {
	name        string
	v6          bool
	vip, vip2   string   // the lab's VIP and a second one on the same VIP network
	client      string   // the client's address
	extra       []string // secondary client addresses (same subnet as client)
	servers     []string // the servers' addresses, srv1..srv3
	localClient string   // the client on the servers' subnet
	proxy       []string // full-NAT source addresses
	proxyRange  string   // ... as proxy-src= takes them
	hostMask    string   // pmask of one address
	netMask     string   // pmask of the client subnet
}

var (
	ipv4 = family{
		name: "IPv4", vip: lab.VIP, vip2: "203.0.113.11", client: lab.ClientIP,
		extra: []string{"198.51.100.3", "198.51.100.4"}, servers: lab.ServerIPs,
		localClient: lab.LocalClientIP, proxy: []string{"192.0.2.100", "192.0.2.101"},
		proxyRange: "192.0.2.100-192.0.2.101", hostMask: "/32", netMask: "/24",
	}
	ipv6 = family{
		name: "IPv6", v6: true, vip: lab.VIP6, vip2: "2001:db8:3::11", client: lab.ClientIP6,
		extra: []string{"2001:db8:1::3", "2001:db8:1::4"}, servers: lab.ServerIP6s,
		localClient: lab.LocalClientIP6, proxy: []string{"2001:db8:2::100", "2001:db8:2::101"},
		proxyRange: "2001:db8:2::100-2001:db8:2::101", hostMask: "/128", netMask: "/64",
	}
)

// lit is an address as ilbadm's server= and vip= take it (IPv6 in brackets).
func lit(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}
	return ip
}

// incoming is create-rule's -i argument.
func incoming(vip string, port int, proto string) string {
	return fmt.Sprintf("vip=%s,port=%d,protocol=%s", lit(vip), port, proto)
}

// serverList is create-servergroup's -s argument for the given addresses (":port" appended
// to each when port > 0).
func serverList(ips []string, port int) string {
	var b []string
	for _, ip := range ips {
		s := lit(ip)
		if port > 0 {
			s += fmt.Sprintf(":%d", port)
		}
		b = append(b, s)
	}
	return "server=" + strings.Join(b, ",")
}

// ilbadmAll runs configuration commands, each of which must succeed silently.
func ilbadmAll(t *testing.T, l *lab.Lab, cmds ...[]string) {
	t.Helper()
	for _, args := range cmds {
		if out := ilbadmOK(t, l, args...); out != "" {
			t.Fatalf("ilbadm %s printed %q; configuration commands print nothing", strings.Join(args, " "), out)
		}
	}
}

// createGroup creates group sg with the three servers of the family.
func createGroup(t *testing.T, l *lab.Lab, f family, sg string) {
	t.Helper()
	ilbadmAll(t, l, []string{"create-servergroup", "-s", serverList(f.servers, 0), sg})
}

// serverID finds the server ID (e.g. "_websg.1") of ip in group sg with show-servergroup.
func serverID(t *testing.T, l *lab.Lab, sg, ip string) string {
	t.Helper()
	out := ilbadmOK(t, l, "show-servergroup", sg)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == sg && f[len(f)-1] == ip {
			return f[1]
		}
	}
	t.Fatalf("no server %s in group %s:\n%s", ip, sg, out)
	return ""
}

// serverOf returns the lab server whose address (either family) is ip.
func serverOf(t *testing.T, l *lab.Lab, ip string) *lab.Server {
	t.Helper()
	for _, s := range l.Servers {
		if s.IP == ip || s.IP6 == ip {
			return s
		}
	}
	t.Fatalf("no server with address %s", ip)
	return nil
}

// addrOf returns the address of server s in family f.
func (f family) addrOf(s *lab.Server) string {
	if f.v6 {
		return s.IP6
	}
	return s.IP
}

// first makes one request and fails the test at once if it is not answered: a dead data
// path fails in seconds, with the ilbd log.
func first(t *testing.T, c *lab.Client, proto, addr, what string) lab.Reply {
	t.Helper()
	var r lab.Reply
	var err error
	if proto == "tcp" {
		r, err = c.TCPRequest(addr, tcpTimeout)
	} else {
		r, err = c.UDPRequest(addr, udpTimeout)
	}
	if err != nil {
		t.Fatalf("%s: first %s request from %s to %s: %v", what, strings.ToUpper(proto), c.NS, addr, err)
	}
	return r
}

// replies makes n requests and fails (not fatally) on any failure.
func replies(t *testing.T, c *lab.Client, proto, addr string, n int) []lab.Reply {
	t.Helper()
	timeout := tcpTimeout
	if proto == "udp" {
		timeout = udpTimeout
	}
	start := time.Now()
	rs, err := c.Replies(proto, addr, n, timeout)
	if err != nil {
		t.Errorf("%v", err)
	}
	t.Logf("%d %s requests to %s from %s in %v: %s", n, strings.ToUpper(proto), addr, c.IP+" "+c.IP6,
		time.Since(start).Round(time.Millisecond), sortedCounts(perServerOf(rs)))
	return rs
}

func perServerOf(rs []lab.Reply) map[string]int {
	per := map[string]int{}
	for _, r := range rs {
		per[r.Server]++
	}
	return per
}

// checkReplies fails unless every reply's peer address is in peers and its local address
// (the address the server received the request on) satisfies local.
func checkReplies(t *testing.T, what string, rs []lab.Reply, peers []string, local func(lab.Reply) bool, localWant string) {
	t.Helper()
	ok := map[string]bool{}
	for _, p := range peers {
		ok[p] = true
	}
	bad := 0
	for _, r := range rs {
		if !ok[r.PeerIP()] || !local(r) {
			if bad < 3 {
				t.Errorf("%s: %s saw peer %s on %s; want peer in %v, local %s", what, r.Server, r.Peer, r.Local, peers, localWant)
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d replies in all were wrong", what, bad)
	}
}

// localIs is a local-address check: the request reached the server addressed to ip.
func localIs(ip string) func(lab.Reply) bool {
	return func(r lab.Reply) bool { return r.LocalIP() == ip }
}

// localIsServer: the request reached the server at its own address (NAT of the VIP).
func localIsServer(l *lab.Lab, f family) func(lab.Reply) bool {
	return func(r lab.Reply) bool {
		s := l.ServerByName(r.Server)
		return s != nil && r.LocalIP() == f.addrOf(s)
	}
}

// atLeast fails unless each of the lab's servers (or of names, if given) answered at least
// min of the replies in per.
func atLeast(t *testing.T, what string, per map[string]int, min int, names ...string) {
	t.Helper()
	if len(names) == 0 {
		for _, s := range []string{"srv1", "srv2", "srv3"} {
			names = append(names, s)
		}
	}
	for _, n := range names {
		if per[n] < min {
			t.Errorf("%s: %s answered %d, want at least %d (all: %s)", what, n, per[n], min, sortedCounts(per))
		}
	}
}

// onlyServers fails unless per has answers from exactly the servers in names, each want±tol.
func onlyServers(t *testing.T, what string, per map[string]int, want, tol int, names ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
		if per[n] < want-tol || per[n] > want+tol {
			t.Errorf("%s: %s answered %d, want %d±%d (all: %s)", what, n, per[n], want, tol, sortedCounts(per))
		}
	}
	for n, c := range per {
		if !allowed[n] && c > 0 {
			t.Errorf("%s: %s answered %d; want only %v (all: %s)", what, n, c, names, sortedCounts(per))
		}
	}
}

// distinct returns the sorted distinct values.
func distinct(vals ...string) []string {
	m := map[string]bool{}
	for _, v := range vals {
		m[v] = true
	}
	var out []string
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
