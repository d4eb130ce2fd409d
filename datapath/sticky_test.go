package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// stickyRules makes the given rules sticky with pmask bits and a 60 s persist-timeout.
func stickyRules(bits int, ids ...uint64) []rules.SnapRule {
	rs := worldRules()
	for i := range rs {
		for _, id := range ids {
			if rs[i].ID == id {
				rs[i].PMaskBits = bits
				rs[i].PersistTimeout = 60 * time.Second
			}
		}
	}
	return rs
}

func synFrom(src, dst netip.Addr, sport uint16) pkt {
	return pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: src, dst: dst, sport: sport, dport: 80, flags: TCPSyn}
}

// Same client (as masked by pmask) → same server across flows, where round robin alone would
// rotate; another network goes on with the algorithm.
func TestPersistenceSameServerAcrossFlows(t *testing.T) {
	h := newWorld(t, stickyRules(24, ruleWeb), nil)
	a := netip.MustParseAddr("203.0.113.7")
	b := netip.MustParseAddr("203.0.113.99") // same /24
	c := netip.MustParseAddr("203.0.114.5")
	first := balance(t, h, a, vip, 1000)
	for k := range 10 {
		if i := balance(t, h, a, vip, uint16(1001+k)); i != first {
			t.Fatalf("flow %d of the same client went to %d, not %d", k, i, first)
		}
		if i := balance(t, h, b, vip, uint16(2000+k)); i != first {
			t.Fatalf("client in the same /24 went to %d, not %d", i, first)
		}
	}
	if i := balance(t, h, c, vip, 3000); i != first+1 {
		t.Fatalf("other network went to %d; round robin's next is %d", i, first+1)
	}
	if n := h.e.sticky.count(); n != 2 {
		t.Fatalf("%d persistence entries, want 2", n)
	}

	ch, ok := h.e.RequestPersistDump(0)
	if !ok {
		t.Fatal("dump refused")
	}
	if _, ok := h.e.RequestPersistDump(0); ok {
		t.Fatal("second concurrent dump accepted")
	}
	h.burst()
	got := map[netip.Addr]PersistEntry{}
	for _, pe := range <-ch {
		got[pe.Client] = pe
	}
	pa := got[netip.MustParseAddr("203.0.113.0")]
	if pa.Rule != "web" || pa.RuleID != ruleWeb || pa.Server != serverAddr[first] || pa.Conns != 21 {
		t.Fatalf("dump entry %+v", pa)
	}
	if pc := got[netip.MustParseAddr("203.0.114.0")]; pc.Server != serverAddr[first+1] || pc.Conns != 1 {
		t.Fatalf("dump entry %+v", pc)
	}
}

// The mapping lives while connections hold it and persist-timeout after the last one ends.
func TestPersistenceExpiry(t *testing.T) {
	h := newWorld(t, stickyRules(32, ruleWeb), nil)
	c2s, s2c := establishFlow(t, h, pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 1000, dport: 80, seq: 1000})
	first := serverIndex(t, net.IP(s2c.src.AsSlice())) // server 0
	h.advance(200 * time.Second)                       // longer than persist-timeout, but a connection holds it
	h.process(c2s.build(t), 0)                         // keeps the connection alive too
	if i := balance(t, h, clientAddr, vip, 1001); i != first {
		t.Fatalf("held mapping lost: %d", i)
	}
	for _, sp := range []uint16{1000, 1001} {
		h.process(client(sp, TCPRst).build(t), 0)
	}
	h.advance(DefaultHalfOpenTimeout + time.Millisecond) // reset entries close at the half-open timeout
	h.burst()
	if h.e.conns.count() != 0 {
		t.Fatal("connections left")
	}
	h.advance(59*time.Second - DefaultHalfOpenTimeout)
	if i := balance(t, h, clientAddr, vip, 1002); i != first {
		t.Fatalf("within persist-timeout went to %d", i)
	}
	h.process(client(1002, TCPRst).build(t), 0)
	h.advance(DefaultHalfOpenTimeout + time.Millisecond)
	h.burst()
	h.advance(61 * time.Second)
	h.learnWorld() // neighbours unconfirmed for 5 minutes would expire
	if i := balance(t, h, clientAddr, vip, 1003); i != first+1 {
		t.Fatalf("after persist-timeout went to %d, want round robin's next %d", i, first+1)
	}
	// The sweep removes mappings nobody looks up again.
	h.process(client(1003, TCPRst).build(t), 0)
	h.advance(DefaultHalfOpenTimeout + time.Millisecond)
	h.burst()
	h.advance(61 * time.Second)
	h.learnWorld()
	h.scan()
	if n := h.e.sticky.count(); n != 0 {
		t.Fatalf("%d entries after the sweep", n)
	}
}

