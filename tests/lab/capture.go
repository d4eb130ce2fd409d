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
