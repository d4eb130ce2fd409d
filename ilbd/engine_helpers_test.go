package main

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// A small engine world for the tables tests: ilbd's port MAC, a client and three servers.
var (
	benchMAC    = [6]byte{0x02, 0, 0, 0, 0xbe, 0x01}
	benchClient = [6]byte{0x02, 0, 0, 0, 0xbe, 0x02}
	benchVIP    = netip.MustParseAddr("203.0.113.10")
	benchServer = []netip.Addr{netip.MustParseAddr("192.0.2.11"), netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("192.0.2.13")}
)

// benchSegment builds a 64-byte TCP segment to ilbd's port with tcp's flags and numbers.
func benchSegment(srcMAC [6]byte, src, dst netip.Addr, sport, dport uint16, tcp *layers.TCP) ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(srcMAC[:]), DstMAC: net.HardwareAddr(benchMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	tcp.SrcPort, tcp.DstPort, tcp.Window = layers.TCPPort(sport), layers.TCPPort(dport), 512
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, tcp, gopacket.Payload(make([]byte, 6)))
	return buf.Bytes(), err
}
