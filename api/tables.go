package api

import (
	"net/netip"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// The read-only requests for the data plane's tables: the statistics behind
// show-statistics (Solaris' kstats), the entries behind show-nat and show-persist, and the
// per-worker view behind show-worker (an extension: Solaris had no workers).
const (
	OpStatistics  Op = "statistics"
	OpShowNAT     Op = "show-nat"
	OpShowPersist Op = "show-persist"
	OpShowWorker  Op = "show-worker"
)

// Statistics is one sample of every counter, summed over the data-plane workers.
type Statistics struct {
	NumRules    int              `json:"num_rules"`
	FragIn      uint64           `json:"ip_frag_in"`
	FragDropped uint64           `json:"ip_frag_dropped"`
	Rules       []RuleStatistics `json:"rules"`
	// Counters are the data plane's own counters by name (the snake_case names of
	// datapath.GlobalCounters, e.g. "tcp_no_conn", "half_open_evicted"), summed over the
	// workers; absent without a data plane.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// Ports are the data plane's per-port counters, in the order of the settings file.
	Ports []PortStatistics `json:"ports,omitempty"`
}

// PortStatistics are one data-plane port's counters.
type PortStatistics struct {
	Name string `json:"name"` // the DPDK device name
	// ChecksumSampled counts the received TCP/UDP packets whose checksum the engine
	// verified (one in 64), ChecksumBad those of them that were wrong: a sign of an
	// offload that left checksums incomplete.
	ChecksumSampled uint64 `json:"checksum_sampled"`
	ChecksumBad     uint64 `json:"checksum_bad"`
	VLANDropped     uint64 `json:"vlan_dropped"` // tagged frames on the untagged port
}

// RuleStatistics are one rule instance's counters (Solaris' rulestat kstat). A deleted
// rule whose connections are still draining keeps its counters, marked Draining.
type RuleStatistics struct {
	Name     string `json:"name"`
	Instance uint64 `json:"instance"` // changes when a rule of that name is recreated
	Draining bool   `json:"draining,omitempty"`

	PktNotProcessed     uint64 `json:"pkt_not_processed"`
	BytesNotProcessed   uint64 `json:"bytes_not_processed"`
	PktDropped          uint64 `json:"pkt_dropped"`
	BytesDropped        uint64 `json:"bytes_dropped"`
	NoMemPktDropped     uint64 `json:"nomem_pkt_dropped"`
	NoMemBytesDropped   uint64 `json:"nomem_bytes_dropped"`
	NoPortPktDropped    uint64 `json:"noport_pkt_dropped"`
	NoPortBytesDropped  uint64 `json:"noport_bytes_dropped"`
	ICMPEchoProcessed   uint64 `json:"icmp_echo_processed"`
	ICMPDropped         uint64 `json:"icmp_dropped"`
	ICMPTooBigProcessed uint64 `json:"icmp_too_big_processed"`
	ICMPTooBigDropped   uint64 `json:"icmp_too_big_dropped"`

	Servers []ServerStatistics `json:"servers"`
}

// ServerStatistics are one server's counters within one rule (Solaris' <rule>-sstat kstat).
type ServerStatistics struct {
	ID             string     `json:"id"`
	Addr           netip.Addr `json:"addr"`
	PktProcessed   uint64     `json:"pkt_processed"`
	BytesProcessed uint64     `json:"bytes_processed"`
}

// NATEntry is one connection of the NAT table (show-nat).
type NATEntry struct {
	Proto  uint8          `json:"proto"`
	Client netip.AddrPort `json:"client"`
	VIP    netip.AddrPort `json:"vip"`
	NATSrc netip.AddrPort `json:"nat_src"` // the client for half-NAT, the proxy source for full NAT
	Server netip.AddrPort `json:"server"`
}

// PersistEntry is one entry of the persistence table (show-persist).
type PersistEntry struct {
	Rule   string     `json:"rule"`
	Client netip.Addr `json:"client"` // the source address masked by the rule's pmask
	Server netip.Addr `json:"server"`
}

// WorkerStatistics is one data-plane worker's view (show-worker): the worker that runs on
// each EAL worker lcore, with its own queues, connection table and counters.
type WorkerStatistics struct {
	Worker     int    `json:"worker"`      // its index, from 0
	Lcore      uint   `json:"lcore"`       // the EAL lcore it runs on
	CPU        int    `json:"cpu"`         // the CPU of that lcore (the first of its set); -1 unknown
	RxPackets  uint64 `json:"rx_packets"`  // frames received from the data ports
	TxPackets  uint64 `json:"tx_packets"`  // frames sent to the data ports
	Conns      uint64 `json:"conns"`       // connection entries in use
	ConnCap    uint64 `json:"conn_cap"`    // connection entries it can hold (conn-table)
	HandoffIn  uint64 `json:"handoff_in"`  // frames other workers handed to it, as their owner
	HandoffOut uint64 `json:"handoff_out"` // frames it handed to their owner
	Polls      uint64 `json:"polls"`       // loop iterations
	BusyPolls  uint64 `json:"busy_polls"`  // ... that found work
}

// Tables is the data plane as the control service sees it. ilbd provides it; without a
// data plane the Service reports zero counters and empty tables, never invented entries.
type Tables interface {
	Statistics() Statistics
	// NAT and Persist return at most max entries (max ≤ 0: all). They fail with
	// compat.StatusInProgress while another listing of the same table is running.
	NAT(max int) ([]NATEntry, error)
	Persist(max int) ([]PersistEntry, error)
	// Workers returns every worker's view, in worker order.
	Workers() []WorkerStatistics
}

// handleTables answers the table requests; anything else is an invalid command.
func (c *Service) handleTables(req *Request) *Response {
	resp := &Response{}
	switch req.Op {
	case OpStatistics:
		st := zeroStatistics(c.Mgr.Config())
		if c.Tables != nil {
			st = c.Tables.Statistics()
		}
		resp.Statistics = &st
	case OpShowNAT, OpShowPersist:
		if c.Tables == nil {
			return resp
		}
		var err error
		if req.Op == OpShowNAT {
			resp.NAT, err = c.Tables.NAT(req.Max)
		} else {
			resp.Persist, err = c.Tables.Persist(req.Max)
		}
		if err != nil {
			return &Response{Status: StatusOf(err)}
		}
	case OpShowWorker:
		// Without a data plane there are no workers: an empty list.
		if c.Tables != nil {
			resp.Workers = c.Tables.Workers()
		}
	default:
		return &Response{Status: compat.StatusInvalCmd}
	}
	return resp
}

// zeroStatistics lists every configured rule and server with zero counters: the
// statistics of a daemon that has no data plane.
func zeroStatistics(cfg rules.Config) Statistics {
	st := Statistics{NumRules: len(cfg.Rules)}
	for i, r := range cfg.Rules {
		rs := RuleStatistics{Name: r.Name, Instance: uint64(i + 1)}
		if g := cfg.Group(r.ServerGroup); g != nil {
			for _, s := range g.Servers {
				rs.Servers = append(rs.Servers, ServerStatistics{ID: s.ID, Addr: s.Addr})
			}
		}
		st.Rules = append(st.Rules, rs)
	}
	return st
}

// Statistics asks ilbd for one sample of the counters.
func (c *Client) Statistics() (*Statistics, error) {
	resp, err := c.Do(&Request{Op: OpStatistics})
	if err != nil {
		return nil, err
	}
	if resp.Statistics == nil {
		return &Statistics{}, nil
	}
	return resp.Statistics, nil
}

// NAT returns up to max entries of the NAT table (max ≤ 0: all).
func (c *Client) NAT(max int) ([]NATEntry, error) {
	resp, err := c.Do(&Request{Op: OpShowNAT, Max: max})
	if err != nil {
		return nil, err
	}
	return resp.NAT, nil
}

// Persist returns up to max entries of the persistence table (max ≤ 0: all).
func (c *Client) Persist(max int) ([]PersistEntry, error) {
	resp, err := c.Do(&Request{Op: OpShowPersist, Max: max})
	if err != nil {
		return nil, err
	}
	return resp.Persist, nil
}

// Workers returns every data-plane worker's view, in worker order (none without a data plane).
func (c *Client) Workers() ([]WorkerStatistics, error) {
	resp, err := c.Do(&Request{Op: OpShowWorker})
	if err != nil {
		return nil, err
	}
	return resp.Workers, nil
}
