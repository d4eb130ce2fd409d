package datapath

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// decodeGeneral decodes frame with the general parser only, which Decode's fast paths must match.
func decodeGeneral(frame []byte) (Parsed, ParseStatus) {
	var p Parsed
	st := p.decodeOther(frame)
	return p, st
}

// FuzzDecodeFastPath checks that Decode, with its straight-line untagged IPv4 and IPv6 paths,
// returns what the general parser returns, status and every field, for any frame.
func FuzzDecodeFastPath(f *testing.F) {
	f.Add(client(1000, TCPAck).build(f), false)
	f.Add(pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true}.build(f), true)
	f.Add(pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 9, dport: 53, udp: true, ipOptions: true}.build(f), true)
	for _, c := range allTopoCases() {
		p, _ := benchFlow(c)
		f.Add(p.build(f), false)
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(s.frame, true)
	}
	f.Fuzz(func(t *testing.T, frame []byte, fixIP bool) {
		frame = slices.Clone(frame)
		if fixIP {
			fixFuzzIPChecksum(frame) // past the header checksum, to the transport header
		}
		var got Parsed
		st := got.Decode(frame)
		want, wst := decodeGeneral(frame)
		if st != wst || got != want {
			t.Fatalf("frame %x:\nDecode  %v %+v\ngeneral %v %+v", frame, st, got, wst, want)
		}
	})
}

// TestIPv4HeaderChecksumFast checks the option-less and the general header check against the
// naive sum, on random headers and their one-bit corruptions.
func TestIPv4HeaderChecksumFast(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		hl := IPv4MinSize + 4*r.IntN(11)
		h := make([]byte, hl)
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		if i%3 == 0 {
			h[10], h[11] = 0, 0
			s := ^uint16(refSum(h))
			h[10], h[11] = byte(s>>8), byte(s)
		}
		want := refSum(h) == 0xffff
		if got := ipv4HeaderValid(h); got != want {
			t.Fatalf("ipv4HeaderValid(%x) = %v, want %v", h, got, want)
		}
		if got := ipv4Header20Valid((*[IPv4MinSize]byte)(h)); hl == IPv4MinSize && got != want {
			t.Fatalf("ipv4Header20Valid(%x) = %v, want %v", h, got, want)
		}
		if want {
			bit := r.IntN(8 * hl)
			h[bit/8] ^= 1 << (bit % 8)
			if ipv4HeaderValid(h) {
				t.Fatalf("corrupted header %x (bit %d) verifies", h, bit)
			}
		}
	}
}

// TestChecksumSumWide checks the eight-bytes-a-load sum against the naive one for every length
// and tail, including all-ones data, where the carries are largest.
func TestChecksumSumWide(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n <= 300; n++ {
		for _, fill := range []int{-1, 0xff, 0} {
			b := make([]byte, n)
			for j := range b {
				if fill < 0 {
					b[j] = byte(r.Uint32())
				} else {
					b[j] = byte(fill)
				}
			}
			for _, init := range []uint32{0, 0xffff, 0x1fffe, ^uint32(0)} {
				want := refSum(b) + init&0xffff + init>>16
				for want > 0xffff {
					want = want&0xffff + want>>16
				}
				if got := csumFold(checksumSum(b, init)); uint32(got) != want {
					t.Fatalf("len %d fill %d init %#x: sum %#x, want %#x", n, fill, init, got, want)
				}
			}
		}
	}
}
