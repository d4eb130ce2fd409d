package main

import (
	"net/netip"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/datapath"
	"github.com/ilbgo/ilb/dataplane"
)

// dumpTimeout bounds how long a show-nat or show-persist request waits for the workers. Each
// walks its tables a slice per burst (datapath.RequestNATDump): a full table of 262 144
// entries takes a few hundred bursts, well under a second even when the worker naps between
// idle polls.
const dumpTimeout = 5 * time.Second

// tables gives the control service the data plane's counters and tables. Counters are
// published by the worker once per burst and copied here without a lock on the packet path.
type tables struct {
	dp *dataplane.Dataplane
}

// Statistics converts the engine's counters to the kstat-like sample of api.
func (t tables) Statistics() api.Statistics {
	s := t.dp.Stats()
	st := api.Statistics{FragIn: s.Global.FragIn, FragDropped: s.Global.FragDropped, Counters: counterMap(&s.Global)}
	for i, p := range s.Ports {
		ps := api.PortStatistics{ChecksumSampled: p.ChecksumSampled, ChecksumBad: p.ChecksumBad, VLANDropped: p.VLANDropped}
		if names := t.dp.PortNames(); i < len(names) {
			ps.Name = names[i]
		}
		st.Ports = append(st.Ports, ps)
	}
	for _, r := range s.Rules {
		if !r.Draining {
			st.NumRules++
		}
		rs := api.RuleStatistics{
			Name: r.Name, Instance: r.ID, Draining: r.Draining,
			PktNotProcessed: r.PktNotProcessed, BytesNotProcessed: r.BytesNotProcessed,
			PktDropped: r.PktDropped, BytesDropped: r.BytesDropped,
			NoMemPktDropped: r.NoMemPktDropped, NoMemBytesDropped: r.NoMemBytesDropped,
			NoPortPktDropped: r.NoPortPktDropped, NoPortBytesDropped: r.NoPortBytesDropped,
			ICMPEchoProcessed: r.ICMPEchoProcessed, ICMPDropped: r.ICMPDropped,
			ICMPTooBigProcessed: r.ICMPTooBigProcessed, ICMPTooBigDropped: r.ICMPTooBigDropped,
		}
		for _, sv := range r.Servers {
			rs.Servers = append(rs.Servers, api.ServerStatistics{
				ID: sv.ID, Addr: sv.Addr, PktProcessed: sv.PktProcessed, BytesProcessed: sv.BytesProcessed,
			})
		}
		st.Rules = append(st.Rules, rs)
	}
	return st
}

// counterMap lists every global counter of the engine under the snake_case form of its field
// name, so a new counter reaches the control socket without being copied by hand.
func counterMap(g *datapath.GlobalCounters) map[string]uint64 {
	v := reflect.ValueOf(g).Elem()
	m := make(map[string]uint64, v.NumField())
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Uint64 {
			m[snakeCase(v.Type().Field(i).Name)] = f.Uint()
		}
	}
	return m
}

