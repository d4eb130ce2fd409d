package datapath

import (
	"encoding/binary"
	"slices"
	"testing"
)

// fixIPChecksum recomputes the IPv4 header checksum of an untagged frame after a test edited it.
func fixIPChecksum(b []byte) {
	ip := b[EthernetHeaderSize:]
	hl := int(ip[0]&0xf) * 4
	if hl < 20 || hl > len(ip) {
		return
	}
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], uint16(^refSum(ip[:hl])))
}

func TestMalformedDroppedAndCounted(t *testing.T) {
	l3 := EthernetHeaderSize
	l4 := l3 + IPv4MinSize
	tcpFrame := func(t *testing.T) []byte { return client(1000, TCPSyn).build(t) }
	udpFrame := func(t *testing.T) []byte {
		return pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 1, dport: 53, udp: true, payload: []byte("12345678")}.build(t)
	}
	cases := []struct {
		name   string
		frame  func(t *testing.T) []byte
		reason func(GlobalCounters) uint64
	}{
		{"empty", func(*testing.T) []byte { return nil }, ethReason},
		{"13 bytes", func(t *testing.T) []byte { return tcpFrame(t)[:13] }, ethReason},
		{"VLAN tag cut", func(t *testing.T) []byte {
			b := tcpFrame(t)[:16]
			binary.BigEndian.PutUint16(b[12:], EtherTypeVLAN)
			return b
		}, ethReason},
		{"ARP cut", func(t *testing.T) []byte {
			b := arpRequest(t, gwMAC, gwAddr, vip)
			return b[:l3+ARPSize-1]
		}, func(g GlobalCounters) uint64 { return g.MalformedARP }},
		{"IPv4 shorter than 20", func(t *testing.T) []byte { return tcpFrame(t)[:l3+19] }, ipReason},
		{"IP version 6 in IPv4 EtherType", func(t *testing.T) []byte {
			b := tcpFrame(t)
			b[l3] = 0x65
			fixIPChecksum(b)
			return b
		}, ipReason},
		{"IHL 4", func(t *testing.T) []byte {
			b := tcpFrame(t)
			b[l3] = 0x44
			return b
		}, ipReason},
		{"IHL beyond frame", func(t *testing.T) []byte {
			b := tcpFrame(t)[:l3+40]
			b[l3] = 0x4f
			return b
		}, ipReason},
		{"total length beyond frame", func(t *testing.T) []byte {
			b := tcpFrame(t)
			binary.BigEndian.PutUint16(b[l3+2:], 200)
			fixIPChecksum(b)
			return b
		}, ipReason},
		{"total length below header", func(t *testing.T) []byte {
			b := tcpFrame(t)
			binary.BigEndian.PutUint16(b[l3+2:], 19)
			fixIPChecksum(b)
			return b
		}, ipReason},
		{"frame cut inside TCP", func(t *testing.T) []byte { return tcpFrame(t)[:l4+10] }, ipReason},
		{"bad header checksum", func(t *testing.T) []byte {
			b := tcpFrame(t)
			b[l3+10] ^= 0x01
			return b
		}, func(g GlobalCounters) uint64 { return g.BadIPv4Checksum }},
		{"TCP shorter than 20", func(t *testing.T) []byte {
			b := tcpFrame(t)
			binary.BigEndian.PutUint16(b[l3+2:], 20+19)
			fixIPChecksum(b)
			return b
		}, l4Reason},
		{"TCP data offset 4", func(t *testing.T) []byte {
			b := tcpFrame(t)
			b[l4+12] = 0x40
			return b
		}, l4Reason},
		{"TCP data offset beyond packet", func(t *testing.T) []byte {
			b := tcpFrame(t)
			b[l4+12] = 0xf0
			return b
		}, l4Reason},
		{"UDP shorter than 8", func(t *testing.T) []byte {
			b := udpFrame(t)
			binary.BigEndian.PutUint16(b[l3+2:], 20+7)
			fixIPChecksum(b)
			return b
		}, l4Reason},
		{"UDP length below 8", func(t *testing.T) []byte {
			b := udpFrame(t)
			binary.BigEndian.PutUint16(b[l4+4:], 7)
			return b
		}, l4Reason},
		{"UDP length beyond packet", func(t *testing.T) []byte {
			b := udpFrame(t)
			binary.BigEndian.PutUint16(b[l4+4:], 17)
			return b
		}, l4Reason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 64, defaultRules())
			h.learnNeighbours()
			frame := c.frame(t)
			orig := slices.Clone(frame)
			before := h.stats().Global
			r, out := h.process(frame, 0)
			if r.Action != ActionDrop {
				t.Fatalf("action %v, want drop", r.Action)
			}
			if !slices.Equal(out, orig) {
				t.Fatal("malformed frame was modified")
			}
			g := h.stats().Global
			if g.Malformed != before.Malformed+1 || c.reason(g) != c.reason(before)+1 || g.Dropped != before.Dropped+1 {
				t.Fatalf("counters: malformed %d→%d, reason %d→%d", before.Malformed, g.Malformed, c.reason(before), c.reason(g))
			}
			if h.e.conns.count() != 0 {
				t.Fatal("connection created from a malformed frame")
			}
		})
	}
}

func ethReason(g GlobalCounters) uint64 { return g.MalformedEthernet }
func ipReason(g GlobalCounters) uint64  { return g.MalformedIPv4 }
func l4Reason(g GlobalCounters) uint64  { return g.MalformedL4 }

// Every prefix of valid frames must be handled without panic and never forwarded half-parsed.
func TestTruncatedFramesNeverPanic(t *testing.T) {
	h := newHarness(t, 64, defaultRules())
	h.learnNeighbours()
	connect(t, h, 1000)
	frames := [][]byte{
		client(1000, TCPAck).build(t),
		fromServer(0, 1000, TCPAck).build(t),
		pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true, vlan: 7}.build(t),
		arpRequest(t, gwMAC, gwAddr, vip),
	}
	for _, f := range frames {
		for n := 0; n <= len(f); n++ {
			b := slices.Clone(f[:n])
			r, _ := h.process(b, 0)
			if r.Len != n {
				t.Fatalf("len %d: Result.Len %d", n, r.Len)
			}
		}
	}
	if r, _ := h.process(client(1, TCPSyn).build(t), 7); r.Action != ActionDrop {
		t.Fatalf("unknown port: %+v", r)
	}
	if g := h.stats().Global; g.UnknownPort != 1 {
		t.Fatalf("UnknownPort %d", g.UnknownPort)
	}
}
