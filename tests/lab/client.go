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

// Reply is one parsed answer: which server answered, the peer address it saw and the local
// address the request was addressed to when it reached the server.
type Reply struct {
	Server string // e.g. "srv2"
	Peer   string // "ip:port" as seen by the server
	Local  string // "ip:port" the server received the request on (VIP with DSR)
}

// PeerIP is the address part of Peer.
func (r Reply) PeerIP() string { return hostOf(r.Peer) }

// LocalIP is the address part of Local.
func (r Reply) LocalIP() string { return hostOf(r.Local) }

func hostOf(hp string) string {
	h, _, err := net.SplitHostPort(hp)
	if err != nil {
		return hp
	}
	return h
}

func parseReply(line string) (Reply, error) {
	f := strings.Fields(line)
	if (len(f) != 2 && len(f) != 3) || !strings.HasSuffix(line, "\n") {
		return Reply{}, fmt.Errorf("malformed reply %q", line)
	}
	r := Reply{Server: f[0], Peer: f[1]}
	if len(f) == 3 {
		r.Local = f[2]
	}
	return r, nil
}

// Client sends requests from one of the lab's namespaces, from a fixed source address per
// address family (the family of each request's destination decides).
type Client struct {
	lab *Lab
	NS  string // namespace name
	IP  string // IPv4 source address
	IP6 string // IPv6 source address ("" in an IPv4-only lab)
}

// Client is the client namespace's client (ClientIP, and ClientIP6 in an IPv6 lab).
func (l *Lab) Client() *Client { return l.client }

// LocalClient is the client on the servers' segment (Options.LocalClient), else nil.
func (l *Lab) LocalClient() *Client { return l.localClient }

// WithSource returns a client in the same namespace that sends from ip (which must be one
// of the namespace's addresses) for ip's family.
func (c *Client) WithSource(ip string) *Client {
	n := *c
	if p := net.ParseIP(ip); p != nil && p.To4() == nil {
		n.IP6 = ip
	} else {
		n.IP = ip
	}
	return &n
}

// AddClientAddress adds ip as a secondary address of the client namespace's cl0 (/24 or
// /64, on the client subnet) and returns a client that sends from it.
func (l *Lab) AddClientAddress(ip string) (*Client, error) {
	if l.client == nil {
		return nil, errors.New("lab has no client namespace (ConfigOnly)")
	}
	p := net.ParseIP(ip)
	if p == nil {
		return nil, fmt.Errorf("bad address %q", ip)
	}
	cidr := ip + "/24"
	if p.To4() == nil {
		cidr = ip + "/64"
	}
	h, err := l.netlinkIn(l.ClientNS)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if err := addAddr(h, "cl0", cidr); err != nil {
		return nil, err
	}
	return l.client.WithSource(ip), nil
}

// source returns the network ("tcp4"...) and the local address to use towards addr.
func (c *Client) source(proto, addr string) (network string, src net.IP, err error) {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, err
	}
	dst := net.ParseIP(h)
	if dst == nil {
		return "", nil, fmt.Errorf("%s: not a numeric address", addr)
	}
	if dst.To4() != nil {
		return proto + "4", net.ParseIP(c.IP), nil
	}
	if c.IP6 == "" {
		return "", nil, fmt.Errorf("%s: this client has no IPv6 address (Options.IPv6)", addr)
	}
	return proto + "6", net.ParseIP(c.IP6), nil
}

// TCPRequest opens one new TCP connection from the client namespace to addr ("ip:port"),
// sends a line and reads the answer, all within timeout.
func (l *Lab) TCPRequest(addr string, timeout time.Duration) (Reply, error) {
	return l.client.TCPRequest(addr, timeout)
}

// UDPRequest sends one datagram from a new socket (new source port: a new flow) in the
// client namespace to addr and waits up to timeout for the answer. The socket is connected,
// so only an answer coming from addr itself is accepted.
func (l *Lab) UDPRequest(addr string, timeout time.Duration) (Reply, error) {
	return l.client.UDPRequest(addr, timeout)
}

// TCPRequests makes n TCP requests to addr from the client namespace (see
// Client.TCPRequests).
func (l *Lab) TCPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return l.client.TCPRequests(addr, n, timeout)
}

// UDPRequests makes n UDP exchanges with addr from the client namespace (see
// Client.UDPRequests).
func (l *Lab) UDPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return l.client.UDPRequests(addr, n, timeout)
}

// TCPRequest opens one new TCP connection to addr, sends a line and reads the answer, all
// within timeout.
func (c *Client) TCPRequest(addr string, timeout time.Duration) (Reply, error) {
	var r Reply
	err := c.in(func() error {
		var err error
		r, err = c.tcpRequest(addr, timeout)
		return err
	})
	return r, err
}

