package lab

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// Reply is one parsed answer: which server answered and the peer address it saw.
type Reply struct {
	Server string // e.g. "srv2"
	Peer   string // "ip:port" as seen by the server
}

// PeerIP is the address part of Peer.
func (r Reply) PeerIP() string {
	h, _, err := net.SplitHostPort(r.Peer)
	if err != nil {
		return r.Peer
	}
	return h
}

func parseReply(line string) (Reply, error) {
	f := strings.Fields(line)
	if len(f) != 2 || !strings.HasSuffix(line, "\n") {
		return Reply{}, fmt.Errorf("malformed reply %q", line)
	}
	return Reply{Server: f[0], Peer: f[1]}, nil
}

// TCPRequest opens one new TCP connection from the client namespace to addr ("ip:port"),
// sends a line and reads the answer, all within timeout.
func (l *Lab) TCPRequest(addr string, timeout time.Duration) (Reply, error) {
	var r Reply
	err := l.inClient(func() error {
		var err error
		r, err = l.tcpRequest(addr, timeout)
		return err
	})
	return r, err
}

// UDPRequest sends one datagram from a new socket (new source port: a new flow) in the
// client namespace to addr and waits up to timeout for the answer. The socket is connected,
// so only an answer coming from addr itself is accepted.
func (l *Lab) UDPRequest(addr string, timeout time.Duration) (Reply, error) {
	var r Reply
	err := l.inClient(func() error {
		var err error
		r, err = l.udpRequest(addr, timeout)
		return err
	})
	return r, err
}

// Limits of one TCPRequests/UDPRequests call, so that a broken data path fails fast:
// it gives up after MaxFailures unanswered requests or after RequestsBudget in total.
const (
	MaxFailures    = 10
	RequestsBudget = 60 * time.Second
)

// TCPRequests makes n TCP requests to addr, each on a new connection (a new flow), one
// after another, each bounded by timeout. It returns how many answers came from each
// server and an error describing the failures, if any (the counts are still valid).
// It stops early after MaxFailures failures or RequestsBudget.
func (l *Lab) TCPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return l.requests("tcp", addr, n, timeout, l.tcpRequest)
}

// UDPRequests is TCPRequests for UDP: n request/answer exchanges, each from a new socket
// (a new source port: a new flow), with the same limits.
func (l *Lab) UDPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return l.requests("udp", addr, n, timeout, l.udpRequest)
}

func (l *Lab) requests(proto, addr string, n int, timeout time.Duration,
	one func(string, time.Duration) (Reply, error)) (map[string]int, error) {
	per := map[string]int{}
	var failed int
	var first error
	done := 0
	var stopped string
	err := l.inClient(func() error {
		end := time.Now().Add(RequestsBudget)
		for i := 0; i < n; i++ {
			if failed >= MaxFailures {
				stopped = fmt.Sprintf("; gave up after %d failures", failed)
				break
			}
			if time.Now().After(end) {
				stopped = fmt.Sprintf("; gave up after %v", RequestsBudget)
				break
			}
			done++
			r, err := one(addr, timeout)
			if err != nil {
				failed++
				if first == nil {
					first = fmt.Errorf("request %d: %w", i+1, err)
				}
				continue
			}
			per[r.Server]++
		}
		return nil
	})
	if err != nil {
		return per, err
	}
	if failed > 0 || done < n {
		why := "none"
		if first != nil {
			why = first.Error()
		}
		return per, fmt.Errorf("%s %s: %d of %d requests answered (%d tried, %d failed%s); first failure: %s",
			proto, addr, done-failed, n, done, failed, stopped, why)
	}
	return per, nil
}

func (l *Lab) inClient(fn func() error) error {
	if l.ClientNS == "" {
		return errors.New("lab has no client namespace (ConfigOnly)")
	}
	return inNS(l.handles[l.ClientNS], fn)
}

// Client source ports. Every request of a lab uses its own source port, taken in order from
// this range (below the kernel's ephemeral range, so never in use by anything else in the
// client namespace). Kernel-chosen ephemeral ports would repeat now and then (UDP picks
// them at random: 300 sockets reuse one with a probability near 80 %), and a repeated
// port within ilbd's NAT timeout is the same flow, not a new one, which would skew round
// robin.
const (
	firstClientPort = 10000
	lastClientPort  = 32000
)

func (l *Lab) nextPort() int {
	l.portMu.Lock()
	defer l.portMu.Unlock()
	if l.port < firstClientPort || l.port > lastClientPort {
		l.port = firstClientPort
	}
	p := l.port
	l.port++
	return p
}

// tcpRequest must run on a thread in the client namespace (the socket is created there).
func (l *Lab) tcpRequest(addr string, timeout time.Duration) (Reply, error) {
	deadline := time.Now().Add(timeout)
	var c net.Conn
	var err error
	for try := 0; try < 20; try++ {
		d := net.Dialer{Deadline: deadline, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ClientIP), Port: l.nextPort()}}
		c, err = d.Dial("tcp4", addr)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return Reply{}, err
	}
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return Reply{}, err
	}
	line, err := bufio.NewReaderSize(c, 512).ReadString('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("read: %w (got %q)", err, line)
	}
	return parseReply(line)
}

// udpRequest must run on a thread in the client namespace.
func (l *Lab) udpRequest(addr string, timeout time.Duration) (Reply, error) {
	ra, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return Reply{}, err
	}
	var c *net.UDPConn
	for try := 0; try < 20; try++ {
		c, err = net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(ClientIP), Port: l.nextPort()}, ra)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return Reply{}, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return Reply{}, err
	}
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return Reply{}, err
	}
	return parseReply(string(buf[:n]))
}

// VIPAddr is "203.0.113.10:80".
func VIPAddr() string { return net.JoinHostPort(VIP, fmt.Sprint(ServicePort)) }