// snakeCase turns a Go field name into snake_case: "TCPNoConn" → "tcp_no_conn",
// "ICMPEchoReplies" → "icmp_echo_replies", "BadIPv4Checksum" → "bad_ipv4_checksum".
func snakeCase(name string) string {
	r := []rune(ipVersionWords.Replace(name))
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// ipVersionWords makes "IPv4" and "IPv6" one word each for snakeCase.
var ipVersionWords = strings.NewReplacer("IPv4", "Ipv4", "IPv6", "Ipv6")

// NAT asks the workers for their connection entries.
func (t tables) NAT(max int) ([]api.NATEntry, error) {
	return dumpNAT(t.dp.Engines(), max, dumpTimeout)
}

// Persist asks the workers for their persistence entries.
func (t tables) Persist(max int) ([]api.PersistEntry, error) {
	return dumpPersist(t.dp.Engines(), max, dumpTimeout, t.logf)
}

// logf logs through the data plane's logger, if it has one.
func (t tables) logf(format string, args ...any) {
	t.dp.Logf(format, args...)
}

// dumpNAT lists the connection entries of every worker: each is asked for max entries, all
// walk their tables at once, and the answers are concatenated in worker order, each worker's
// in its own order, cut at max (max ≤ 0: all). A flow lives on one worker only, so nothing is
// merged. It fails with StatusInProgress when a worker is still busy with an earlier listing,
// and with StatusInternal when the workers have not all answered within timeout.
func dumpNAT(engines []*datapath.Engine, max int, timeout time.Duration) ([]api.NATEntry, error) {
	answers, err := collect(engines, timeout,
		func(e *datapath.Engine) (<-chan []datapath.NATEntry, bool) { return e.RequestNATDump(max) },
		(*datapath.Engine).CancelNATDump)
	if err != nil {
		return nil, err
	}
	out := make([]api.NATEntry, 0, total(answers, max))
	for _, entries := range answers {
		for _, e := range entries {
			if max > 0 && len(out) == max {
				return out, nil
			}
			out = append(out, api.NATEntry{Proto: e.Proto, Client: e.Client, VIP: e.VIP, NATSrc: e.NATSrc, Server: e.Server})
		}
	}
	return out, nil
}

// dumpPersist lists the persistence entries of every worker, in worker order. A client prefix
// may have a mapping on several workers (its flows are spread by client address, not by
// prefix); it is listed once, as Solaris' single table lists it. The workers choose a prefix's
// server alike, so two mappings of one rule and prefix to different servers are a bug: it is
// logged and the first worker's mapping is kept.
func dumpPersist(engines []*datapath.Engine, max int, timeout time.Duration, logf func(string, ...any)) ([]api.PersistEntry, error) {
	answers, err := collect(engines, timeout,
		func(e *datapath.Engine) (<-chan []datapath.PersistEntry, bool) { return e.RequestPersistDump(max) },
		(*datapath.Engine).CancelPersistDump)
	if err != nil {
		return nil, err
	}
	type key struct {
		rule   uint64
		client netip.Addr
	}
	first := make(map[key]netip.Addr)
	out := make([]api.PersistEntry, 0, total(answers, max))
	for w, entries := range answers {
		for _, e := range entries {
			k := key{e.RuleID, e.Client}
			if s, ok := first[k]; ok {
				if s != e.Server {
					logf("show-persist: rule %s prefix %v maps to %v on one worker and to %v on worker %d; listing %v",
						e.Rule, e.Client, s, e.Server, w, s)
				}
				continue
			}
			if max > 0 && len(out) == max {
				return out, nil
			}
			first[k] = e.Server
			out = append(out, api.PersistEntry{Rule: e.Rule, Client: e.Client, Server: e.Server})
		}
	}
	return out, nil
}

// collect requests a dump from every engine and waits, up to timeout in all, for every
// answer, which it returns in engine order. When an engine refuses (an earlier listing is still
// being walked) or the wait times out, the dumps already requested are cancelled, so that the
// workers stop walking for nobody and the next listing is not refused because of this one.
func collect[T any](engines []*datapath.Engine, timeout time.Duration,
	request func(*datapath.Engine) (<-chan []T, bool), cancel func(*datapath.Engine, <-chan []T)) ([][]T, error) {
	chans := make([]<-chan []T, len(engines))
	cancelAll := func() {
		for i, ch := range chans {
			if ch != nil {
				cancel(engines[i], ch)
			}
		}
	}
	for i, e := range engines {
		ch, ok := request(e)
		if !ok {
			cancelAll()
			return nil, compat.StatusInProgress
		}
		chans[i] = ch
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	answers := make([][]T, len(engines))
	for i, ch := range chans {
		select {
		case answers[i] = <-ch:
			chans[i] = nil // answered: nothing left to cancel
		case <-timer.C:
			cancelAll()
			return nil, compat.StatusInternal
		}
	}
	return answers, nil
}

// total is how many entries the answers hold, at most max (max ≤ 0: no limit).
func total[T any](answers [][]T, max int) int {
	n := 0
	for _, a := range answers {
		n += len(a)
	}
	if max > 0 && n > max {
		n = max
	}
	return n
}
