package main

import "github.com/ilbgo/ilb/api"

// Workers converts every worker's counters (dataplane.WorkerStats) to the per-worker view
// of api, for show-worker.
func (t tables) Workers() []api.WorkerStatistics {
	ws := t.dp.WorkerStats()
	out := make([]api.WorkerStatistics, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.WorkerStatistics{
			Worker: w.Worker, Lcore: w.Lcore, CPU: w.CPU,
			RxPackets: w.RxPackets, TxPackets: w.TxPackets,
			Conns: w.Conns, ConnCap: w.ConnCap,
			HandoffIn: w.HandoffIn, HandoffOut: w.HandoffOut,
			Polls: w.Polls, BusyPolls: w.Busy,
		})
	}
	return out
}
