package datapath

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// roundRobinWorld returns the world rules with every algorithm set to round robin, so the first
// flow of each rule deterministically goes to server 0.
func roundRobinWorld() []rules.SnapRule {
	rs := worldRules()
	for i := range rs {
		rs[i].Algo = rules.AlgoRoundRobin
	}
	return rs
}

type topoCase struct {
	topo rules.Topo
	v6   bool
	udp  bool
}

func (c topoCase) String() string {
	name := map[rules.Topo]string{rules.TopoDSR: "DSR", rules.TopoHalfNAT: "HalfNAT", rules.TopoNAT: "FullNAT"}[c.topo]
	fam, proto := "IPv4", "TCP"
	if c.v6 {
		fam = "IPv6"
	}
	if c.udp {
		proto = "UDP"
	}
	return name + "/" + proto + "/" + fam
}

// endpoints returns the case's client, VIP, servers and proxies.
func (c topoCase) endpoints() (cl, v netip.Addr, sv, px []netip.Addr, vport, sport uint16) {
	cl, sv, px = clientAddr, serverAddr, proxy4
	if c.v6 {
		cl, sv, px = clientAddr6, serverAddr6, proxy6
	}
	v = map[rules.Topo][2]netip.Addr{rules.TopoDSR: {vipDSR, vipDSR6}, rules.TopoHalfNAT: {vip, vip6}, rules.TopoNAT: {vipNAT, vipNAT6}}[c.topo][b2i(c.v6)]
	vport, sport = 80, 8080
	if c.udp {
		vport, sport = 53, 5353
	}
	if c.topo == rules.TopoDSR {
		sport = vport
	}
	return
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func allTopoCases() []topoCase {
	var cs []topoCase
	for _, topo := range []rules.Topo{rules.TopoDSR, rules.TopoHalfNAT, rules.TopoNAT} {
		for _, v6 := range []bool{false, true} {
			for _, udp := range []bool{false, true} {
				cs = append(cs, topoCase{topo, v6, udp})
			}
		}
	}
	return cs
}

// TestGoldenEveryTopology sends a client packet and a server reply through every topology ×
// protocol × family and compares the frames the engine emits byte for byte with frames built
// from scratch by gopacket, checksums recomputed independently.
func TestGoldenEveryTopology(t *testing.T) {
	for _, c := range allTopoCases() {
		t.Run(c.String(), func(t *testing.T) {
			h := newWorld(t, roundRobinWorld(), nil)
			cl, v, sv, px, vport, sport := c.endpoints()
			// A SYN with data (TCP Fast Open's shape): it opens the connection.
			in := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: 40000, dport: vport, udp: c.udp,
				flags: TCPSyn | TCPPsh, seq: 1000, payload: []byte("hello, server")}
			// What the server must see.
			want := in
			want.srcMAC, want.dstMAC, want.ttl = port1MAC, serverMAC[0], 63
			natSrc, natPort := cl, uint16(40000)
			switch c.topo {
			case rules.TopoHalfNAT:
				want.dst, want.dport = sv[0], sport
			case rules.TopoNAT:
				// The first connection uses the second proxy address (Solaris' ++cur % n) and
				// the lowest port of the arena.
				natSrc, natPort = px[1], natPortFirst
				want.src, want.sport, want.dst, want.dport = natSrc, natPort, sv[0], sport
			}
			r, out := h.process(in.build(t), 0)
			expectGolden(t, r, out, 1, want.build(t))

			h.burst()
			if c.topo == rules.TopoDSR {
				if n := h.e.conns.count(); n != 0 {
					t.Fatalf("DSR created %d connection entries", n)
				}
				return
			}
			if n := h.e.conns.count(); n != 1 {
				t.Fatalf("%d connection entries", n)
			}
			// The server's reply, translated back to VIP → client.
			reply := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: sv[0], dst: natSrc, sport: sport, dport: natPort, udp: c.udp,
				flags: TCPPsh | TCPAck, seq: 2000, ack: 1013, payload: []byte("hello, client!")}
			back := reply
			back.srcMAC, back.dstMAC, back.ttl = port0MAC, gwMAC, 63
			back.src, back.sport, back.dst, back.dport = v, vport, cl, 40000
			r, out = h.process(reply.build(t), 1)
			expectGolden(t, r, out, 0, back.build(t))

			// Both directions count as processed on the server (spec §2.7).
			h.burst()
			for _, rs := range h.stats().Rules {
				if rs.PktProcessed == 0 {
					continue
				}
				if rs.PktProcessed != 2 || rs.Servers[0].PktProcessed != 2 {
					t.Fatalf("rule %s: processed %d, server 0 %d; want 2 2", rs.Name, rs.PktProcessed, rs.Servers[0].PktProcessed)
				}
			}
		})
	}
}

