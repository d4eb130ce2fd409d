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
)

// Server is a kernel TCP and UDP service on port 80 inside one server namespace.
//
// TCP: per connection, read one line, answer "<name> <peer ip:port>\n", close.
// UDP: answer every datagram with "<name> <peer ip:port>\n".
// Both count what they answered and the peer addresses they saw.
type Server struct {
	Name string // "srv1".."srv3": the first word of every answer
	NS   string // namespace name
	IP   string // its address

	tcp *net.TCPListener
	udp *net.UDPConn
	wg  sync.WaitGroup

	mu       sync.Mutex
	tcpCount int
	udpCount int
	tcpPeers map[string]int // peer IP -> answered count
	udpPeers map[string]int
	tcpFlows map[string]bool // distinct peer ip:port seen
	udpFlows map[string]bool
}

// startServer creates the sockets inside ns (they stay there) and serves them from
// ordinary goroutines.
func startServer(name, nsName string, ns netns.NsHandle, ip string) (*Server, error) {
	s := &Server{Name: name, NS: nsName, IP: ip, tcpPeers: map[string]int{}, udpPeers: map[string]int{},
		tcpFlows: map[string]bool{}, udpFlows: map[string]bool{}}
	addr := net.JoinHostPort(ip, strconv.Itoa(ServicePort))
	err := inNS(ns, func() error {
		ta, err := net.ResolveTCPAddr("tcp4", addr)
		if err != nil {
			return err
		}
		if s.tcp, err = net.ListenTCP("tcp4", ta); err != nil {
			return err
		}
		ua, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return err
		}
		s.udp, err = net.ListenUDP("udp4", ua)
		return err
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("server %s in %s: %w", name, nsName, err)
	}
	s.wg.Add(2)
	go s.serveTCP()
	go s.serveUDP()
	return s, nil
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReaderSize(c, 512)
			if _, err := r.ReadSlice('\n'); err != nil {
				return
			}
			peer := c.RemoteAddr().(*net.TCPAddr)
			// Counted before answering, so that a client holding the answer always
			// finds it counted; taken back if the answer cannot be sent.
			s.record(&s.tcpCount, s.tcpPeers, s.tcpFlows, peer.IP, peer.String(), 1)
			if _, err := fmt.Fprintf(c, "%s %s\n", s.Name, peer); err != nil {
				s.record(&s.tcpCount, s.tcpPeers, s.tcpFlows, peer.IP, peer.String(), -1)
			}
		}()
	}
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	for {
		_, peer, err := s.udp.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		msg := fmt.Sprintf("%s %s\n", s.Name, peer)
		s.record(&s.udpCount, s.udpPeers, s.udpFlows, peer.IP, peer.String(), 1)
		if _, err := s.udp.WriteToUDP([]byte(msg), peer); err != nil {
			s.record(&s.udpCount, s.udpPeers, s.udpFlows, peer.IP, peer.String(), -1)
		}
	}
}

// record adds (delta 1) or takes back (delta -1) one answered request from peer.
func (s *Server) record(count *int, peers map[string]int, flows map[string]bool, ip net.IP, peer string, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*count += delta
	peers[ip.String()] += delta
	if peers[ip.String()] == 0 {
		delete(peers, ip.String())
	}
	if delta > 0 {
		flows[peer] = true
	} else {
		delete(flows, peer)
	}
}

// Close stops serving and closes the sockets (releasing the namespace).
func (s *Server) Close() {
	if s.tcp != nil {
		s.tcp.Close()
	}
	if s.udp != nil {
		s.udp.Close()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second): // per-connection deadlines bound this
	}
}

// TCPCount is the number of TCP requests answered so far.
func (s *Server) TCPCount() int { s.mu.Lock(); defer s.mu.Unlock(); return s.tcpCount }

// UDPCount is the number of UDP requests answered so far.
func (s *Server) UDPCount() int { s.mu.Lock(); defer s.mu.Unlock(); return s.udpCount }

// TCPFlows is the number of distinct peer ip:port pairs the TCP service has answered.
func (s *Server) TCPFlows() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.tcpFlows) }

// UDPFlows is the number of distinct peer ip:port pairs the UDP service has answered.
func (s *Server) UDPFlows() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.udpFlows) }

// TCPPeers returns, per peer IP address, how many TCP requests were answered.
func (s *Server) TCPPeers() map[string]int { return s.copyPeers(s.tcpPeers) }

// UDPPeers returns, per peer IP address, how many UDP requests were answered.
func (s *Server) UDPPeers() map[string]int { return s.copyPeers(s.udpPeers) }

func (s *Server) copyPeers(m map[string]int) map[string]int {
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
