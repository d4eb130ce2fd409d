package datapath

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

var otherHostMAC = [6]byte{0x02, 0, 0, 0, 9, 9}

// unlearnableMAC is a source MAC the engine never learns from (the group bit is set), so a
// client sending from it stays unresolved and its replies exercise the neighbour-miss path.
var unlearnableMAC = [6]byte{0x03, 0, 0, 0, 9, 9}

// arpRequest builds a broadcast who-has target from a host (senderMAC, sender).
func arpRequest(t *testing.T, senderMAC [6]byte, sender, target netip.Addr) []byte {
	return arpFrame(t, layers.ARPRequest, senderMAC, [6]byte{}, sender, broadcastMAC, target)
}

func expectARPReply(t *testing.T, r Result, out []byte, port uint16, ourMAC [6]byte, owned netip.Addr, askerMAC [6]byte, asker netip.Addr) {
	t.Helper()
	if r.Action != ActionForward || r.Port != port || r.Len != MinFrameSize {
		t.Fatalf("result %+v, want forward of %d bytes on port %d", r, MinFrameSize, port)
	}
	d := decode(t, out)
	if d.arp == nil {
		t.Fatal("no ARP layer in reply")
	}
	if d.eth.DstMAC.String() != mac(askerMAC) || d.eth.SrcMAC.String() != mac(ourMAC) || d.eth.EthernetType != layers.EthernetTypeARP {
		t.Fatalf("ethernet %v > %v type %v", d.eth.SrcMAC, d.eth.DstMAC, d.eth.EthernetType)
	}
	a := d.arp
	if a.Operation != layers.ARPReply || a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 {
		t.Fatalf("ARP op %d htype %v ptype %v", a.Operation, a.AddrType, a.Protocol)
	}
	if !bytes.Equal(a.SourceHwAddress, ourMAC[:]) || !bytes.Equal(a.SourceProtAddress, owned.AsSlice()) {
		t.Fatalf("sender %x/%v, want %x/%v", a.SourceHwAddress, a.SourceProtAddress, ourMAC, owned)
	}
	if !bytes.Equal(a.DstHwAddress, askerMAC[:]) || !bytes.Equal(a.DstProtAddress, asker.AsSlice()) {
		t.Fatalf("target %x/%v, want %x/%v", a.DstHwAddress, a.DstProtAddress, askerMAC, asker)
	}
}

func TestARPReplyForVIPs(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	for _, owned := range []netip.Addr{vip, vip2} { // vip2 belongs to a disabled rule: still ours
		r, out := h.process(arpRequest(t, gwMAC, gwAddr, owned), 0)
		expectARPReply(t, r, out, 0, port0MAC, owned, gwMAC, gwAddr)
	}
	// A VIP is answered on whichever port asks, with that port's MAC.
	r, out := h.process(arpRequest(t, serverMAC[0], serverAddr[0], vip), 1)
	expectARPReply(t, r, out, 1, port1MAC, vip, serverMAC[0], serverAddr[0])
	if g := h.stats().Global; g.ARPRepliesSent != 3 || g.TxPackets != 3 {
		t.Fatalf("ARPRepliesSent %d TxPackets %d, want 3 3", g.ARPRepliesSent, g.TxPackets)
	}
}

func TestARPReplyForInterfaceAddress(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	r, out := h.process(arpRequest(t, serverMAC[1], serverAddr[1], port1Addr), 1)
	expectARPReply(t, r, out, 1, port1MAC, port1Addr, serverMAC[1], serverAddr[1])
	r, out = h.process(arpRequest(t, gwMAC, gwAddr, port0Addr), 0)
	expectARPReply(t, r, out, 0, port0MAC, port0Addr, gwMAC, gwAddr)

	// Port 1's address is not answered on port 0.
	req := arpRequest(t, gwMAC, gwAddr, port1Addr)
	orig := slices.Clone(req)
	if r, out := h.process(req, 0); r.Action != ActionDrop || !bytes.Equal(out, orig) {
		t.Fatalf("request for another port's address: %+v, frame changed %v", r, !bytes.Equal(out, orig))
	}
}