// In DSR the engine keeps no state, so round robin spreads even one flow's packets, as Solaris
// does; a hash keeps every packet of a flow on one server.
func TestDSRRoundRobinPerPacketHashPerFlow(t *testing.T) {
	h := newWorld(t, nil, nil)
	var got []int
	for range 6 {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipDSR, sport: 40000, dport: 80, flags: TCPAck}
		r, out := h.process(p.build(t), 0)
		d := expectForward(t, r, out, 1, serverMACOf(t, out), clientAddr, vipDSR, 40000, 80, 63)
		got = append(got, serverIndexOfMAC(t, d.eth.DstMAC))
	}
	if !slices.Equal(got, []int{0, 1, 2, 0, 1, 2}) {
		t.Fatalf("DSR round robin per packet: %v", got)
	}
	// hash-ip (the UDP DSR rule): every datagram of every port of a client on one server.
	first := -1
	for sport := uint16(1000); sport < 1050; sport++ {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipDSR, sport: sport, dport: 53, udp: true}
		r, out := h.process(p.build(t), 0)
		i := serverIndexOfMAC(t, decode(t, out).eth.DstMAC)
		expectForward(t, r, out, 1, serverMAC[i], clientAddr, vipDSR, sport, 53, 63)
		if first < 0 {
			first = i
		}
		if i != first {
			t.Fatalf("hash-ip moved client from server %d to %d", first, i)
		}
	}
	h.burst()
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("DSR kept %d entries", n)
	}
	if rs := h.rule(ruleDSR); rs.PktProcessed != 6 || rs.Servers[0].PktProcessed != 2 {
		t.Fatalf("DSR stats %+v", rs)
	}
}

// A DSR reply never crosses the engine; a packet from a server that is not part of a
// connection is passed on, as ILB passes it.
func TestServerTrafficWithoutConnectionPasses(t *testing.T) {
	h := newWorld(t, nil, nil)
	p := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: clientAddr, sport: 80, dport: 40000, flags: TCPAck}
	f := p.build(t)
	orig := slices.Clone(f)
	if r, out := h.process(f, 1); r.Action != ActionPass || !bytes.Equal(out, orig) {
		t.Fatalf("server traffic without connection: %+v", r)
	}
	h.burst()
	if g := h.stats().Global; g.ServerUnmatched != 1 {
		t.Fatalf("ServerUnmatched %d", g.ServerUnmatched)
	}
}

func serverMACOf(t *testing.T, out []byte) [6]byte {
	t.Helper()
	return serverMAC[serverIndexOfMAC(t, decode(t, out).eth.DstMAC)]
}

func serverIndexOfMAC(t testing.TB, m []byte) int {
	t.Helper()
	for i, s := range serverMAC {
		if bytes.Equal(s[:], m) {
			return i
		}
	}
	t.Fatalf("%x is not a server MAC", m)
	return -1
}

// Several rules on one VIP with different ports and server groups (Cisco IOS SLB's virtual
// servers): each port reaches its own group; a port no rule covers is passed and counted.
func TestSeveralRulesOnOneVIP(t *testing.T) {
	rs := defaultRules()
	other := []rules.SnapServer{{ID: "_sg9.0", Addr: serverAddr[2], MinPort: 9443, MaxPort: 9443, Enabled: true}}
	rs = append(rs, rules.SnapRule{ID: 9, Name: "tls", Enabled: true, VIP: vip, Proto: rules.ProtoTCP, MinPort: 443, MaxPort: 443,
		Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT, Servers: other})
	h := newHarness(t, 64, rs)
	h.learnNeighbours()
	r, out := h.process(client(1000, TCPSyn).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	p := client(1001, TCPSyn)
	p.dport = 443
	r, out = h.process(p.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[2], clientAddr, serverAddr[2], 1001, 9443, 63)
	p.dport = 444
	f := p.build(t)
	orig := slices.Clone(f)
	if r, out := h.process(f, 0); r.Action != ActionPass || !bytes.Equal(out, orig) {
		t.Fatalf("uncovered VIP port: %+v", r)
	}
	h.burst()
	if g := h.stats().Global; g.VIPPortUnmatched != 1 {
		t.Fatalf("VIPPortUnmatched %d", g.VIPPortUnmatched)
	}
}

// Full NAT: proxy-src addresses are chosen round robin starting with the second (Solaris'
// ++cur % n), ports from the low end of each address's arena.
func TestFullNATProxyRoundRobinAndPorts(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprint("v6=", v6), func(t *testing.T) {
			h := newWorld(t, nil, nil)
			c := topoCase{rules.TopoNAT, v6, false}
			cl, v, _, px, _, _ := c.endpoints()
			want := []netip.AddrPort{
				netip.AddrPortFrom(px[1], 4096), netip.AddrPortFrom(px[0], 4096),
				netip.AddrPortFrom(px[1], 4097), netip.AddrPortFrom(px[0], 4097),
			}
			for k, w := range want {
				p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: cl, dst: v, sport: uint16(5000 + k), dport: 80, flags: TCPSyn}
				r, out := h.process(p.build(t), 0)
				d := decode(t, out)
				if r.Action != ActionForward || d.src() != w.Addr() || uint16(d.tcp.SrcPort) != w.Port() {
					t.Fatalf("flow %d: %+v from %v:%d, want %v", k, r, d.src(), d.tcp.SrcPort, w)
				}
			}
		})
	}
}

