package lab

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Capture reads the frames a lab interface receives through an AF_PACKET socket, the way
// DPDK's net_af_packet does. For tests and debugging.
type Capture struct {
	fd int
}

// StartCapture opens a packet socket on dev inside the lab namespace nsName (one of
// Namespaces()).
func (l *Lab) StartCapture(nsName, dev string) (*Capture, error) {
	h, ok := l.handles[nsName]
	if !ok {
		return nil, fmt.Errorf("namespace %s is not part of this lab", nsName)
	}
	c := &Capture{fd: -1}
	err := inNS(h, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := htons(unix.ETH_P_ALL)
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return err
		}
		c.fd = fd
		// Room for a few thousand frames, so that a test can look at all of them after
		// its traffic (Drain); Drops tells if some were lost nevertheless.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index})
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("capture on %s/%s: %w", nsName, dev, err)
	}
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Next returns the next frame received (not sent) on the interface for which match returns
// true (nil: any), waiting at most timeout in total.
func (c *Capture) Next(timeout time.Duration, match func([]byte) bool) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 65536)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, errors.New("capture: timed out")
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, err
		}
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if match == nil || match(buf[:n]) {
			return append([]byte(nil), buf[:n]...), nil
		}
	}
}

// Close closes the socket.
func (c *Capture) Close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// Drain reads every frame already queued on the socket (received, not sent) without
// waiting, and returns how many there were and the ones for which match returns true
// (nil: all of them).
func (c *Capture) Drain(match func([]byte) bool) (total int, matched [][]byte, err error) {
	buf := make([]byte, 65536)
	for total < 1_000_000 {
		n, from, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EAGAIN) {
			return total, matched, nil
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return total, matched, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		total++
		if match == nil || match(buf[:n]) {
			matched = append(matched, append([]byte(nil), buf[:n]...))
		}
	}
	return total, matched, nil
}

// IPHeader returns the source and destination address and the L4 protocol of an Ethernet
// frame carrying IPv4 or IPv6 (one VLAN tag allowed); ok is false for anything else.
func IPHeader(f []byte) (src, dst net.IP, proto uint8, ok bool) {
	if len(f) < 14 {
		return nil, nil, 0, false
	}
	et := uint16(f[12])<<8 | uint16(f[13])
	p := f[14:]
	if et == 0x8100 && len(f) >= 18 {
		et = uint16(f[16])<<8 | uint16(f[17])
		p = f[18:]
	}
	switch {
	case et == 0x0800 && len(p) >= 20:
		return net.IP(p[12:16]), net.IP(p[16:20]), p[9], true
	case et == 0x86dd && len(p) >= 40:
		return net.IP(p[8:24]), net.IP(p[24:40]), p[6], true
	}
	return nil, nil, 0, false
}

// To matches frames carrying an IP packet addressed to ip.
func To(ip string) func([]byte) bool {
	want := net.ParseIP(ip)
	return func(f []byte) bool {
		_, dst, _, ok := IPHeader(f)
		return ok && dst.Equal(want)
	}
}

// FromTo matches frames carrying an IP packet from src to dst.
func FromTo(src, dst string) func([]byte) bool {
	ws, wd := net.ParseIP(src), net.ParseIP(dst)
	return func(f []byte) bool {
		s, d, _, ok := IPHeader(f)
		return ok && s.Equal(ws) && d.Equal(wd)
	}
}

// Describe summarises a frame for messages ("IPv4 192.0.2.11 -> 198.51.100.2 proto 6").
func Describe(f []byte) string {
	s, d, p, ok := IPHeader(f)
	if !ok {
		if len(f) >= 14 {
			return fmt.Sprintf("ethertype %#04x, %d bytes", uint16(f[12])<<8|uint16(f[13]), len(f))
		}
		return fmt.Sprintf("%d-byte frame", len(f))
	}
	return fmt.Sprintf("%s -> %s proto %d (%d bytes)", s, d, p, len(f))
}

// Drops returns how many frames the kernel could not queue on the capture socket since
// the previous call (or the start): a non-zero value means Drain missed frames.
func (c *Capture) Drops() (uint32, error) {
	st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, err
	}
	return st.Drops, nil
}
