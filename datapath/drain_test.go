package datapath

import (
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

func drainRules(drain time.Duration, mod func(r *rules.SnapRule)) []rules.SnapRule {
	rs := defaultRules()
	rs[0].ConnDrain = drain
	if mod != nil {
		mod(&rs[0])
	}
	return rs
}

// A disabled server's established connections keep working; new ones avoid it; with
// conn-drain they are cut once the deadline passes (spec §6.9).
func TestConnDrainDisabledServer(t *testing.T) {
	h := newHarness(t, 64, drainRules(30*time.Second, nil))
	h.learnNeighbours()
	for sp := uint16(1000); sp < 1003; sp++ {
		if i := connect(t, h, sp); i != int(sp-1000) {
			t.Fatalf("flow %d to %d", sp, i)
		}
	}
	h.setRules(drainRules(30*time.Second, func(r *rules.SnapRule) { r.Servers[0].Enabled = false }))
	h.burst() // the deadline starts when the engine sees the change
	for sp := uint16(2000); sp < 2006; sp++ {
		if i := connect(t, h, sp); i == 0 {
			t.Fatal("new flow to the disabled server")
		}
	}
	h.advance(29 * time.Second)
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	r, out = h.process(fromServer(0, 1000, TCPAck).build(t), 1)
	expectForward(t, r, out, 0, gwMAC, vip, clientAddr, 80, 1000, 63)

	h.advance(2 * time.Second) // past the deadline
	if r, _ := h.process(fromServer(0, 1000, TCPAck).build(t), 1); r.Action != ActionPass {
		t.Fatalf("server packet of a drained connection: %+v", r)
	}
	// The client's next packet opens nothing (only a SYN does); its new connection goes to an
	// enabled server.
	if r, _ := h.process(client(1000, TCPAck).build(t), 0); r.Action != ActionDrop {
		t.Fatalf("ACK of a drained connection: %+v, want drop", r)
	}
	r, out = h.process(client(1000, TCPSyn).build(t), 0)
	if d := expectForwardAny(t, r, out); d == serverAddr[0] {
		t.Fatal("drained client went back to the disabled server")
	}
	// Connections to enabled servers were not touched.
	r, out = h.process(client(1001, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[1], clientAddr, serverAddr[1], 1001, 8080, 63)
	h.burst()
	if g := h.stats().Global; g.ConnDrained != 1 {
		t.Fatalf("ConnDrained %d", g.ConnDrained)
	}
}

func expectForwardAny(t *testing.T, r Result, out []byte) (dst any) {
	t.Helper()
	if r.Action != ActionForward {
		t.Fatalf("%+v", r)
	}
	verifyChecksums(t, out)
	return decode(t, out).dst()
}

// Re-enabling clears the deadline; conn-drain 0 waits for a graceful close.
func TestConnDrainClearedAndUnlimited(t *testing.T) {
	for _, drain := range []time.Duration{10 * time.Second, 0} {
		h := newHarness(t, 64, drainRules(drain, nil))
		h.learnNeighbours()
		connect(t, h, 1000) // server 0
		h.setRules(drainRules(drain, func(r *rules.SnapRule) { r.Servers[0].Enabled = false }))
		h.burst()
		if drain > 0 {
			h.advance(5 * time.Second)
			h.setRules(drainRules(drain, nil)) // enabled again before the deadline
			h.burst()
		}
		for range 4 {
			h.advance(8 * time.Second)
			r, out := h.process(client(1000, TCPAck).build(t), 0)
			expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
		}
	}
}

// Removing a server, or deleting the rule, drains the same way; the sweep cuts connections
// nobody sends on.
func TestConnDrainRemovedServerAndDeletedRule(t *testing.T) {
	h := newHarness(t, 64, drainRules(20*time.Second, nil))
	h.learnNeighbours()
	connect(t, h, 1000) // server 0
	connect(t, h, 1001) // server 1
	h.setRules(drainRules(20*time.Second, func(r *rules.SnapRule) { r.Servers = r.Servers[1:] }))
	h.burst()
	h.advance(10 * time.Second)
	r, out := h.process(client(1000, TCPAck).build(t), 0)
	expectForward(t, r, out, 1, serverMAC[0], clientAddr, serverAddr[0], 1000, 8080, 63)
	h.advance(11 * time.Second)
	h.scan() // the sweep, not a packet, cuts it
	if n := h.e.conns.count(); n != 1 {
		t.Fatalf("%d entries after the removed server's deadline, want 1", n)
	}
	// Delete the rule: its last connection drains too, then its counters go.
	h.setRules(defaultRules()[1:])
	h.burst()
	h.advance(21 * time.Second)
	h.scan()
	if n := h.e.conns.count(); n != 0 {
		t.Fatalf("%d entries after the deleted rule's deadline", n)
	}
	for _, r := range h.stats().Rules {
		if r.ID == ruleWeb {
			t.Fatal("deleted rule still listed after draining")
		}
	}
}