func TestARPForeignAddressNotAnswered(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	req := arpRequest(t, gwMAC, gwAddr, netip.MustParseAddr("192.0.2.99"))
	orig := slices.Clone(req)
	r, out := h.process(req, 0)
	if r.Action != ActionDrop {
		t.Fatalf("action %v, want drop", r.Action)
	}
	if !bytes.Equal(out, orig) {
		t.Fatal("frame of an unanswered request was modified")
	}
	if g := h.stats().Global; g.ARPIgnored != 1 || g.ARPRepliesSent != 0 {
		t.Fatalf("ARPIgnored %d ARPRepliesSent %d", g.ARPIgnored, g.ARPRepliesSent)
	}
	// Non-Ethernet/IPv4 ARP is ignored too.
	bad := arpRequest(t, gwMAC, gwAddr, vip)
	bad[EthernetHeaderSize+arpHLen] = 8
	if r, _ := h.process(bad, 0); r.Action != ActionDrop {
		t.Fatalf("hlen 8: action %v, want drop", r.Action)
	}
}

func TestNeighbourLearning(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	known := func(a netip.Addr, p uint16) ([6]byte, bool) {
		i := h.e.neigh.find(addrFromNetip(a), p)
		if i < 0 || h.e.neigh.slots[i].state != neighReachable {
			return [6]byte{}, false
		}
		return h.e.neigh.slots[i].mac, true
	}

	// From a reply.
	h.arpReply(serverAddr[0], serverMAC[0], 1)
	if m, ok := known(serverAddr[0], 1); !ok || m != serverMAC[0] {
		t.Fatalf("reply not learned: %x %v", m, ok)
	}
	// From a request addressed to us.
	asker := netip.MustParseAddr("198.51.100.77")
	h.process(arpRequest(t, otherHostMAC, asker, port1Addr), 1)
	if m, ok := known(asker, 1); !ok || m != otherHostMAC {
		t.Fatalf("request for us not learned: %x %v", m, ok)
	}
	// Not from a request for someone else...
	stranger := netip.MustParseAddr("198.51.100.78")
	h.process(arpRequest(t, otherHostMAC, stranger, netip.MustParseAddr("198.51.100.79")), 1)
	if _, ok := known(stranger, 1); ok {
		t.Fatal("learned the sender of a request not for us")
	}
	// ...except that it updates a neighbour we know (gratuitous ARP after a MAC change).
	newMAC := [6]byte{0x02, 0, 0, 0, 7, 7}
	h.process(arpRequest(t, newMAC, serverAddr[0], serverAddr[0]), 1)
	if m, _ := known(serverAddr[0], 1); m != newMAC {
		t.Fatalf("gratuitous ARP did not update: %x", m)
	}
	// A reply from off the port's subnets creates nothing.
	offNet := netip.MustParseAddr("203.0.113.50")
	h.process(arpFrame(t, layers.ARPReply, otherHostMAC, port1MAC, offNet, port1MAC, port1Addr), 1)
	if _, ok := known(offNet, 1); ok {
		t.Fatal("learned an off-subnet sender")
	}
	if g := h.stats().Global; g.ARPRepliesReceived != 2 {
		t.Fatalf("ARPRepliesReceived %d, want 2", g.ARPRepliesReceived)
	}
}

// expectARPRequest checks an originated who-has.
func expectARPRequest(t *testing.T, cf controlFrame, port uint16, ourMAC [6]byte, ourIP, target netip.Addr) {
	t.Helper()
	if cf.port != port || len(cf.frame) != MinFrameSize {
		t.Fatalf("ARP request on port %d, %d bytes; want port %d, %d bytes", cf.port, len(cf.frame), port, MinFrameSize)
	}
	d := decode(t, cf.frame)
	if d.arp == nil || d.arp.Operation != layers.ARPRequest {
		t.Fatal("not an ARP request")
	}
	if d.eth.DstMAC.String() != mac(broadcastMAC) || d.eth.SrcMAC.String() != mac(ourMAC) {
		t.Fatalf("ethernet %v > %v", d.eth.SrcMAC, d.eth.DstMAC)
	}
	if !bytes.Equal(d.arp.SourceHwAddress, ourMAC[:]) || !bytes.Equal(d.arp.SourceProtAddress, ourIP.AsSlice()) ||
		!bytes.Equal(d.arp.DstProtAddress, target.AsSlice()) {
		t.Fatalf("who-has %v tell %v (%x)", d.arp.DstProtAddress, d.arp.SourceProtAddress, d.arp.SourceHwAddress)
	}
}

func targetOf(cf controlFrame) netip.Addr {
	a, _ := netip.AddrFromSlice(cf.frame[EthernetHeaderSize+arpTargetIP : EthernetHeaderSize+arpTargetIP+4])
	return a
}

