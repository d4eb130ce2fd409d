package main

import (
	"testing"

	"github.com/ilbgo/ilb/datapath"
)

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"TCPNoConn": "tcp_no_conn", "ICMPEchoReplies": "icmp_echo_replies", "NDPAdvertsSent": "ndp_adverts_sent",
		"RxPackets": "rx_packets", "BadIPv4Checksum": "bad_ipv4_checksum", "IPv6ExtDropped": "ipv6_ext_dropped",
		"VLANDropped": "vlan_dropped", "NextHopHeldSent": "next_hop_held_sent",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
	m := counterMap(&datapath.GlobalCounters{TCPNoConn: 7, HalfOpenEvicted: 3})
	if m["tcp_no_conn"] != 7 || m["half_open_evicted"] != 3 || len(m) < 50 {
		t.Fatalf("counterMap: %d names, tcp_no_conn %d half_open_evicted %d", len(m), m["tcp_no_conn"], m["half_open_evicted"])
	}
}