// Port exhaustion: with a share of two ports (30000 workers), a third connection is dropped and
// counted as noport while both are established; a reset connection's port is reused.
func TestFullNATPortExhaustionAndReturn(t *testing.T) {
	h := newWorld(t, twoPortRules(), func(c *Config) { c.WorkerCount, c.WorkerIndex = 30000, 7 })
	// Worker 7 of 30000 owns ports 30007 and 60007.
	for k, port := range []uint16{30007, 60007} {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: uint16(5000 + k), dport: 80, flags: TCPSyn}
		r, out := h.process(p.build(t), 0)
		expectForward(t, r, out, 1, serverMAC[k], proxy4[0], serverAddr[k], port, 8080, 63)
		if FullNATPortOwner(port, 30000) != 7 {
			t.Fatalf("owner of %d is %d", port, FullNATPortOwner(port, 30000))
		}
		back := pkt{srcMAC: serverMAC[k], dstMAC: port1MAC, src: serverAddr[k], dst: proxy4[0], sport: 8080, dport: port, flags: TCPSyn | TCPAck, seq: 5000}
		h.process(back.build(t), 1)
		p.flags, p.seq, p.ack = TCPAck, 1, 5001
		h.process(p.build(t), 0)
	}
	if h.e.conns.hoCount != 0 {
		t.Fatalf("%d entries not established", h.e.conns.hoCount)
	}
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: 5002, dport: 80, flags: TCPSyn}
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("third connection with two ports: %+v", r)
	}
	h.burst()
	rsu := h.rule(ruleNAT)
	if rsu.NoPortPktDropped != 1 || rsu.NoPortBytesDropped != 40 || rsu.PktDropped != 1 || h.stats().Global.NoPort != 1 {
		t.Fatalf("noport counters: %+v global %d", rsu.RuleCounters, h.stats().Global.NoPort)
	}
	if h.e.conns.count() != 2 {
		t.Fatalf("%d entries", h.e.conns.count())
	}
	// The server resets the first connection: it is closing, so the next connection evicts it
	// and reuses its port.
	rst := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: proxy4[0], sport: 8080, dport: 30007, flags: TCPRst | TCPAck}
	r, out := h.process(rst.build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vipNAT, clientAddr, 80, 5000, 63)
	r, out = h.process(p.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[2], proxy4[0], serverAddr[2], 30007, 8080, 63)
}

// twoPortRules are the world's rules with a single proxy-src address for the full-NAT rule.
func twoPortRules() []rules.SnapRule {
	rs := worldRules()
	for i := range rs {
		if rs[i].ID == ruleNAT {
			rs[i].ProxySrc = proxy4[:1]
		}
	}
	return rs
}

// A SYN flood's half-open entries cannot hold full-NAT ports hostage: a new connection that
// finds the ports exhausted evicts the oldest half-open entry and takes its port, and when the
// flood stops its entries, and their ports, go at the half-open timeout.
func TestHalfOpenFullNATPortsReturn(t *testing.T) {
	h := newWorld(t, twoPortRules(), func(c *Config) { c.WorkerCount, c.WorkerIndex = 30000, 7 })
	syn := func(sport uint16) (Result, []byte) {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: sport, dport: 80, flags: TCPSyn}
		return h.process(p.build(t), 0)
	}
	syn(5000) // port 30007
	syn(5001) // port 60007
	r, out := syn(5002)
	expectForward(t, r, out, 1, serverMAC[2], proxy4[0], serverAddr[2], 30007, 8080, 63)
	h.burst()
	if g := h.stats().Global; g.HalfOpenEvicted != 1 || g.NoPort != 0 {
		t.Fatalf("HalfOpenEvicted %d NoPort %d, want 1 0", g.HalfOpenEvicted, g.NoPort)
	}
	// 5000's entry is gone: its retransmitted SYN is a new connection.
	if ci, _ := h.e.conns.lookup(addrFromNetip(clientAddr), addrFromNetip(vipNAT), 5000, 80, ProtoTCP,
		h.e.conns.hash(addrFromNetip(clientAddr), addrFromNetip(vipNAT), 5000, 80, ProtoTCP)); ci >= 0 {
		t.Fatal("the oldest half-open entry survived")
	}
	// The flood stops: at the half-open timeout both entries and both ports are free again.
	h.advance(DefaultHalfOpenTimeout + time.Millisecond)
	h.burst()
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("%d entries after the half-open timeout", n)
	}
	for _, a := range h.e.nat.arenas {
		if a.live && a.inUse != 0 {
			t.Fatalf("arena %v: %d ports still in use", a.addr.netip(), a.inUse)
		}
	}
	if g := h.stats().Global; g.HalfOpenExpired != 2 {
		t.Fatalf("HalfOpenExpired %d, want 2", g.HalfOpenExpired)
	}
}