func TestProactiveResolutionOfServersAndGateway(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.burst()
	got := h.control()
	if len(got) != 4 {
		t.Fatalf("%d ARP requests, want 4 (gateway + 3 servers)", len(got))
	}
	want := map[netip.Addr]bool{gwAddr: true, serverAddr[0]: true, serverAddr[1]: true, serverAddr[2]: true}
	for _, cf := range got {
		tg := targetOf(cf)
		if !want[tg] {
			t.Fatalf("unexpected ARP request for %v", tg)
		}
		delete(want, tg)
		if tg == gwAddr {
			expectARPRequest(t, cf, 0, port0MAC, port0Addr, tg)
		} else {
			expectARPRequest(t, cf, 1, port1MAC, port1Addr, tg)
		}
	}
	h.burst() // counters of control frames are published at the next EndBurst
	if g := h.stats().Global; g.ARPRequestsSent != 4 {
		t.Fatalf("ARPRequestsSent %d", g.ARPRequestsSent)
	}
	// Nothing more until a retry is due; unanswered ones are retried after a second.
	h.burst()
	if n := len(h.control()); n != 0 {
		t.Fatalf("%d requests repeated at once", n)
	}
	h.arpReply(gwAddr, gwMAC, 0)
	h.advance(time.Second)
	h.scan()
	if n := len(h.control()); n != 3 {
		t.Fatalf("%d retries, want 3 (the servers)", n)
	}
	// A new server in a new snapshot is asked for at once.
	rs := defaultRules()
	extra := netip.MustParseAddr("198.51.100.14")
	rs[0].Servers = append(rs[0].Servers, rulesServer("_sg1.3", extra))
	h.setRules(rs)
	h.burst()
	got = h.control()
	if len(got) != 1 || targetOf(got[0]) != extra {
		t.Fatalf("after snapshot: %d requests", len(got))
	}
}

func TestNeighbourRefreshAndExpiry(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	h.burst()
	if n := len(h.control()); n != 0 {
		t.Fatalf("%d requests for fresh neighbours", n)
	}
	// After 30 s configured next hops are re-requested while their MAC is still used.
	h.advance(31 * time.Second)
	h.scan()
	if n := len(h.control()); n != 4 {
		t.Fatalf("%d refresh requests, want 4", n)
	}
	r, out := h.process(client(1000, TCPSyn).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	// Unconfirmed for 5 minutes: the MAC is no longer trusted.
	h.advance(5 * time.Minute)
	h.scan()
	r, _ = h.process(client(1001, TCPSyn).build(t), 0)
	if r.Action != ActionHeld {
		t.Fatalf("expired neighbour still used: %+v, want the packet held", r)
	}
	if g := h.stats().Global; g.NeighbourMisses != 1 {
		t.Fatalf("NeighbourMisses %d", g.NeighbourMisses)
	}
}

func TestNewClientMACIsGleaned(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	// A client on port 0's own subnet that never ARPed: its MAC is taken from the SYN, so the
	// server's SYN-ACK goes straight back without waiting for ARP.
	local := netip.MustParseAddr("192.0.2.50")
	localMAC := [6]byte{0x02, 0, 0, 0, 5, 0}
	syn := pkt{srcMAC: localMAC, dstMAC: port0MAC, src: local, dst: vip, sport: 4000, dport: 80, flags: TCPSyn}
	r, out := h.process(syn.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], local, serverAddr[0], 4000, 8080, 63)
	synack := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: local, sport: 8080, dport: 4000, flags: TCPSyn | TCPAck}
	r, out = h.process(synack.build(t), 1)
	expectForward(t, r, out, 0, localMAC, vip, local, 80, 4000, 63)
	if n := len(h.control()); n != 0 {
		t.Fatalf("%d ARP requests for a gleaned client", n)
	}
	// A confirmed neighbour is never overwritten from an IP packet: a forged source keeps its MAC.
	forged := pkt{srcMAC: otherHostMAC, dstMAC: port0MAC, src: local, dst: vip, sport: 4001, dport: 80, flags: TCPSyn}
	h.process(forged.build(t), 0)
	r, out = h.process(pkt{srcMAC: serverMAC[1], dstMAC: port1MAC, src: serverAddr[1], dst: local, sport: 8080, dport: 4001, flags: TCPSyn | TCPAck}.build(t), 1)
	expectForward(t, r, out, 0, localMAC, vip, local, 80, 4001, 63)
}

