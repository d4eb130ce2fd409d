package main

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
)

// workerFields is show-worker's template, every field shown by default. The widths follow
// the other tables: the name plus a blank for the small numbers, room for 11-digit packet
// counters and 8-digit table sizes.
var workerFields = []compat.Field{
	{Name: "WORKER", Width: 7}, {Name: "LCORE", Width: 6}, {Name: "CPU", Width: 4},
	{Name: "RX_PKTS", Width: 12}, {Name: "TX_PKTS", Width: 12},
	{Name: "CONNS", Width: 9}, {Name: "CONN_CAP", Width: 9},
	{Name: "HANDOFF_IN", Width: 11}, {Name: "HANDOFF_OUT", Width: 12}, {Name: "BUSY", Width: 5},
}

// showWorker: ilbadm show-worker [[-p] -o field[,...]] — an extension beyond Solaris (whose
// kernel had no data-plane workers) with the conventions of the other show commands: one
// row per worker in worker order, -p requires an explicit -o list, and a bad -o list is
// reported by ofmt_open. The table is opened before ilbd is asked, as show-statistics
// does, so a bad list is reported even when there is no worker to print.
func showWorker(e *env, args []string) error {
	fields, flags, rest, err := parseShowOpts(e, args, "option -p requires explicit field names for -o")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return e.fail(compat.AdmEINVAL)
	}
	out, cerr := compat.NewOfmt(e.stdout, workerFields, fields, "", flags, e.termRows())
	if cerr != nil {
		return e.fail(cerr)
	}
	c, err := e.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ws, err := c.Workers()
	if err != nil {
		return e.fail(err)
	}
	for i := range ws {
		out.Row(func(f string) (string, bool) { return workerValue(&ws[i], f) })
	}
	return nil
}

// workerValue is one field of a worker's row; an unknown CPU prints "?".
func workerValue(w *api.WorkerStatistics, field string) (string, bool) {
	u := func(v uint64) (string, bool) { return strconv.FormatUint(v, 10), true }
	switch strings.ToUpper(field) {
	case "WORKER":
		return strconv.Itoa(w.Worker), true
	case "LCORE":
		return u(uint64(w.Lcore))
	case "CPU":
		if w.CPU < 0 {
			return "", false
		}
		return strconv.Itoa(w.CPU), true
	case "RX_PKTS":
		return u(w.RxPackets)
	case "TX_PKTS":
		return u(w.TxPackets)
	case "CONNS":
		return u(w.Conns)
	case "CONN_CAP":
		return u(w.ConnCap)
	case "HANDOFF_IN":
		return u(w.HandoffIn)
	case "HANDOFF_OUT":
		return u(w.HandoffOut)
	case "BUSY":
		return u(busyPercent(w.BusyPolls, w.Polls))
	}
	return "", false
}

// busyPercent is the share of polls that found work, in whole percent (rounded down, so
// 100 means every poll), 0 without polls. The counters are read one after the other while
// the worker runs, so busy may exceed polls by a little: that is 100.
func busyPercent(busy, polls uint64) uint64 {
	if polls == 0 {
		return 0
	}
	if busy >= polls {
		return 100
	}
	hi, lo := bits.Mul64(busy, 100)
	q, _ := bits.Div64(hi, lo, polls) // hi < polls since busy < polls
	return q
}
