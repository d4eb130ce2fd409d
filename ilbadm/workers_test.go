package main

import (
	"testing"
)

// show-worker's table: every field by default, -o lists in any case, -p with an explicit
// list, and the other show commands' errors.
func TestShowWorker(t *testing.T) {
	sock := tablesDaemon(t, &fakeTables{})
	runSteps(t, sock, []step{
		{line: "show-worker", stdout: "" +
			"WORKER LCORE CPU RX_PKTS     TX_PKTS     CONNS    CONN_CAP HANDOFF_IN HANDOFF_OUT BUSY\n" +
			"0      1     0   12345678901 12345678000 1234     262144   17         4242        66\n" +
			"1      2     ?   0           0           0        262144   0          0           0\n"},
		{line: "show-worker -o worker,rx_pkts,busy", stdout: "" +
			"WORKER RX_PKTS     BUSY\n" +
			"0      12345678901 66\n" +
			"1      0           0\n"},
		{line: "SHOW-WORKER -o all", stdout: "" +
			"WORKER LCORE CPU RX_PKTS     TX_PKTS     CONNS    CONN_CAP HANDOFF_IN HANDOFF_OUT BUSY\n" +
			"0      1     0   12345678901 12345678000 1234     262144   17         4242        66\n" +
			"1      2     ?   0           0           0        262144   0          0           0\n"},
		{line: "show-worker -p -o worker,lcore,cpu,rx_pkts,tx_pkts,conns,conn_cap,handoff_in,handoff_out,busy", stdout: "" +
			"0:1:0:12345678901:12345678000:1234:262144:17:4242:66\n" +
			"1:2:?:0:0:0:262144:0:0:0\n"},
		{line: "show-worker -p -o BUSY", stdout: "66\n0\n"},
		// As show-servergroup, show-server and show-rule: -p needs explicit field names.
		{line: "show-worker -p -o all", stderr: "ilbadm: option -p requires explicit field names for -o\n", status: 1},
		{line: "show-worker -p", stderr: "ilbadm: option -p requires -o\n", status: 1},
		{line: "show-worker -o", stderr: "ilbadm: missing option argument for o\n", status: 1},
		{line: "show-worker -o worker,foo", stderr: "ilbadm: ofmt_open failed: ignoring unknown output field: `foo'\n", status: 1},
		{line: "show-worker -o foo", stderr: "ilbadm: ofmt_open failed: no valid output fields\n", status: 1},
		{line: "show-worker -p -o worker,foo,bar", stderr: "ilbadm: ofmt_open failed: unknown output fields: `foo' `bar'\n", status: 1},
		{line: "show-worker -x", stderr: "ilbadm: bad or misplaced option -x\n", status: 1},
		{line: "show-worker 1", stderr: "ilbadm: invalid value  - refer to ilbadm(1M)\n", status: 1},
	})
	// Without a data plane there are no workers; ofmt prints its header only before the
	// first row, so nothing is printed (as show-nat and show-healthcheck print nothing
	// when empty). A bad list is still reported.
	runSteps(t, tablesDaemon(t, nil), []step{
		{line: "show-worker"},
		{line: "show-worker -p -o worker"},
		{line: "show-worker -o foo", stderr: "ilbadm: ofmt_open failed: no valid output fields\n", status: 1},
	})
}

func TestBusyPercent(t *testing.T) {
	for _, c := range []struct{ busy, polls, want uint64 }{
		{0, 0, 0}, {5, 0, 0}, {0, 10, 0}, {1, 3, 33}, {2, 3, 66}, {999, 1000, 99}, {10, 10, 100},
		{11, 10, 100}, {1 << 62, 1 << 63, 50}, {^uint64(0) - 1, ^uint64(0), 99},
	} {
		if got := busyPercent(c.busy, c.polls); got != c.want {
			t.Errorf("busyPercent(%d, %d) = %d, want %d", c.busy, c.polls, got, c.want)
		}
	}
}
