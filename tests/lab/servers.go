package lab

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ServerPorts are the ports every server listens on, TCP and UDP.
var ServerPorts = []int{ServicePort, AltPort}

// Server is a kernel TCP and UDP service inside one server namespace, listening on the
// wildcard address of each family (IPv4; IPv6 too in an IPv6 lab) on every ServerPorts
// port, so that it also answers on a VIP held on its loopback (DSR).
//
// TCP: per connection, for every line read, answer "<name> <peer ip:port> <local ip:port>\n";
// the connection stays open until the peer closes it (or 30 s without a line).
// UDP: answer every datagram with the same line, sent from the address the datagram was
// addressed to (IP_PKTINFO), as a DSR server must: the client only accepts an answer from
// the address it sent to.
// Both count what they answered, the peer addresses and the local addresses they saw.
type Server struct {
	Name string // "srv1".."srv3": the first word of every answer
	NS   string // namespace name
	IP   string // its IPv4 address
	IP6  string // its IPv6 address ("" in an IPv4-only lab)

	tcp []*net.TCPListener
	udp []*net.UDPConn
	wg  sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	conns    map[*net.TCPConn]bool // open TCP connections, closed by Close
	tcpCount int
	udpCount int
	tcpPeers map[string]int // peer IP -> answered count
	udpPeers map[string]int
	tcpFlows map[string]bool // distinct peer ip:port seen
	udpFlows map[string]bool
	locals   map[string]int // local ip:port a request was addressed to -> count (TCP and UDP)
}

// TCPIdle is how long a server keeps a TCP connection open without receiving a line.
const TCPIdle = 30 * time.Second

// startServer creates the sockets inside ns (they stay there) and serves them from
// ordinary goroutines.
func startServer(name, nsName string, ns netns.NsHandle, ip, ip6 string) (*Server, error) {
	s := &Server{Name: name, NS: nsName, IP: ip, IP6: ip6, conns: map[*net.TCPConn]bool{},
		tcpPeers: map[string]int{}, udpPeers: map[string]int{},
		tcpFlows: map[string]bool{}, udpFlows: map[string]bool{}, locals: map[string]int{}}
	type fam struct{ tcp, udp, any string }
	fams := []fam{{"tcp4", "udp4", "0.0.0.0"}}
	if ip6 != "" {
		fams = append(fams, fam{"tcp6", "udp6", "::"}) // Go sets IPV6_V6ONLY for tcp6/udp6
	}
	err := inNS(ns, func() error {
		for _, f := range fams {
			for _, port := range ServerPorts {
				addr := net.JoinHostPort(f.any, strconv.Itoa(port))
				ta, err := net.ResolveTCPAddr(f.tcp, addr)
				if err != nil {
					return err
				}
				tl, err := net.ListenTCP(f.tcp, ta)
				if err != nil {
					return err
				}
				s.tcp = append(s.tcp, tl)
				ua, err := net.ResolveUDPAddr(f.udp, addr)
				if err != nil {
					return err
				}
				uc, err := net.ListenUDP(f.udp, ua)
				if err != nil {
					return err
				}
				s.udp = append(s.udp, uc)
				if err := setPktinfo(uc, f.udp == "udp6"); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("server %s in %s: %w", name, nsName, err)
	}
	for _, tl := range s.tcp {
		s.wg.Add(1)
		go s.serveTCP(tl)
	}
	for _, uc := range s.udp {
		s.wg.Add(1)
		go s.serveUDP(uc)
	}
	return s, nil
}

// setPktinfo asks the kernel for each datagram's destination address.
func setPktinfo(c *net.UDPConn, v6 bool) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setsockopt pktinfo: %w", serr)
	}
	return nil
}

func (s *Server) serveTCP(l *net.TCPListener) {
	defer s.wg.Done()
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *Server) serveConn(c *net.TCPConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	peer := c.RemoteAddr().(*net.TCPAddr)
	local := c.LocalAddr().(*net.TCPAddr)
	r := bufio.NewReaderSize(c, 512)
	for {
		_ = c.SetDeadline(time.Now().Add(TCPIdle))
		if _, err := r.ReadSlice('\n'); err != nil {
			return
		}
		// Counted before answering, so that a client holding the answer always
		// finds it counted; taken back if the answer cannot be sent.
		s.record(&s.tcpCount, s.tcpPeers, s.tcpFlows, peer.IP, peer.String(), local.String(), 1)
		if _, err := fmt.Fprintf(c, "%s %s %s\n", s.Name, peer, local); err != nil {
			s.record(&s.tcpCount, s.tcpPeers, s.tcpFlows, peer.IP, peer.String(), local.String(), -1)
			return
		}
	}
}

func (s *Server) serveUDP(c *net.UDPConn) {
	defer s.wg.Done()
	port := c.LocalAddr().(*net.UDPAddr).Port
	buf := make([]byte, 2048)
	oob := make([]byte, 512)
	for {
		_, oobn, _, peer, err := c.ReadMsgUDP(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		dst, reply := pktinfoDst(oob[:oobn])
		if dst == nil {
			continue // cannot tell which address to answer from
		}
		local := net.JoinHostPort(dst.String(), strconv.Itoa(port))
		msg := fmt.Sprintf("%s %s %s\n", s.Name, peer, local)
		s.record(&s.udpCount, s.udpPeers, s.udpFlows, peer.IP, peer.String(), local, 1)
		if _, _, err := c.WriteMsgUDP([]byte(msg), reply, peer); err != nil {
			s.record(&s.udpCount, s.udpPeers, s.udpFlows, peer.IP, peer.String(), local, -1)
		}
	}
}

// pktinfoDst returns the destination address of a received datagram from its control
// messages and the control message that makes the answer leave from that address.
func pktinfoDst(oob []byte) (net.IP, []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, nil
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			var a [4]byte
			copy(a[:], m.Data[8:12]) // struct in_pktinfo { ifindex; spec_dst; addr }: addr
			return net.IP(a[:]), unix.PktInfo4(&unix.Inet4Pktinfo{Spec_dst: a})
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			var a [16]byte
			copy(a[:], m.Data[0:16]) // struct in6_pktinfo { addr; ifindex }
			return net.IP(a[:]), unix.PktInfo6(&unix.Inet6Pktinfo{Addr: a})
		}
	}
	return nil, nil
}