// A mapping to a server that became disabled is replaced by the algorithm's choice.
func TestPersistenceDisabledServerReplaced(t *testing.T) {
	h := newWorld(t, stickyRules(32, ruleWeb), nil)
	first := balance(t, h, clientAddr, vip, 1000)
	rs := stickyRules(32, ruleWeb)
	rs[0].Servers[first].Enabled = false
	h.setRules(rs)
	second := balance(t, h, clientAddr, vip, 1001)
	if second == first {
		t.Fatal("went to the disabled server")
	}
	for k := range 5 {
		if i := balance(t, h, clientAddr, vip, uint16(1002+k)); i != second {
			t.Fatalf("new mapping not kept: %d", i)
		}
	}
	// The established connection to the disabled server continues.
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[first], clientAddr, serverAddr[first], 1000, 8080, 63)
}

// DSR has no connections: the mapping lives persist-timeout after the last packet, and keeps
// round robin from spreading the client's packets.
func TestPersistenceDSR(t *testing.T) {
	h := newWorld(t, stickyRules(32, ruleDSR), nil)
	send := func() int {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipDSR, sport: 4000, dport: 80, flags: TCPAck}
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatal(r)
		}
		return serverIndexOfMAC(t, decode(t, out).eth.DstMAC)
	}
	first := send()
	for range 5 {
		h.advance(50 * time.Second) // each packet renews the mapping
		if i := send(); i != first {
			t.Fatalf("DSR sticky moved to %d", i)
		}
	}
	h.advance(61 * time.Second)
	h.learnWorld() // neighbours unconfirmed for 5 minutes would expire
	if i := send(); i == first {
		t.Fatal("DSR mapping outlived persist-timeout")
	}
}

// Full NAT with persistence fixes the proxy-src address per mapping (no round robin over them).
func TestPersistenceFullNATFixesProxy(t *testing.T) {
	h := newWorld(t, stickyRules(64, ruleNAT6), nil)
	var proxy netip.Addr
	for k := range 6 {
		p := synFrom(clientAddr6, vipNAT6, uint16(5000+k))
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatal(r)
		}
		d := decode(t, out)
		if d.dst() != serverAddr6[0] {
			t.Fatalf("flow %d to %v", k, d.dst())
		}
		if k == 0 {
			proxy = d.src()
		} else if d.src() != proxy {
			t.Fatalf("flow %d from proxy %v, mapping fixed %v", k, d.src(), proxy)
		}
	}
	ch, _ := h.e.RequestPersistDump(0)
	h.burst()
	got := <-ch
	if len(got) != 1 || got[0].ProxySrc != proxy || got[0].Client != netip.MustParseAddr("2001:db8:99::") || got[0].Rule != "nat6" {
		t.Fatalf("dump %+v", got)
	}
}

// A full persistence table drops new flows of sticky rules as nomem.
func TestPersistenceTableFull(t *testing.T) {
	h := newWorld(t, stickyRules(32, ruleWeb), func(c *Config) { c.StickyCapacity = 2 })
	balance(t, h, netip.MustParseAddr("203.0.113.1"), vip, 1)
	balance(t, h, netip.MustParseAddr("203.0.113.2"), vip, 1)
	p := synFrom(netip.MustParseAddr("203.0.113.3"), vip, 1)
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("third client with two entries: %+v", r)
	}
	h.burst()
	if rs := h.rule(ruleWeb); rs.NoMemPktDropped != 1 || h.stats().Global.StickyFull != 1 {
		t.Fatalf("nomem %d stickyfull %d", rs.NoMemPktDropped, h.stats().Global.StickyFull)
	}
}
