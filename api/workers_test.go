package api

import (
	"encoding/json"
	"testing"

	"github.com/ilbgo/ilb/compat"
)

// workerTables is a data plane with one worker.
type workerTables struct{}

func (workerTables) Statistics() Statistics              { return Statistics{} }
func (workerTables) NAT(int) ([]NATEntry, error)         { return nil, nil }
func (workerTables) Persist(int) ([]PersistEntry, error) { return nil, nil }
func (workerTables) Workers() []WorkerStatistics {
	return []WorkerStatistics{{Worker: 0, Lcore: 1, CPU: 0, RxPackets: 2, TxPackets: 3, Conns: 4,
		ConnCap: 5, HandoffIn: 6, HandoffOut: 7, Polls: 8, BusyPolls: 9}}
}

// show-worker is a read: anyone may ask, and without a data plane the list is empty.
func TestShowWorkerOp(t *testing.T) {
	if OpShowWorker.Mutates() {
		t.Fatal("show-worker must not need authorization")
	}
	svc := newService(t, "")
	nobody := Peer{UID: 65534, GID: 65534}
	if r := svc.Handle(nobody, &Request{Op: OpShowWorker}); r.Status != compat.StatusOK || len(r.Workers) != 0 {
		t.Fatalf("without a data plane: %+v", r)
	}
	svc.Tables = workerTables{}
	r := svc.Handle(nobody, &Request{Op: OpShowWorker})
	if r.Status != compat.StatusOK || len(r.Workers) != 1 {
		t.Fatalf("with a data plane: %+v", r)
	}
	b, err := json.Marshal(r.Workers[0])
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"worker":0,"lcore":1,"cpu":0,"rx_packets":2,"tx_packets":3,"conns":4,"conn_cap":5,` +
		`"handoff_in":6,"handoff_out":7,"polls":8,"busy_polls":9}`
	if string(b) != want {
		t.Errorf("json:\n got %s\nwant %s", b, want)
	}
}
