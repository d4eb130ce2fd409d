package datapath

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/ilbgo/ilb/rules"
)

// refCRC is a bit-at-a-time MSB-first CRC-32 (poly 0x04c11db7, init ~0, no final xor), the
// Solaris CRC32 macro's arithmetic, written independently of the package's table.
func refCRC(b []byte) uint32 {
	crc := ^uint32(0)
	for _, x := range b {
		crc ^= uint32(x) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestCRCMatchesReference(t *testing.T) {
	// The catalogued check value of CRC-32/MPEG-2 for "123456789".
	if got := refCRC([]byte("123456789")); got != 0x0376e6e7 {
		t.Fatalf("reference CRC %#x", got)
	}
	for _, s := range []string{"192.0.2.1", "203.0.113.7", "2001:db8::1", "::ffff:1.2.3.4", "fe80::1"} {
		a := netip.MustParseAddr(s)
		if got, want := crc32Addr(addrFromNetip(a)), refCRC(a.Unmap().AsSlice()); got != want {
			t.Fatalf("%v: %#x, want %#x", a, got, want)
		}
	}
}

// refKey builds the algorithm's key bytes as spec §6.6 describes them.
func refKey(algo rules.Algo, src, dst netip.Addr, sport uint16) []byte {
	k := src.AsSlice()
	n := len(k)
	switch algo {
	case rules.AlgoHashIPPort:
		v := binary.BigEndian.Uint32(k[n-4:]) ^ uint32(sport)<<16 ^ uint32(sport)
		binary.BigEndian.PutUint32(k[n-4:], v)
	case rules.AlgoHashIPVIP:
		d := dst.AsSlice()
		for i := range k {
			k[i] ^= d[i]
		}
	}
	return k
}

// hashRules returns the web rules (TCP :80, v4 and v6) with algorithm algo.
func hashRules(algo rules.Algo, enabled ...bool) []rules.SnapRule {
	rs := worldRules()
	for i := range rs {
		rs[i].Algo = algo
		for j := range rs[i].Servers {
			if j < len(enabled) {
				rs[i].Servers[j].Enabled = enabled[j]
			}
		}
	}
	return rs
}

// balance sends a SYN and returns the index of the server it went to.
func balance(t *testing.T, h *harness, src, dst netip.Addr, sport uint16) int {
	t.Helper()
	p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: src, dst: dst, sport: sport, dport: 80, flags: TCPSyn}
	r, out := h.process(p.build(t), 0)
	if r.Action != ActionForward {
		t.Fatalf("%v:%d → %v: %+v", src, sport, dst, r)
	}
	sv := serverAddr
	if src.Is6() {
		sv = serverAddr6
	}
	got := decode(t, out).dst()
	for i, s := range sv {
		if s == got {
			return i
		}
	}
	if got == dst { // DSR
		return serverIndexOfMAC(t, decode(t, out).eth.DstMAC)
	}
	t.Fatalf("went to %v", got)
	return -1
}

// The hash algorithms choose CRC32(key) mod N over all servers, the same server for every
// flow with the same key, spread evenly.
func TestHashAlgorithmsChooseCRCModN(t *testing.T) {
	for _, algo := range []rules.Algo{rules.AlgoHashIP, rules.AlgoHashIPPort, rules.AlgoHashIPVIP} {
		for _, v6 := range []bool{false, true} {
			t.Run(fmt.Sprint(algo, v6), func(t *testing.T) {
				h := newWorld(t, hashRules(algo), func(c *Config) { c.ConnCapacity = 8192 })
				v := vip
				if v6 {
					v = vip6
				}
				var per [3]int
				for k := range 600 {
					src := netip.AddrFrom4([4]byte{203, 0, byte(113 + k/250), byte(k % 250)})
					if v6 {
						// Clients differing only above the low 32 bits: Solaris would send all
						// of them to one server; the whole address is hashed here.
						src = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(k >> 8), byte(k), 15: 1})
					}
					sport := uint16(1024 + k)
					i := balance(t, h, src, v, sport)
					if want := int(refCRC(refKey(algo, src, v, sport)) % 3); i != want {
						t.Fatalf("client %v:%d went to %d, CRC mod 3 is %d", src, sport, i, want)
					}
					per[i]++
					// Stability: another flow of the same client.
					sport2 := sport
					if algo != rules.AlgoHashIPPort {
						sport2 += 10000
					}
					if j := balance(t, h, src, v, sport2); j != i && algo != rules.AlgoHashIPPort {
						t.Fatalf("client %v moved from %d to %d", src, i, j)
					}
				}
				for i, n := range per {
					if n < 150 {
						t.Fatalf("server %d got %d of 600: %v", i, n, per)
					}
				}
			})
		}
	}
}

// A disabled server's clients are re-hashed over the enabled servers only (CRC mod M); every
// other client keeps its server.
func TestHashRehashOnDisabledServer(t *testing.T) {
	h := newWorld(t, hashRules(rules.AlgoHashIP), func(c *Config) { c.ConnCapacity = 4096 })
	before := map[netip.Addr]int{}
	for k := range 300 {
		src := netip.AddrFrom4([4]byte{203, 0, 113, byte(k)})
		if k >= 250 {
			src = netip.AddrFrom4([4]byte{203, 0, 114, byte(k)})
		}
		before[src] = balance(t, h, src, vip, 1000)
	}
	h.setRules(hashRules(rules.AlgoHashIP, true, false, true))
	moved := 0
	for src, i := range before {
		j := balance(t, h, src, vip, 2000)
		crc := refCRC(src.AsSlice())
		switch {
		case i != 1 && j != i:
			t.Fatalf("client %v of an enabled server moved %d → %d", src, i, j)
		case i == 1:
			if want := []int{0, 2}[crc%2]; j != want {
				t.Fatalf("client %v re-hashed to %d, want %d", src, j, want)
			}
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no client was on the disabled server")
	}
	// All disabled: dropped.
	h.setRules(hashRules(rules.AlgoHashIP, false, false, false))
	p := client(3000, TCPSyn)
	if r, _ := h.process(p.build(t), 0); r.Action != ActionDrop {
		t.Fatalf("no enabled server: %+v", r)
	}
}

// DSR with a hash keeps a flow on one server across packets (the other half of
// TestDSRRoundRobinPerPacketHashPerFlow, over IPv6).
func TestDSRHashIPv6(t *testing.T) {
	h := newWorld(t, nil, nil)
	first := -1
	for k := range 20 {
		p := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr6, dst: vipDSR6, sport: uint16(2000 + k), dport: 53, udp: true}
		r, out := h.process(p.build(t), 0)
		i := serverIndexOfMAC(t, decode(t, out).eth.DstMAC)
		expectForward(t, r, out, 1, serverMAC[i], clientAddr6, vipDSR6, uint16(2000+k), 53, 63)
		if want := int(refCRC(clientAddr6.AsSlice()) % 3); i != want {
			t.Fatalf("server %d, want %d", i, want)
		}
		if first >= 0 && i != first {
			t.Fatal("moved")
		}
		first = i
	}
}
