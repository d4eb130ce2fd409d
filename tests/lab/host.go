package lab

// Helpers for tests of ilbd's exception path: programs, listeners and sockets inside any
// namespace of the lab (the lb namespace stands for "the ilbd host"), ping, and a look at
// the kernel state of a namespace (interfaces, IP counters, sysctls).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ns returns the handle of one of the lab's namespaces.
func (l *Lab) ns(nsName string) (netns.NsHandle, error) {
	h, ok := l.handles[nsName]
	if !ok {
		return -1, fmt.Errorf("namespace %q is not part of this lab", nsName)
	}
	return h, nil
}

// InNamespace runs fn on an OS thread inside the lab namespace nsName. Sockets created in
// fn belong to that namespace and keep working after fn returns, from any goroutine.
func (l *Lab) InNamespace(nsName string, fn func() error) error {
	h, err := l.ns(nsName)
	if err != nil {
		return err
	}
	return inNS(h, fn)
}

// RunIn runs a program inside the lab namespace nsName (`ip netns exec`), bounded by
// timeout, and returns its combined output. name is looked up with Tool.
func (l *Lab) RunIn(nsName string, timeout time.Duration, name string, args ...string) (string, error) {
	if _, err := l.ns(nsName); err != nil {
		return "", err
	}
	bin, err := Tool(name)
	if err != nil {
		return "", err
	}
	return run(timeout, "ip", append([]string{"netns", "exec", nsName, bin}, args...)...)
}

// PingResult is the outcome of PingFrom.
type PingResult struct {
	Tool                 string // "ping" or "go" (raw ICMP socket)
	Sent, Received, Dups int
	Output               string // ping's output, or a summary
}

