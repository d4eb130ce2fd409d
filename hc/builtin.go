package hc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

var errZeroTimeout = errors.New("hc-timeout is 0")

// microseconds returns the time since start in µs, at least 1 (ilb_probe's minimum).
func microseconds(start time.Time) int64 { return max(time.Since(start).Microseconds(), 1) }

// deadlineOnDone makes conn's pending and future I/O fail as soon as ctx is done.
func deadlineOnDone(ctx context.Context, conn interface{ SetDeadline(time.Time) error }) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// tcpProbe connects to dst before the deadline; success carries the connect time.
func tcpProbe(ctx context.Context, dst netip.AddrPort, deadline time.Time) Outcome {
	if dst.Port() == 0 {
		return Outcome{Err: errors.New("no port to probe")}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", dst.String())
	if err != nil {
		return Outcome{Err: err}
	}
	rtt := microseconds(start)
	c.Close()
	return Outcome{OK: true, RTT: rtt}
}

// udpProbe sends an empty datagram on a connected UDP socket and waits for an ICMP port
// unreachable, which the kernel reports on that socket as ECONNREFUSED: that (or any other
// error) is a failure; silence for the whole wait is success without an RTT; an answer is
// success with one.
func udpProbe(ctx context.Context, dst netip.AddrPort, wait time.Duration) Outcome {
	if dst.Port() == 0 {
		return Outcome{Err: errors.New("no port to probe")}
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return Outcome{Err: err}
	}
	defer c.Close()
	stop := deadlineOnDone(ctx, c)
	defer stop()
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(wait)); err != nil {
		return Outcome{Err: err}
	}
	if _, err := c.Write(nil); err != nil {
		return Outcome{Err: err}
	}
	var buf [512]byte
	_, err = c.Read(buf[:])
	switch {
	case err == nil:
		return Outcome{OK: true, RTT: microseconds(start)}
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil:
		return Outcome{OK: true}
	}
	return Outcome{Err: err}
}

// ping sends one ICMP (ICMPv6) echo request to dst and waits until the deadline for the
// matching reply: from dst, same identifier (raw sockets; the kernel owns it on datagram
// sockets), sequence number and random payload.
func ping(ctx context.Context, dst netip.Addr, deadline time.Time) Outcome {
	dst = dst.Unmap()
	v6 := dst.Is6()
	conn, raw, err := listenICMP(v6)
	if err != nil {
		return Outcome{Err: err}
	}
	defer conn.Close()
	stop := deadlineOnDone(ctx, conn)
	defer stop()
	if err := conn.SetDeadline(deadline); err != nil {
		return Outcome{Err: err}
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return Outcome{Err: err}
	}
	id, seq, cookie := int(binary.BigEndian.Uint16(rnd[0:])), int(binary.BigEndian.Uint16(rnd[2:])), rnd[4:]
	var typ, reply icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	proto := 1
	if v6 {
		typ, reply, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, 58
	}
	msg, err := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: cookie}}).Marshal(nil)
	if err != nil {
		return Outcome{Err: err}
	}
	var to net.Addr = &net.UDPAddr{IP: dst.AsSlice(), Zone: dst.Zone()}
	if raw {
		to = &net.IPAddr{IP: dst.AsSlice(), Zone: dst.Zone()}
	}
	start := time.Now()
	if _, err := conn.WriteTo(msg, to); err != nil {
		return Outcome{Err: err}
	}
	buf := make([]byte, 1500)
	for {
		// Bounded by the deadline: every read fails once it has passed.
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return Outcome{Err: fmt.Errorf("no echo reply: %w", err)}
		}
		if addrOf(from) != dst.WithZone("") {
			continue
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != reply {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || (raw && e.ID != id) || e.Seq != seq || !bytes.Equal(e.Data, cookie) {
			continue
		}
		return Outcome{OK: true, RTT: microseconds(start)}
	}
}

// listenICMP opens an unprivileged ICMP datagram socket (net.ipv4.ping_group_range) or,
// failing that, a raw one (CAP_NET_RAW). raw reports which.
func listenICMP(v6 bool) (conn *icmp.PacketConn, raw bool, err error) {
	dgram, rawNet, any := "udp4", "ip4:icmp", "0.0.0.0"
	if v6 {
		dgram, rawNet, any = "udp6", "ip6:ipv6-icmp", "::"
	}
	if conn, err = icmp.ListenPacket(dgram, any); err == nil {
		return conn, false, nil
	}
	if conn, err2 := icmp.ListenPacket(rawNet, any); err2 == nil {
		return conn, true, nil
	}
	return nil, false, fmt.Errorf("cannot open an ICMP socket: %w", err)
}

// addrOf returns the IP address of a socket address.
func addrOf(a net.Addr) netip.Addr {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	}
	ad, _ := netip.AddrFromSlice(ip)
	return ad.Unmap()
}
