package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// peekHash must give exactly the hash handleIP computes after the whole parse, or the staged
// lookup warms the wrong lines (harmless, but the speed-up is lost without any test noticing).
func TestPeekHashMatchesParse(t *testing.T) {
	h := newHarness(t, 1024, defaultRules())
	c6 := netip.MustParseAddr("2001:db8:1::7")
	for _, p := range []pkt{
		client(1234, TCPSyn),
		client(1234, TCPAck),
		fromServer(1, 1234, TCPAck),
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 5000, dport: 53, udp: true},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 5000, dport: 80, flags: TCPAck, ipOptions: true},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: c6, dst: vip6, sport: 5000, dport: 80, flags: TCPSyn},
		{srcMAC: gwMAC, dstMAC: port0MAC, src: c6, dst: vip6, sport: 5000, dport: 53, udp: true},
	} {
		f := p.build(t)
		var ps Parsed
		if st := ps.Decode(f); st != ParseOK {
			t.Fatalf("%+v: %v", p, st)
		}
		want := h.e.conns.hash(ps.src, ps.dst, ps.SrcPort, ps.DstPort, ps.Proto)
		got, ok := h.e.conns.peekHash(f)
		if !ok || got != want {
			t.Errorf("%v:%d → %v:%d: peekHash %x %v, want %x", p.src, p.sport, p.dst, p.dport, got, ok, want)
		}
	}
	arp := arpFrame(t, 1, gwMAC, [6]byte{}, gwAddr, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, port0Addr)
	if _, ok := h.e.conns.peekHash(arp); ok {
		t.Error("peekHash accepted an ARP frame")
	}
	if _, ok := h.e.conns.peekHash(make([]byte, 20)); ok {
		t.Error("peekHash accepted a runt")
	}
}

// A staged burst decides exactly as an unstaged one: same results, same bytes out.
func TestPrefetchBurstChangesNothing(t *testing.T) {
	plain, staged := newHarness(t, 4096, defaultRules()), newHarness(t, 4096, defaultRules())
	for _, h := range []*harness{plain, staged} {
		h.learnNeighbours()
	}
	staged.e.prefetchMin = 0
	var flows []pkt
	for i := 0; i < 200; i++ {
		c2s, s2c := establishFlow(t, plain, client(uint16(2000+i), TCPSyn))
		establishFlow(t, staged, client(uint16(2000+i), TCPSyn))
		flows = append(flows, c2s, s2c)
	}
	// Established traffic both ways, new flows and strangers, in bursts of BurstMax.
	for i := 0; i < 100; i++ {
		flows = append(flows, client(uint16(9000+i), TCPSyn), client(uint16(20000+i), TCPAck))
	}
	frames := func() [][]byte {
		var out [][]byte
		for _, p := range flows {
			out = append(out, p.build(t))
		}
		return out
	}
	a, b := frames(), frames()
	for off := 0; off < len(a); off += BurstMax {
		end := min(off+BurstMax, len(a))
		plain.e.BeginBurst(plain.now)
		staged.e.BeginBurst(staged.now)
		staged.e.PrefetchBurst(b[off:end])
		for i := off; i < end; i++ {
			ra, rb := plain.e.Process(a[i], 0), staged.e.Process(b[i], 0)
			if ra != rb || !bytes.Equal(a[i][:ra.Len], b[i][:rb.Len]) {
				t.Fatalf("frame %d: %+v vs staged %+v", i, ra, rb)
			}
		}
		plain.e.EndBurst()
		staged.e.EndBurst()
	}
	if g := staged.e.Stats().Global; g.Forwarded == 0 || g.TCPNoConn == 0 {
		t.Fatalf("the bursts did not exercise forwarding and drops: %+v", g)
	}
}

func TestPrefetchBurstAllocatesNothing(t *testing.T) {
	h := newHarness(t, 4096, defaultRules())
	h.learnNeighbours()
	h.e.prefetchMin = 0
	establishFlow(t, h, client(2000, TCPSyn))
	var burst [][]byte
	for i := 0; i < BurstMax; i++ {
		burst = append(burst, client(uint16(2000+i%2), TCPAck).build(t))
	}
	if n := testing.AllocsPerRun(100, func() { h.e.PrefetchBurst(burst) }); n != 0 {
		t.Fatalf("PrefetchBurst allocates %v times per burst", n)
	}
}

// The engine's VIP index finds what the snapshot's map holds, for every key, and nothing else.
func TestVIPIndexMatchesSnapshot(t *testing.T) {
	var rs []rules.SnapRule
	for i := 0; i < 40; i++ {
		a := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%13)})
		if i%3 == 0 {
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
		}
		proto := uint8(rules.ProtoTCP)
		if i%2 == 1 {
			proto = rules.ProtoUDP
		}
		rs = append(rs, rules.SnapRule{ID: uint64(i + 1), Name: "r" + string(rune('a'+i)), Enabled: true, VIP: a, Proto: proto,
			MinPort: uint16(1000 * (i + 1)), MaxPort: uint16(1000*(i+1) + 10), Algo: rules.AlgoRoundRobin, Topo: rules.TopoHalfNAT,
			Servers: servers("_sg", 0)})
	}
	s := makeSnapshot(1, rs)
	var x vipIndex
	x.build(s)
	for k, want := range s.ByVIP {
		got := x.find(addrFrom16(k.Addr[:]), k.Proto)
		if len(got) != len(want) {
			t.Fatalf("%v/%d: %v, want %v", k.Addr, k.Proto, got, want)
		}
		for i := range want {
			if int(got[i]) != want[i] {
				t.Fatalf("%v/%d: %v, want %v", k.Addr, k.Proto, got, want)
			}
		}
	}
	if got := x.find(addrFromNetip(netip.MustParseAddr("198.51.100.1")), rules.ProtoTCP); got != nil {
		t.Fatalf("absent VIP found: %v", got)
	}
	x.build(nil)
	if got := x.find(addrFromNetip(netip.MustParseAddr("192.0.2.100")), rules.ProtoTCP); got != nil {
		t.Fatalf("empty index found %v", got)
	}
}