// PingFrom sends count ICMP echo requests, 200 ms apart, from the lab namespace nsName to
// addr (IPv4) and waits up to timeout for the replies. It uses the ping command when there
// is one and PingGo otherwise. An error means the ping could not be run, not that replies
// were missing: check Received and Dups.
func (l *Lab) PingFrom(nsName, addr string, count int, timeout time.Duration) (PingResult, error) {
	if _, err := Tool("ping"); err != nil {
		return l.PingGo(nsName, addr, count, timeout)
	}
	wait := max(1, int(timeout/time.Second))
	out, err := l.RunIn(nsName, timeout+time.Duration(count)*time.Second, "ping",
		"-n", "-c", strconv.Itoa(count), "-i", "0.2", "-W", strconv.Itoa(wait), addr)
	r := PingResult{Tool: "ping", Output: out}
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		if err == nil {
			err = errors.New("no summary line")
		}
		return r, fmt.Errorf("ping %s from %s: %v: %s", addr, nsName, err, out)
	}
	r.Sent, _ = strconv.Atoi(m[1])
	r.Received, _ = strconv.Atoi(m[2])
	r.Dups, _ = strconv.Atoi(m[3])
	return r, nil // a non-zero exit only says that replies were missing
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?`)

// PingGo is PingFrom without the ping command: ICMP echo over a raw socket opened in the
// namespace (root only). Replies are matched by identifier and sequence number.
func (l *Lab) PingGo(nsName, addr string, count int, timeout time.Duration) (PingResult, error) {
	r := PingResult{Tool: "go"}
	dst := net.ParseIP(addr).To4()
	if dst == nil {
		return r, fmt.Errorf("PingGo: %q is not an IPv4 address", addr)
	}
	var c net.PacketConn
	err := l.InNamespace(nsName, func() error {
		var err error
		c, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return r, fmt.Errorf("raw ICMP socket in %s: %w", nsName, err)
	}
	defer c.Close()
	id := uint16(os.Getpid()) ^ uint16(time.Now().UnixNano())
	seen := map[uint16]int{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() { // receiver
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return // deadline or closed
			}
			b := buf[:n]
			if len(b) >= 8 && b[0] == 0 && b[1] == 0 && binary.BigEndian.Uint16(b[4:]) == id &&
				from.(*net.IPAddr).IP.Equal(dst) {
				mu.Lock()
				seen[binary.BigEndian.Uint16(b[6:])]++
				mu.Unlock()
			}
		}
	}()
	end := time.Now().Add(time.Duration(count)*200*time.Millisecond + timeout)
	_ = c.SetReadDeadline(end)
	for seq := 1; seq <= count; seq++ {
		msg := make([]byte, 8+32)
		msg[0] = 8 // echo request
		binary.BigEndian.PutUint16(msg[4:], id)
		binary.BigEndian.PutUint16(msg[6:], uint16(seq))
		copy(msg[8:], "ilb exception path ping payload!")
		binary.BigEndian.PutUint16(msg[2:], icmpChecksum(msg))
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: dst}); err != nil {
			return r, fmt.Errorf("send echo %d: %w", seq, err)
		}
		r.Sent++
		if seq < count {
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Wait until every reply is in (plus a little for duplicates) or the deadline.
	for time.Now().Before(end) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == count {
			time.Sleep(200 * time.Millisecond)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now())
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, k := range seen {
		r.Received++
		r.Dups += k - 1
	}
	r.Output = fmt.Sprintf("%d packets transmitted, %d received, +%d duplicates", r.Sent, r.Received, r.Dups)
	return r, nil
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// LineEcho is a TCP service that sends every line it receives back, like a minimal
// interactive service (the SSH or management case).
type LineEcho struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
	peers []string
}

// ServeLinesIn starts a LineEcho on addr ("ip:port") inside the lab namespace nsName.
func (l *Lab) ServeLinesIn(nsName, addr string) (*LineEcho, error) {
	e := &LineEcho{conns: map[net.Conn]bool{}}
	err := l.InNamespace(nsName, func() error {
		var err error
		e.l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", addr, nsName, err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := e.l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns[c] = true
			e.peers = append(e.peers, c.RemoteAddr().String())
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer func() {
					e.mu.Lock()
					delete(e.conns, c)
					e.mu.Unlock()
					c.Close()
				}()
				r := bufio.NewReader(c)
				for {
					_ = c.SetDeadline(time.Now().Add(30 * time.Second))
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e, nil
}

// Peers returns the remote addresses of the connections accepted so far.
func (e *LineEcho) Peers() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.peers...)
}

// Close stops the service and its connections.
func (e *LineEcho) Close() {
	e.l.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// ServeHTTPIn serves h on addr ("ip:port") inside the lab namespace nsName until the
// returned server is closed.
func (l *Lab) ServeHTTPIn(nsName, addr string, h http.Handler) (*http.Server, error) {
	var ln net.Listener
	err := l.InNamespace(nsName, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", addr, nsName, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// DialIn opens a TCP connection to addr from the lab namespace nsName.
func (l *Lab) DialIn(nsName, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := l.InNamespace(nsName, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	})
	return c, err
}

// HTTPClientIn returns an HTTP client whose connections are made from the lab namespace
// nsName (real kernel TCP of that namespace), with an overall timeout.
func (l *Lab) HTTPClientIn(nsName string, timeout time.Duration) (*http.Client, error) {
	if _, err := l.ns(nsName); err != nil {
		return nil, err
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := l.InNamespace(nsName, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}, nil
}

// HasCurl reports whether the curl command exists.
func HasCurl() bool {
	_, err := exec.LookPath("curl")
	return err == nil
}

// Interface describes a kernel interface of a lab namespace.
type Interface struct {
	Name  string
	MAC   string
	Up    bool
	MTU   int
	Addrs []string // "ip/len", IPv4 and IPv6
}

// InterfaceIn returns the interface dev of the lab namespace nsName; ok is false if there
// is no such interface.
func (l *Lab) InterfaceIn(nsName, dev string) (ifc Interface, ok bool, err error) {
	h, err := l.ns(nsName)
	if err != nil {
		return ifc, false, err
	}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return ifc, false, err
	}
	defer nh.Close()
	ln, err := nh.LinkByName(dev)
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return ifc, false, nil
		}
		return ifc, false, err
	}
	a := ln.Attrs()
	ifc = Interface{Name: a.Name, MAC: a.HardwareAddr.String(), Up: a.Flags&net.FlagUp != 0, MTU: a.MTU}
	addrs, err := nh.AddrList(ln, netlink.FAMILY_ALL)
	if err != nil {
		return ifc, true, err
	}
	for _, ad := range addrs {
		ifc.Addrs = append(ifc.Addrs, ad.IPNet.String())
	}
	return ifc, true, nil
}

// SysctlIn reads /proc/sys/<key> (slashes, e.g. "net/ipv4/conf/lbc/rp_filter") in the
// lab namespace nsName.
func (l *Lab) SysctlIn(nsName, key string) (string, error) {
	var b []byte
	err := l.InNamespace(nsName, func() error {
		var err error
		b, err = os.ReadFile(filepath.Join("/proc/sys", key))
		return err
	})
	return strings.TrimSpace(string(b)), err
}