func TestUnknownNextHopHeldAndReleased(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	// A client on port 0's own subnet whose MAC cannot be learned from its frames and that
	// nobody asked for yet.
	local := netip.MustParseAddr("192.0.2.50")
	localMAC := [6]byte{0x02, 0, 0, 0, 5, 0}
	syn := pkt{srcMAC: unlearnableMAC, dstMAC: port0MAC, src: local, dst: vip, sport: 4000, dport: 80, flags: TCPSyn}
	r, out := h.process(syn.build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], local, serverAddr[0], 4000, 8080, 63)

	synack := pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: local, sport: 8080, dport: 4000, flags: TCPSyn | TCPAck}
	if r, _ := h.process(synack.build(t), 1); r.Action != ActionHeld {
		t.Fatalf("unresolved next hop: %+v, want held", r)
	}
	got := h.control()
	if len(got) != 1 {
		t.Fatalf("%d ARP requests, want 1", len(got))
	}
	expectARPRequest(t, got[0], 0, port0MAC, port0Addr, local)
	if g := h.stats().Global; g.NeighbourMisses != 1 || g.NextHopHeld != 1 || g.Dropped != 0 {
		t.Fatalf("NeighbourMisses %d NextHopHeld %d Dropped %d, want 1 1 0", g.NeighbourMisses, g.NextHopHeld, g.Dropped)
	}
	// A second miss right away is held too and does not repeat the request.
	if r, _ := h.process(synack.build(t), 1); r.Action != ActionHeld {
		t.Fatalf("second packet: %+v, want held", r)
	}
	if n := len(h.control()); n != 0 {
		t.Fatalf("%d repeated requests", n)
	}
	// The answer arrives: both held packets leave, translated and addressed to the new MAC,
	// in the order they came.
	h.arpReply(local, localMAC, 0)
	if !h.e.ControlPending() {
		t.Fatal("released packets not pending")
	}
	got = h.control()
	if len(got) != 2 {
		t.Fatalf("%d frames released, want 2", len(got))
	}
	for _, cf := range got {
		expectReleased(t, cf, 0, localMAC, vip, local, 80, 4000, 63)
	}
	h.burst() // counters are published at the end of a burst
	if g := h.stats().Global; g.NextHopHeldSent != 2 || g.Dropped != 0 {
		t.Fatalf("NextHopHeldSent %d Dropped %d, want 2 0", g.NextHopHeldSent, g.Dropped)
	}
	r, out = h.process(synack.build(t), 1)
	expectForward(t, r, out, 0, localMAC, vip, local, 80, 4000, 63)
}

func TestHoldQueueBoundsAndTimeout(t *testing.T) {
	h := newHarness(t, 4096, defaultRules())
	h.learnNeighbours()
	// Connections from on-link clients nobody resolved; the servers' replies wait for ARP.
	reply := func(client int, sport uint16) Result {
		t.Helper()
		a := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + client)})
		syn := pkt{srcMAC: unlearnableMAC, dstMAC: port0MAC, src: a, dst: vip, sport: sport, dport: 80, flags: TCPSyn}
		r, out := h.process(syn.build(t), 0)
		if r.Action != ActionForward {
			t.Fatalf("SYN: %+v", r)
		}
		si := serverIndex(t, decode(t, out).ip.DstIP)
		sa := pkt{srcMAC: serverMAC[si], dstMAC: port1MAC, src: serverAddr[si], dst: a, sport: 8080, dport: sport, flags: TCPSyn | TCPAck}
		r, _ = h.process(sa.build(t), 1)
		return r
	}
	// One neighbour holds at most holdPerNeighbour packets; the next is dropped and counted.
	for k := range holdPerNeighbour {
		if r := reply(0, uint16(5000+k)); r.Action != ActionHeld {
			t.Fatalf("packet %d for one neighbour: %+v, want held", k, r)
		}
	}
	if r := reply(0, 5100); r.Action != ActionDrop {
		t.Fatalf("packet past the neighbour's share: %+v, want drop", r)
	}
	// In total at most holdCapacity.
	held := holdPerNeighbour
	for c := 1; held < holdCapacity; c++ {
		for k := 0; k < holdPerNeighbour && held < holdCapacity; k++ {
			if r := reply(c, uint16(6000+k)); r.Action != ActionHeld {
				t.Fatalf("held %d: %+v", held, r)
			}
			held++
		}
	}
	if r := reply(100, 7000); r.Action != ActionDrop {
		t.Fatalf("packet past the queue's capacity: %+v, want drop", r)
	}
	if g := h.stats().Global; g.NextHopHeld != holdCapacity || g.NextHopHeldOverflow != 2 {
		t.Fatalf("NextHopHeld %d Overflow %d, want %d 2", g.NextHopHeld, g.NextHopHeldOverflow, holdCapacity)
	}
	// Nobody answers: after the hold timeout every held packet is dropped and counted, and the
	// queue takes packets again.
	h.advance(time.Duration(holdTimeout) + time.Millisecond)
	h.burst()
	h.control()
	h.burst()
	if g := h.stats().Global; g.NextHopHeldExpired != holdCapacity || g.NextHopHeldSent != 0 {
		t.Fatalf("NextHopHeldExpired %d Sent %d, want %d 0", g.NextHopHeldExpired, g.NextHopHeldSent, holdCapacity)
	}
	if h.e.heldq.waiting != 0 || len(h.e.heldq.free) != holdCapacity {
		t.Fatalf("queue after timeout: %d waiting, %d free", h.e.heldq.waiting, len(h.e.heldq.free))
	}
	if r := reply(101, 7001); r.Action != ActionHeld {
		t.Fatalf("after the timeout: %+v, want held", r)
	}
}