// UDPRequest sends one datagram from a new socket (new source port: a new flow) to addr
// and waits up to timeout for the answer. The socket is connected, so only an answer
// coming from addr itself is accepted.
func (c *Client) UDPRequest(addr string, timeout time.Duration) (Reply, error) {
	var r Reply
	err := c.in(func() error {
		var err error
		r, err = c.udpRequest(addr, timeout)
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
func (c *Client) TCPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return perServer(c.Replies("tcp", addr, n, timeout))
}

// UDPRequests is TCPRequests for UDP: n request/answer exchanges, each from a new socket
// (a new source port: a new flow), with the same limits.
func (c *Client) UDPRequests(addr string, n int, timeout time.Duration) (map[string]int, error) {
	return perServer(c.Replies("udp", addr, n, timeout))
}

func perServer(rs []Reply, err error) (map[string]int, error) {
	per := map[string]int{}
	for _, r := range rs {
		per[r.Server]++
	}
	return per, err
}

// Replies makes n requests ("tcp" or "udp") to addr like TCPRequests/UDPRequests and
// returns every answer received, in order.
func (c *Client) Replies(proto, addr string, n int, timeout time.Duration) ([]Reply, error) {
	one := c.tcpRequest
	if proto == "udp" {
		one = c.udpRequest
	} else if proto != "tcp" {
		return nil, fmt.Errorf("protocol %q: want tcp or udp", proto)
	}
	var out []Reply
	var failed int
	var first error
	done := 0
	var stopped string
	err := c.in(func() error {
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
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if failed > 0 || done < n {
		why := "none"
		if first != nil {
			why = first.Error()
		}
		return out, fmt.Errorf("%s %s from %s: %d of %d requests answered (%d tried, %d failed%s); first failure: %s",
			proto, addr, c.NS, done-failed, n, done, failed, stopped, why)
	}
	return out, nil
}

func (c *Client) in(fn func() error) error {
	if c == nil || c.NS == "" {
		return errors.New("no such client namespace (ConfigOnly lab, or option not set)")
	}
	return inNS(c.lab.handles[c.NS], fn)
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

// dialTCP must run on a thread in the client's namespace.
func (c *Client) dialTCP(addr string, deadline time.Time) (net.Conn, error) {
	network, src, err := c.source("tcp", addr)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	for try := 0; try < 20; try++ {
		d := net.Dialer{Deadline: deadline, LocalAddr: &net.TCPAddr{IP: src, Port: c.lab.nextPort()}}
		conn, err = d.Dial(network, addr)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return conn, err
}

// tcpRequest must run on a thread in the client's namespace (the socket is created there).
func (c *Client) tcpRequest(addr string, timeout time.Duration) (Reply, error) {
	deadline := time.Now().Add(timeout)
	conn, err := c.dialTCP(addr, deadline)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return Reply{}, err
	}
	return exchange(conn, bufio.NewReaderSize(conn, 512))
}

func exchange(c net.Conn, r *bufio.Reader) (Reply, error) {
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return Reply{}, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("read: %w (got %q)", err, line)
	}
	return parseReply(line)
}

// udpRequest must run on a thread in the client's namespace.
func (c *Client) udpRequest(addr string, timeout time.Duration) (Reply, error) {
	network, src, err := c.source("udp", addr)
	if err != nil {
		return Reply{}, err
	}
	ra, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return Reply{}, err
	}
	var conn *net.UDPConn
	for try := 0; try < 20; try++ {
		conn, err = net.DialUDP(network, &net.UDPAddr{IP: src, Port: c.lab.nextPort()}, ra)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return Reply{}, err
	}
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		return Reply{}, err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		return Reply{}, err
	}
	return parseReply(string(buf[:n]))
}

// Conn is a long-lived TCP connection from a client: any number of request/answer
// exchanges over one flow.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial opens a TCP connection to addr within timeout.
func (c *Client) Dial(addr string, timeout time.Duration) (*Conn, error) {
	var conn net.Conn
	err := c.in(func() error {
		var err error
		conn, err = c.dialTCP(addr, time.Now().Add(timeout))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Conn{c: conn, r: bufio.NewReaderSize(conn, 512)}, nil
}

// Exchange sends a line and reads the answer within timeout. After an error (a timeout
// included) the connection is no longer usable.
func (c *Conn) Exchange(timeout time.Duration) (Reply, error) {
	if err := c.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return Reply{}, err
	}
	return exchange(c.c, c.r)
}

// LocalAddr is the client's end of the connection.
func (c *Conn) LocalAddr() string { return c.c.LocalAddr().String() }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// VIPAddr is "203.0.113.10:80".
func VIPAddr() string { return net.JoinHostPort(VIP, fmt.Sprint(ServicePort)) }

// VIP6Addr is "[2001:db8:3::10]:80".
func VIP6Addr() string { return net.JoinHostPort(VIP6, fmt.Sprint(ServicePort)) }

// Addr joins an address and a port ("[v6]:port" for IPv6).
func Addr(ip string, port int) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// Run runs fn on an OS thread inside the client's namespace: sockets fn creates (raw ones,
// for instance) belong to that namespace and keep working after fn returns.
func (c *Client) Run(fn func() error) error { return c.in(fn) }