// record adds (delta 1) or takes back (delta -1) one answered request from peer to local.
func (s *Server) record(count *int, peers map[string]int, flows map[string]bool, ip net.IP, peer, local string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*count += delta
	peers[ip.String()] += delta
	if peers[ip.String()] == 0 {
		delete(peers, ip.String())
	}
	s.locals[local] += delta
	if s.locals[local] == 0 {
		delete(s.locals, local)
	}
	if delta > 0 {
		flows[peer] = true
	} else {
		delete(flows, peer)
	}
}

// Close stops serving and closes the sockets and open connections (releasing the
// namespace).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	for _, l := range s.tcp {
		l.Close()
	}
	for _, c := range s.udp {
		c.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second): // connection deadlines bound this
	}
}

// TCPCount is the number of TCP requests (lines) answered so far.
func (s *Server) TCPCount() int { s.mu.Lock(); defer s.mu.Unlock(); return s.tcpCount }

// UDPCount is the number of UDP requests answered so far.
func (s *Server) UDPCount() int { s.mu.Lock(); defer s.mu.Unlock(); return s.udpCount }

// TCPFlows is the number of distinct peer ip:port pairs the TCP service has answered.
func (s *Server) TCPFlows() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.tcpFlows) }

// UDPFlows is the number of distinct peer ip:port pairs the UDP service has answered.
func (s *Server) UDPFlows() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.udpFlows) }

// TCPPeers returns, per peer IP address, how many TCP requests were answered.
func (s *Server) TCPPeers() map[string]int { return s.copyMap(s.tcpPeers) }

// UDPPeers returns, per peer IP address, how many UDP requests were answered.
func (s *Server) UDPPeers() map[string]int { return s.copyMap(s.udpPeers) }

// Locals returns, per local "ip:port" the requests were addressed to (the server's own
// address after NAT, the VIP with DSR), how many TCP and UDP requests were answered.
func (s *Server) Locals() map[string]int { return s.copyMap(s.locals) }

func (s *Server) copyMap(m map[string]int) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Counts returns every server's TCP and UDP answered counts, keyed by server name.
func (l *Lab) Counts() (tcp, udp map[string]int) {
	tcp, udp = map[string]int{}, map[string]int{}
	for _, s := range l.Servers {
		tcp[s.Name] = s.TCPCount()
		udp[s.Name] = s.UDPCount()
	}
	return tcp, udp
}

// PeerIPs returns the set of peer addresses any server has seen (TCP and UDP), with counts.
func (l *Lab) PeerIPs() map[string]int {
	out := map[string]int{}
	for _, s := range l.Servers {
		for ip, n := range s.TCPPeers() {
			out[ip] += n
		}
		for ip, n := range s.UDPPeers() {
			out[ip] += n
		}
	}
	return out
}

// ServerByName returns the server called name ("srv1".."srv3"), or nil.
func (l *Lab) ServerByName(name string) *Server {
	for _, s := range l.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}