func TestUnknownServerMACKeepsConnection(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.burst()
	h.control() // proactive requests, unanswered
	h.arpReply(gwAddr, gwMAC, 0)
	if r, _ := h.process(client(1000, TCPSyn).build(t), 0); r.Action != ActionHeld {
		t.Fatalf("SYN to unresolved server: %+v, want held", r)
	}
	h.arpReply(serverAddr[0], serverMAC[0], 1)
	// The held SYN leaves as soon as the server answers ARP...
	got := h.control()
	if len(got) != 1 {
		t.Fatalf("%d frames after the server's ARP reply, want the held SYN", len(got))
	}
	expectReleased(t, got[0], 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	// ...and a retransmitted SYN follows the entry to the same server.
	r, out := h.process(client(1000, TCPSyn).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
}

// When the cache is full, recycling takes unconfigured entries first, and connections that
// cached a recycled slot notice (epoch) and resolve again instead of using a stranger's MAC.
func TestNeighbourCacheRecycling(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	e, err := New(Config{Ports: testPorts(), ConnCapacity: 64, Snapshot: h.snap, NeighbourCapacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.learnNeighbours()

	// An on-link client with a connection, so the reply direction caches its neighbour slot.
	local := netip.MustParseAddr("192.0.2.50")
	localMAC := [6]byte{0x02, 0, 0, 0, 5, 0}
	h.process(arpRequest(t, localMAC, local, port0Addr), 0)
	syn := pkt{srcMAC: localMAC, dstMAC: port0MAC, src: local, dst: vip, sport: 4000, dport: 80, flags: TCPSyn}
	r, out := h.process(syn.build(t), 0)
	si := serverIndex(t, decode(t, out).ip.DstIP)
	reply := pkt{srcMAC: serverMAC[si], dstMAC: port1MAC, src: serverAddr[si], dst: local, sport: 8080, dport: 4000, flags: TCPAck}
	r, out = h.process(reply.build(t), 1)
	expectForward(t, r, out, 0, localMAC, vip, local, 80, 4000, 63)

	// Thirty strangers ask for our address: the 16-slot cache must recycle.
	epoch := h.e.neigh.epoch
	for i := range 30 {
		a := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})
		h.process(arpRequest(t, [6]byte{0x02, 0, 0, 0, 8, byte(i)}, a, port0Addr), 0)
	}
	if h.e.neigh.epoch == epoch {
		t.Fatal("no slot was recycled")
	}
	// The configured next hops survived.
	for i, s := range serverAddr {
		if j := h.e.neigh.find(addrFromNetip(s), 1); j < 0 || h.e.neigh.slots[j].mac != serverMAC[i] {
			t.Fatalf("server %v was evicted", s)
		}
	}
	if j := h.e.neigh.find(addrFromNetip(gwAddr), 0); j < 0 {
		t.Fatal("gateway was evicted")
	}
	// The client was evicted; its reply is a miss now, never a stranger's MAC.
	if h.e.neigh.find(addrFromNetip(local), 0) >= 0 {
		t.Skip("client entry survived; nothing to check")
	}
	if r, _ := h.process(reply.build(t), 1); r.Action != ActionHeld {
		t.Fatalf("reply after eviction: %+v, want a neighbour miss (held)", r)
	}
	h.arpReply(local, localMAC, 0)
	if got := h.control(); len(got) != 1 {
		t.Fatalf("%d frames released, want 1", len(got))
	} else {
		expectReleased(t, got[0], 0, localMAC, vip, local, 80, 4000, 63)
	}
	r, out = h.process(reply.build(t), 1)
	expectForward(t, r, out, 0, localMAC, vip, local, 80, 4000, 63)
}
