package main

import (
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/datapath"
)

// dumpTimeout bounds how long a show-nat or show-persist request waits for the worker,
// which answers at the end of its current burst (microseconds when it runs at all).
const dumpTimeout = 5 * time.Second

// tables gives the control service the data plane's counters and tables. Counters are
// published by the worker once per burst and copied here without a lock on the packet path.
type tables struct {
	dp *dataplane
}

// Statistics converts the engine's counters to the kstat-like sample of api.
func (t tables) Statistics() api.Statistics {
	s := t.dp.engine.Stats()
	st := api.Statistics{FragIn: s.Global.FragIn, FragDropped: s.Global.FragDropped, Counters: counterMap(&s.Global)}
	for i, p := range s.Ports {
		ps := api.PortStatistics{ChecksumSampled: p.ChecksumSampled, ChecksumBad: p.ChecksumBad, VLANDropped: p.VLANDropped}
		if i < len(t.dp.names) {
			ps.Name = t.dp.names[i]
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

// NAT asks the worker for its connection entries.
func (t tables) NAT(max int) ([]api.NATEntry, error) {
	ch, ok := t.dp.engine.RequestNATDump(max)
	if !ok {
		return nil, compat.StatusInProgress
	}
	var entries []datapath.NATEntry
	select {
	case entries = <-ch:
	case <-time.After(dumpTimeout):
		return nil, compat.StatusInternal
	}
	out := make([]api.NATEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, api.NATEntry{Proto: e.Proto, Client: e.Client, VIP: e.VIP, NATSrc: e.NATSrc, Server: e.Server})
	}
	return out, nil
}

// Persist asks the worker for its persistence entries.
func (t tables) Persist(max int) ([]api.PersistEntry, error) {
	ch, ok := t.dp.engine.RequestPersistDump(max)
	if !ok {
		return nil, compat.StatusInProgress
	}
	var entries []datapath.PersistEntry
	select {
	case entries = <-ch:
	case <-time.After(dumpTimeout):
		return nil, compat.StatusInternal
	}
	out := make([]api.PersistEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, api.PersistEntry{Rule: e.Rule, Client: e.Client, Server: e.Server})
	}
	return out, nil
}
