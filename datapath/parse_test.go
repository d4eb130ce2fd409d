package datapath

import "testing"

func TestDecodeOffsets(t *testing.T) {
	var p Parsed
	f := client(1234, TCPSyn|TCPAck).build(t)
	if st := p.Decode(f); st != ParseOK {
		t.Fatal(st)
	}
	if p.EtherType != EtherTypeIPv4 || p.Tagged || p.L3Off != 14 || p.L4Off != 34 || p.L3End != 54 || p.IPLen != 40 {
		t.Fatalf("%+v", p)
	}
	if p.Proto != ProtoTCP || p.SrcPort != 1234 || p.DstPort != 80 || p.TCPFlags != TCPSyn|TCPAck {
		t.Fatalf("%+v", p)
	}
	if p.Src() != clientAddr || p.Dst() != vip {
		t.Fatalf("addresses %v %v", p.Src(), p.Dst())
	}

	q := pkt{srcMAC: gwMAC, dstMAC: port0MAC, src: clientAddr, dst: vip, sport: 7, dport: 53, udp: true, vlan: 100, ipOptions: true, payload: []byte("abcd")}
	if st := p.Decode(q.build(t)); st != ParseOK {
		t.Fatal(st)
	}
	if !p.Tagged || p.L3Off != 18 || p.L4Off != 18+24 || p.L3End != 18+24+12 || p.Proto != ProtoUDP || p.DstPort != 53 {
		t.Fatalf("%+v", p)
	}
}
