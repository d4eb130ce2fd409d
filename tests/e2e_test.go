package tests

import (
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

const (
	tcpTimeout = 5 * time.Second // covers a lost SYN (retransmitted after 1 s) and more
	udpTimeout = 2 * time.Second
)

// TestE2EHalfNAT is the foundation's acceptance test: ilbd on DPDK net_af_packet ports in
// the lb namespace, configured through ilbadm, balances real kernel TCP and UDP flows from
// the client to three kernel servers with round robin and half-NAT; disable-rule and
// enable-rule take effect; the configuration survives kill -9.
func TestE2EHalfNAT(t *testing.T) {
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	configureWeb(t, l)

	showRule := ilbadmOK(t, l, "show-rule")
	sameText(t, "ilbadm show-rule", showRule, golden(t, "show-rule.golden"))
	showSG := ilbadmOK(t, l, "show-servergroup")
	sameText(t, "ilbadm show-servergroup", showSG, golden(t, "show-servergroup.golden"))

	vip := lab.VIPAddr()

	// One flow first, so that a dead data path fails in seconds, with diagnostics.
	if r, err := l.TCPRequest(vip, tcpTimeout); err != nil {
		t.Fatalf("first TCP connection to the VIP %s: %v", vip, err)
	} else if r.PeerIP() != lab.ClientIP {
		t.Fatalf("server %s saw peer %s, want the client address %s (half-NAT)", r.Server, r.Peer, lab.ClientIP)
	}
	if r, err := l.UDPRequest(vip, udpTimeout); err != nil {
		t.Fatalf("first UDP request to the VIP %s: %v", vip, err)
	} else if r.PeerIP() != lab.ClientIP {
		t.Fatalf("server %s saw peer %s, want the client address %s (half-NAT)", r.Server, r.Peer, lab.ClientIP)
	}

	// 300 TCP connections + 300 UDP exchanges, each a new flow.
	tcp0, udp0 := l.Counts()
	start := time.Now()
	perTCP, err := l.TCPRequests(vip, 300, tcpTimeout)
	if err != nil {
		t.Errorf("TCP: %v", err)
	}
	tcpTime := time.Since(start)
	start = time.Now()
	perUDP, err := l.UDPRequests(vip, 300, udpTimeout)
	if err != nil {
		t.Errorf("UDP: %v", err)
	}
	t.Logf("300 TCP connections in %v, 300 UDP exchanges in %v; tcp %s; udp %s",
		tcpTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), sortedCounts(perTCP), sortedCounts(perUDP))
	balanced(t, "TCP (client view)", perTCP, 100, 1)
	balanced(t, "UDP (client view)", perUDP, 100, 1)
	tcp1, udp1 := l.Counts()
	if d := diffCounts(tcp0, tcp1); sortedCounts(d) != sortedCounts(perTCP) {
		t.Errorf("servers answered TCP %v, client received %v", sortedCounts(d), sortedCounts(perTCP))
	}
	if d := diffCounts(udp0, udp1); sortedCounts(d) != sortedCounts(perUDP) {
		t.Errorf("servers answered UDP %v, client received %v", sortedCounts(d), sortedCounts(perUDP))
	}
	onlyClientPeers(t, l)
	if t.Failed() {
		t.FailNow()
	}

	// disable-rule: new TCP flows to the VIP are no longer balanced.
	ilbadmOK(t, l, "disable-rule", "webtcp")
	before, _ := l.Counts()
	if r, err := l.TCPRequest(vip, 1500*time.Millisecond); err == nil {
		t.Errorf("TCP connection to %s answered by %s while webtcp is disabled", vip, r.Server)
	}
	time.Sleep(200 * time.Millisecond)
	if after, _ := l.Counts(); sortedCounts(after) != sortedCounts(before) {
		t.Errorf("a server answered TCP while webtcp was disabled: before %v after %v", sortedCounts(before), sortedCounts(after))
	}
	// enable-rule: balanced again.
	ilbadmOK(t, l, "enable-rule", "webtcp")
	per, err := l.TCPRequests(vip, 30, tcpTimeout)
	if err != nil {
		t.Errorf("TCP after enable-rule: %v", err)
	}
	balanced(t, "TCP after enable-rule", per, 10, 1)
	if t.Failed() {
		t.FailNow()
	}

	// Durability: kill -9, restart with the same settings; same configuration, traffic flows.
	showRule = ilbadmOK(t, l, "show-rule")
	showSG = ilbadmOK(t, l, "show-servergroup")
	d := l.Ilbd()
	if err := d.Kill9(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	sameText(t, "show-rule after kill -9 and restart", ilbadmOK(t, l, "show-rule"), showRule)
	sameText(t, "show-servergroup after kill -9 and restart", ilbadmOK(t, l, "show-servergroup"), showSG)
	per, err = l.TCPRequests(vip, 30, tcpTimeout)
	if err != nil {
		t.Errorf("TCP after restart: %v", err)
	}
	balanced(t, "TCP after restart", per, 10, 1)
	per, err = l.UDPRequests(vip, 30, udpTimeout)
	if err != nil {
		t.Errorf("UDP after restart: %v", err)
	}
	balanced(t, "UDP after restart", per, 10, 1)
	onlyClientPeers(t, l)
}
