package datapath

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ilbgo/ilb/rules"
)

// checksumsVerify reports whether an IPv4 or IPv6 frame's header and transport (TCP, UDP, ICMP,
// ICMPv6) checksums are valid (an IPv4 UDP checksum of 0 counts as valid), and whether the
// frame was checkable at all.
func checksumsVerify(frame []byte) (ok, checkable bool) {
	var p Parsed
	if p.Decode(frame) != ParseOK || (p.EtherType != EtherTypeIPv4 && p.EtherType != EtherTypeIPv6) || p.Fragment || p.ExtOther {
		return false, false
	}
	seg := frame[p.L4Off:p.L3End]
	var pseudo []byte
	switch {
	case p.Proto == ProtoTCP || p.Proto == ProtoUDP || (p.isV6() && p.Proto == ProtoICMPv6):
		if p.Proto == ProtoUDP && !p.isV6() && binary.BigEndian.Uint16(seg[6:]) == 0 {
			return true, true
		}
		src, dst := p.Src().AsSlice(), p.Dst().AsSlice()
		pseudo = refPseudo(src, dst, p.Proto, len(seg))
	case !p.isV6() && p.Proto == ProtoICMP:
	default:
		return false, false
	}
	return refSum(append(pseudo, seg...)) == 0xffff, true
}

