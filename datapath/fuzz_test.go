package datapath

import (
	"encoding/binary"
	"slices"
	"testing"
)

// checksumsVerify reports whether an IPv4 TCP/UDP frame's header and transport checksums are
// valid (a UDP checksum of 0 counts as valid), and whether the frame was checkable at all.
func checksumsVerify(frame []byte) (ok, checkable bool) {
	var p Parsed
	if p.Decode(frame) != ParseOK || p.EtherType != EtherTypeIPv4 || p.Fragment || (p.Proto != ProtoTCP && p.Proto != ProtoUDP) {
		return false, false
	}
	ip := frame[p.L3Off:p.L4Off]
	seg := frame[p.L4Off:p.L3End]
	if p.Proto == ProtoUDP && binary.BigEndian.Uint16(seg[6:]) == 0 {
		return true, true
	}
	pseudo := make([]byte, 0, 12+len(seg))
	pseudo = append(pseudo, ip[12:20]...)
	pseudo = append(pseudo, 0, p.Proto, byte(len(seg)>>8), byte(len(seg)))
	pseudo = append(pseudo, seg...)
	return refSum(pseudo) == 0xffff, true
}

// FuzzProcess feeds arbitrary frames to an engine that has a rule, known neighbours and a live
// connection. It must never panic, must report Len within the frame, forward only on real ports,
// and keep checksums valid: a frame forwarded with valid checksums leaves with valid checksums.
func FuzzProcess(f *testing.F) {
	f.Add(client(1000, TCPSyn).build(f), uint8(0))
	f.Add(client(1000, TCPAck).build(f), uint8(0))
	f.Add(fromServer(0, 1000, TCPAck).build(f), uint8(1))
	f.Add(pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true, vlan: 5, ipOptions: true}.build(f), uint8(0))
	f.Add(arpFrame(f, 1, gwMAC, [6]byte{}, gwAddr, broadcastMAC, vip), uint8(0))
	f.Add(arpFrame(f, 2, serverMAC[2], port1MAC, serverAddr[2], port1MAC, port1Addr), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, in uint8) {
		h := newHarness(t, 16, defaultRules())
		h.learnNeighbours()
		connect(t, h, 1000)
		frame := make([]byte, len(data), len(data)+32)
		copy(frame, data)
		if in&0x80 != 0 {
			// Let mutated headers past the IPv4 checksum check, to reach classification and NAT.
			fixFuzzIPChecksum(frame)
		}
		before := slices.Clone(frame)
		validBefore, _ := checksumsVerify(frame)
		r, out := h.process(frame, uint16(in&0x7f%3)) // port 2 does not exist
		if r.Len > cap(frame) || r.Len != len(data) {
			t.Fatalf("Len %d for a %d-byte frame (cap %d)", r.Len, len(data), cap(frame))
		}
		switch r.Action {
		case ActionForward:
			if r.Port > 1 {
				t.Fatalf("forward on port %d", r.Port)
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