// Full NAT needs no route back through the load balancer, so a client on the servers' own
// subnet works: the server answers the proxy address, which the engine owns on that link.
func TestFullNATClientOnServerSubnet(t *testing.T) {
	h := newWorld(t, nil, nil)
	local := netip.MustParseAddr("198.51.100.50")
	localMAC := [6]byte{0x02, 0, 0, 0, 5, 0x50}
	// The server asks who has the proxy address; we do, on its port.
	r, out := h.process(arpRequest(t, serverMAC[0], serverAddr[0], proxy4[1]), 1)
	expectARPReply(t, r, out, 1, port1MAC, proxy4[1], serverMAC[0], serverAddr[0])
	h.process(arpRequest(t, localMAC, local, port1Addr), 1) // the client resolves us
	syn := pkt{srcMAC: localMAC, dstMAC: port1MAC, src: local, dst: vipNAT, sport: 6000, dport: 80, flags: TCPSyn}
	r, out = h.process(syn.build(t), 1)
	expectForward(t, r, out, 1, serverMAC[0], proxy4[1], serverAddr[0], 4096, 8080, 63)
	synack := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: proxy4[1], sport: 8080, dport: 4096, flags: TCPSyn | TCPAck}
	r, out = h.process(synack.build(t), 1)
	expectForward(t, r, out, 1, localMAC, vipNAT, local, 80, 6000, 63)
}

// show-nat lists full-NAT entries with the proxy endpoint as the source the server sees.
func TestNATDumpFullNAT(t *testing.T) {
	h := newWorld(t, nil, nil)
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipNAT6, sport: 7000, dport: 80, flags: TCPSyn}
	if r, _ := h.process(p.build(t), 0); r.Action != ActionForward {
		t.Fatalf("%+v", r)
	}
	ch, ok := h.e.RequestNATDump(0)
	if !ok {
		t.Fatal("refused")
	}
	h.burst()
	got := <-ch
	want := NATEntry{Proto: ProtoTCP, Client: netip.AddrPortFrom(clientAddr6, 7000), VIP: netip.AddrPortFrom(vipNAT6, 80),
		NATSrc: netip.AddrPortFrom(proxy6[1], 4096), Server: netip.AddrPortFrom(serverAddr6[0], 8080), RuleID: ruleNAT6,
		Created: h.now, LastUsed: h.now}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("dump %+v\nwant %+v", got, want)
	}
}

// Adding a server disturbs no established connection: entries hold their server.
func TestAddingServerKeepsConnections(t *testing.T) {
	h := newWorld(t, nil, nil)
	type flow struct {
		sport uint16
		srv   netip.Addr
		nat   uint16
	}
	var flows []flow
	for k := range 6 {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: uint16(9000 + k), dport: 80, flags: TCPSyn}
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatal(r)
		}
		d := decode(t, out)
		flows = append(flows, flow{uint16(9000 + k), d.dst(), uint16(d.tcp.SrcPort)})
	}
	rs := worldRules()
	extra := netip.MustParseAddr("198.51.100.10") // sorts first: shifts every index
	for i := range rs {
		if rs[i].ID == ruleNAT {
			rs[i].Servers = append([]rules.SnapServer{{ID: "_sg6.9", Addr: extra, MinPort: 8080, MaxPort: 8080, Enabled: true}}, rs[i].Servers...)
		}
	}
	h.setRules(rs)
	for _, f := range flows {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: f.sport, dport: 80, flags: TCPAck}
		r, out := h.process(p.build(t), 0)
		if r.Action != ActionForward {
			t.Fatal(r)
		}
		if d := decode(t, out); d.dst() != f.srv || uint16(d.tcp.SrcPort) != f.nat {
			t.Fatalf("flow %d moved to %v:%d", f.sport, d.dst(), d.tcp.SrcPort)
		}
	}
}
