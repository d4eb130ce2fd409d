package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestTwoWorkersLab: ilbd with two workers (--lcores=0@0,1@0,2@1: lcore 1 shares CPU 0 with
// the main lcore, as on a 2-CPU machine) carries TCP and UDP from several client addresses
// through half-NAT and full-NAT; show-worker shows both workers receiving and owning flows,
// with the hand-offs between them counted, and a long-lived connection keeps working
// throughout.
func TestTwoWorkersLab(t *testing.T) {
	l := newLab(t, lab.Options{Lcores: "0@0,1@0,2@1"})
	startIlbd(t, l)
	configureWeb(t, l)
	ilbadmAll(t, l, []string{"create-rule", "-e", "-i", "vip=203.0.113.10,port=8080,protocol=tcp",
		"-m", "lbalg=rr,type=NAT,proxy-src=192.0.2.100-192.0.2.101", "-o", "servergroup=websg", "fntcp"})
	vip, vipNAT := lab.Addr(lab.VIP, lab.ServicePort), lab.Addr(lab.VIP, lab.AltPort)

	held, err := l.Client().Dial(vip, tcpTimeout)
	if err != nil {
		t.Fatalf("long-lived connection: %v", err)
	}
	defer held.Close()
	clients := []*lab.Client{l.Client()}
	for i := 0; i < 7; i++ {
		c, err := l.AddClientAddress(fmt.Sprintf("198.51.100.%d", 20+i))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	const per = 40
	for round, c := range clients {
		for _, x := range []struct{ proto, addr string }{{"tcp", vip}, {"udp", vip}, {"tcp", vipNAT}} {
			rs, err := c.Replies(x.proto, x.addr, per, 2*time.Second)
			if err != nil || len(rs) != per {
				t.Errorf("client %s: %d/%d %s requests to %s answered: %v", c.IP, len(rs), per, x.proto, x.addr, err)
			}
		}
		if _, err := held.Exchange(tcpTimeout); err != nil {
			t.Fatalf("the long-lived connection broke after round %d: %v", round+1, err)
		}
	}
	out := ilbadmOK(t, l, "show-worker")
	t.Logf("ilbadm show-worker:\n%s", out)
	rows := strings.Split(strings.TrimSpace(ilbadmOK(t, l, "show-worker", "-p", "-o", "worker,rx_pkts,conns,handoff_in,handoff_out")), "\n")
	if len(rows) != 2 {
		t.Fatalf("show-worker lists %d workers, want 2", len(rows))
	}
	var handoffs [2]uint64
	for i, row := range rows {
		f := strings.Split(row, ":")
		rx, _ := strconv.ParseUint(f[1], 10, 64)
		in, _ := strconv.ParseUint(f[3], 10, 64)
		out, _ := strconv.ParseUint(f[4], 10, 64)
		if f[0] != strconv.Itoa(i) || rx == 0 {
			t.Errorf("worker %d: %q: want it to have received packets", i, row)
		}
		handoffs[0] += in
		handoffs[1] += out
	}
	if handoffs[0] == 0 || handoffs[0] > handoffs[1] {
		t.Errorf("hand-offs: %d in, %d out; want some, none lost in", handoffs[0], handoffs[1])
	}
	// Both workers own flows: their processed counts, summed by show-statistics, cover every
	// request, and neither worker's connection table was the only one used.
	tcp, udp := l.Counts()
	if sum(tcp) < 2*per*len(clients) || sum(udp) < per*len(clients) {
		t.Errorf("servers answered %d TCP and %d UDP requests", sum(tcp), sum(udp))
	}
}