// fuzzWorld is a small world: every topology and family, persistence on two rules, small tables,
// known neighbours and live connections of each NAT kind, so mutated replies and ICMP errors can
// hit real entries. The setup frames are built once and replayed, which keeps the fuzzer fast.
func fuzzWorld(t *testing.T) *harness {
	fuzzSetupOnce.Do(func() { fuzzSetupFrames = buildFuzzSetup(t) })
	h := &harness{t: t, snap: new(atomicPointerSnapshot), now: int64(time.Hour)}
	h.setRules(stickyRules(24, ruleWeb6, ruleDSR))
	e, err := New(Config{Ports: worldPorts(), Snapshot: h.snap, ConnCapacity: 16, StickyCapacity: 8, NeighbourCapacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	e.ctr.interval = 0
	h.e = e
	h.burst()
	h.control()
	for _, f := range fuzzSetupFrames {
		if r, _ := h.process(slices.Clone(f.frame), f.port); r.Action == ActionDrop {
			t.Fatalf("fuzz world setup frame dropped: %x", f.frame)
		}
	}
	return h
}

var (
	fuzzSetupOnce   sync.Once
	fuzzSetupFrames []controlFrame
)

// buildFuzzSetup returns the frames that teach the fuzz world its neighbours and open one TCP
// connection per NAT topology and family plus the default half-NAT one (client port 1000).
func buildFuzzSetup(t testing.TB) []controlFrame {
	var fs []controlFrame
	fs = append(fs, controlFrame{arpFrame(t, 2, gwMAC, port0MAC, gwAddr, port0MAC, port0Addr), 0})
	for i := range serverAddr {
		fs = append(fs, controlFrame{arpFrame(t, 2, serverMAC[i], port1MAC, serverAddr[i], port1MAC, port1Addr), 1})
	}
	fs = append(fs, controlFrame{naFrame(t, gwMAC, gwAddr6, port0MAC, port0Addr6, gwAddr6, ndpFlagSolicit|ndpFlagOverr, true, 255), 0})
	for i := range serverAddr6 {
		fs = append(fs, controlFrame{naFrame(t, serverMAC[i], serverAddr6[i], port1MAC, port1Addr6, serverAddr6[i], ndpFlagSolicit|ndpFlagOverr, true, 255), 1})
	}
	for _, c := range allTopoCases() {
		if c.topo == rules.TopoDSR || c.udp {
			continue
		}
		p, _ := benchFlow(c)
		p.flags = TCPSyn
		fs = append(fs, controlFrame{p.build(t), 0})
	}
	return append(fs, controlFrame{client(1000, TCPSyn).build(t), 0})
}

// fuzzSeeds are the frames FuzzProcess starts from, by name (also written to testdata by
// TestWriteFuzzSeeds). The port byte's high bits ask the target to fix checksums.
func fuzzSeeds(t testing.TB) map[string]struct {
	frame []byte
	in    uint8
} {
	type seed = struct {
		frame []byte
		in    uint8
	}
	known6 := pkt{src: vipNAT6, dst: clientAddr6, sport: 80, dport: 1000, ttl: 63, flags: TCPAck}
	known4 := pkt{src: vipNAT, dst: clientAddr, sport: 80, dport: 1000, ttl: 63, flags: TCPAck}
	toServer4 := pkt{src: proxy4[1], dst: serverAddr[0], sport: 4096, dport: 8080, ttl: 63, flags: TCPAck}
	toServer6 := pkt{src: proxy6[1], dst: serverAddr6[0], sport: 4096, dport: 8080, ttl: 63, flags: TCPAck}
	return map[string]seed{
		"ipv6_syn_to_vip":         {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1000, dport: 80, flags: TCPSyn}.build(t), 0},
		"ipv6_reply_halfnat":      {pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr6[0], dst: clientAddr6, sport: 8080, dport: 1000, flags: TCPAck}.build(t), 1},
		"ipv6_udp_to_vip":         {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 9, dport: 53, udp: true, payload: []byte("q")}.build(t), 0},
		"ipv6_hopbyhop_to_vip":    {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1001, dport: 80, flags: TCPSyn, ext6: extHopByHop}.build(t), 0},
		"ipv6_routing_to_vip":     {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1001, dport: 80, ext6: extRouting}.build(t), 0},
		"ipv6_fragment_to_vip":    {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, sport: 1001, dport: 80, fragment: true}.build(t), 0},
		"fullnat_syn":             {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipNAT, sport: 1001, dport: 80, flags: TCPSyn}.build(t), 0},
		"fullnat_reply_to_proxy":  {pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr[0], dst: proxy4[1], sport: 8080, dport: 4096, flags: TCPAck}.build(t), 1},
		"fullnat6_reply_to_proxy": {pkt{srcMAC: serverMAC[0], dstMAC: port1MAC, src: serverAddr6[0], dst: proxy6[1], sport: 8080, dport: 4096, flags: TCPAck | TCPFin}.build(t), 1},
		"dsr_tcp":                 {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vipDSR, sport: 7, dport: 80, flags: TCPAck}.build(t), 0},
		"dsr6_udp":                {pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipDSR6, sport: 7, dport: 53, udp: true}.build(t), 0},
		"icmp_echo_vip":           {icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, typ: 8, rest: 1, body: []byte("ping")}.build(t), 0},
		"icmp6_echo_vip":          {icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vip6, typ: 128, rest: 1, body: []byte("ping")}.build(t), 0},
		"icmp_fragneeded_vip":     {tooBig(gwAddr, gwMAC, port0MAC, vipNAT, ipPacket(known4.build(t)), 0).build(t), 0},
		"icmp_fragneeded_proxy":   {tooBig(serverAddr[1], serverMAC[1], port1MAC, proxy4[1], ipPacket(toServer4.build(t)), 28).build(t), 1},
		"icmp6_ptb_vip":           {tooBig(gwAddr6, gwMAC, port0MAC, vipNAT6, ipPacket(known6.build(t)), 0).build(t), 0},
		"icmp6_ptb_proxy":         {tooBig(serverAddr6[1], serverMAC[1], port1MAC, proxy6[1], ipPacket(toServer6.build(t)), 48).build(t), 1},
		"icmp_timeexceeded_vip":   {icmpMsg{srcMAC: gwMAC, dstMAC: port0MAC, src: gwAddr, dst: vip, typ: 11}.build(t), 0},
		"ndp_ns_vip6":             {nsFrame(t, gwMAC, gwAddr6, snMulticast(vip6), vip6, true, 255), 0},
		"ndp_ns_nud_proxy6":       {nsFrame(t, serverMAC[0], serverAddr6[0], proxy6[0], proxy6[0], false, 255), 1},
		"ndp_ns_dad":              {nsFrame(t, otherHostMAC, netip.IPv6Unspecified(), snMulticast(port0LL), port0LL, false, 255), 0},
		"ndp_na_server":           {naFrame(t, serverMAC[2], serverAddr6[2], port1MAC, port1Addr6, serverAddr6[2], ndpFlagSolicit|ndpFlagOverr, true, 255), 1},
	}
}

