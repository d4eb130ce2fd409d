package tests

import (
	"fmt"
	"testing"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestE2EHashAlgorithms checks the hash algorithms with half-NAT (spec §6.6) from seven
// client addresses (198.51.100.2-8):
//
//   - hash-ip: every connection from one address reaches the same server, addresses are
//     spread over several servers; disable-server remaps only the clients of the disabled
//     server (to enabled servers, still consistently), enable-server restores the mapping;
//   - hash-ip-vip: the server depends on the (client, VIP) pair only: consistent per pair
//     over two VIPs;
//   - hash-ip-port: the connections of one client address spread over all servers.
func TestE2EHashAlgorithms(t *testing.T) {
	f := ipv4
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	createGroup(t, l, f, "websg")
	vip3 := "203.0.113.12"
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", "lbalg=hash-ip,type=HALF-NAT", "-o", "servergroup=websg", "hip"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip2, lab.ServicePort, "tcp"), "-m", "lbalg=hash-ip-vip,type=HALF-NAT", "-o", "servergroup=websg", "hipv2"},
		[]string{"create-rule", "-e", "-i", incoming(vip3, lab.ServicePort, "tcp"), "-m", "lbalg=hash-ip-vip,type=HALF-NAT", "-o", "servergroup=websg", "hipv3"},
		[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.AltPort, "tcp"), "-m", "lbalg=hash-ip-port,type=HALF-NAT", "-o", "servergroup=websg", "hipp"},
	)
	clients := []*lab.Client{l.Client()}
	for i := 3; i <= 8; i++ {
		c, err := l.AddClientAddress(fmt.Sprintf("198.51.100.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	first(t, clients[0], "tcp", lab.VIPAddr(), "hash-ip")

	// mapping returns, per client address, the one server its connections to addr reach
	// (failing if they reach several).
	mapping := func(what, addr string) map[string]string {
		t.Helper()
		m := map[string]string{}
		for _, c := range clients {
			per := perServerOf(replies(t, c, "tcp", addr, 5))
			if len(per) != 1 {
				t.Errorf("%s: connections from %s to %s reached %s; want one server", what, c.IP, addr, sortedCounts(per))
			}
			for s := range per {
				m[c.IP] = s
			}
		}
		return m
	}

	base := mapping("hash-ip", lab.VIPAddr())
	var servers []string
	for _, s := range base {
		servers = append(servers, s)
	}
	if d := distinct(servers...); len(d) < 2 {
		t.Errorf("hash-ip: all 7 client addresses hash to %v", d)
	}
	t.Logf("hash-ip mapping: %v", base)
	if t.Failed() {
		t.FailNow()
	}

	// Disable the server of the first client: only its clients move.
	x := base[lab.ClientIP]
	id := serverID(t, l, "websg", l.ServerByName(x).IP)
	ilbadmAll(t, l, []string{"disable-server", id})
	moved := mapping("hash-ip with "+x+" disabled", lab.VIPAddr())
	for ip, s := range base {
		switch {
		case s == x && moved[ip] == x:
			t.Errorf("hash-ip: %s still reaches the disabled %s", ip, x)
		case s != x && moved[ip] != s:
			t.Errorf("hash-ip: %s moved from %s to %s although only %s was disabled", ip, s, moved[ip], x)
		}
	}
	ilbadmAll(t, l, []string{"enable-server", id})
	again := mapping("hash-ip after enable-server", lab.VIPAddr())
	for ip, s := range base {
		if again[ip] != s {
			t.Errorf("hash-ip: after enable-server %s reaches %s, before disable-server %s", ip, again[ip], s)
		}
	}

	// hash-ip-vip: consistent per (client, VIP) pair.
	m2 := mapping("hash-ip-vip", lab.Addr(f.vip2, lab.ServicePort))
	m3 := mapping("hash-ip-vip", lab.Addr(vip3, lab.ServicePort))
	t.Logf("hash-ip-vip mapping: %s: %v; %s: %v", f.vip2, m2, vip3, m3)

	// hash-ip-port: one address, many source ports, all servers.
	per := perServerOf(replies(t, clients[0], "tcp", lab.Addr(f.vip, lab.AltPort), 60))
	atLeast(t, "hash-ip-port", per, 5)
}