// FuzzProcess feeds arbitrary frames to an engine with rules of every topology and family,
// known neighbours and live connections. It must never panic, must report Len within the
// frame's capacity (and unchanged unless it answers), forward only on real ports, never modify a
// frame it passes, and keep checksums valid: a frame forwarded with valid checksums leaves with
// valid checksums, and what it forwards parses.
func FuzzProcess(f *testing.F) {
	f.Add(client(1000, TCPSyn).build(f), uint8(0))
	f.Add(client(1000, TCPAck).build(f), uint8(0))
	f.Add(fromServer(0, 1000, TCPAck).build(f), uint8(1))
	f.Add(pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true, vlan: 5, ipOptions: true}.build(f), uint8(0))
	f.Add(arpFrame(f, 1, gwMAC, [6]byte{}, gwAddr, broadcastMAC, vip), uint8(0))
	f.Add(arpFrame(f, 2, serverMAC[2], port1MAC, serverAddr[2], port1MAC, port1Addr), uint8(1))
	for _, s := range fuzzSeeds(f) {
		f.Add(s.frame, s.in)
	}
	f.Fuzz(func(t *testing.T, data []byte, in uint8) {
		h := fuzzWorld(t)
		frame := make([]byte, len(data), len(data)+32)
		copy(frame, data)
		if in&0x80 != 0 {
			// Let mutated headers past the IPv4 checksum check, to reach classification and NAT.
			fixFuzzIPChecksum(frame)
		}
		if in&0x40 != 0 {
			// Let mutated ICMP and NDP past their checksum checks.
			fixFuzzL4Checksum(frame)
		}
		before := slices.Clone(frame)
		validBefore, _ := checksumsVerify(frame)
		r, out := h.process(frame, uint16(in&0x3f%3)) // port 2 does not exist
		if r.Len > cap(frame) || (r.Action != ActionForward && r.Len != len(data)) {
			t.Fatalf("Len %d for a %d-byte frame (cap %d), action %d", r.Len, len(data), cap(frame), r.Action)
		}
		switch r.Action {
		case ActionForward:
			if r.Port > 1 {
				t.Fatalf("forward on port %d", r.Port)
			}
			var p Parsed
			if st := p.Decode(out); st != ParseOK {
				t.Fatalf("forwarded a frame that does not parse (%v):\nin  %x\nout %x", st, before, out)
			}
			if validBefore {
				if ok, _ := checksumsVerify(out); !ok {
					t.Fatalf("valid frame forwarded with a bad checksum:\nin  %x\nout %x", before, out)
				}
			}
		case ActionDrop, ActionPass:
			if r.Action == ActionPass && !slices.Equal(out, before) {
				t.Fatal("passed frame was modified")
			}
		default:
			t.Fatalf("action %d", r.Action)
		}
		h.burst()
		h.control()
	})
}

// fixFuzzIPChecksum rewrites the IPv4 header checksum of a (possibly tagged) frame when its IHL
// fits the frame.
func fixFuzzIPChecksum(b []byte) {
	if len(b) < EthernetHeaderSize {
		return
	}
	off := EthernetHeaderSize
	if binary.BigEndian.Uint16(b[12:]) == EtherTypeVLAN {
		off += VLANTagSize
	}
	if len(b) < off+IPv4MinSize {
		return
	}
	ip := b[off:]
	hl := int(ip[0]&0xf) * 4
	if hl < IPv4MinSize || hl > len(ip) {
		return
	}
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], uint16(^refSum(ip[:hl])))
}

// fixFuzzL4Checksum rewrites the transport checksum of a frame the engine's parser accepts.
func fixFuzzL4Checksum(b []byte) {
	var p Parsed
	if p.Decode(b) != ParseOK || (p.EtherType != EtherTypeIPv4 && p.EtherType != EtherTypeIPv6) || p.Fragment || p.ExtOther {
		return
	}
	seg := b[p.L4Off:p.L3End]
	off := -1
	var pseudo []byte
	switch {
	case p.Proto == ProtoTCP:
		off = 16
	case p.Proto == ProtoUDP:
		off = 6
	case p.Proto == ProtoICMP && !p.isV6(), p.Proto == ProtoICMPv6 && p.isV6():
		off = 2
	}
	if off < 0 || len(seg) < off+2 {
		return
	}
	if !(p.Proto == ProtoICMP && !p.isV6()) {
		pseudo = refPseudo(p.Src().AsSlice(), p.Dst().AsSlice(), p.Proto, len(seg))
	}
	seg[off], seg[off+1] = 0, 0
	sum := uint16(^refSum(append(pseudo, seg...)))
	if sum == 0 && p.Proto == ProtoUDP {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(seg[off:], sum)
}

// TestWriteFuzzSeeds writes fuzzSeeds to testdata/fuzz/FuzzProcess when ILB_WRITE_FUZZ_SEEDS is
// set, so the committed corpus can be regenerated after the test world changes.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("ILB_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set ILB_WRITE_FUZZ_SEEDS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzProcess")
	for name, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\nbyte(%s)\n", strconv.Quote(string(s.frame)), strconv.QuoteRune(rune(s.in)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
