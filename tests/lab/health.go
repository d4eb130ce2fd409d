package lab

// Helpers for health-check tests: take a server's TCP service down and bring it back,
// so that a TCP health check sees connections refused and then accepted again.

import (
	"fmt"
	"net"
	"strconv"
)

// StopServerTCP closes the TCP listeners (every family) of server name ("srv1".."srv3") on
// port: new connections to it are refused (RST) from then on. Open connections stay.
func (l *Lab) StopServerTCP(name string, port int) error {
	s := l.ServerByName(name)
	if s == nil {
		return fmt.Errorf("no server %q", name)
	}
	s.mu.Lock()
	var keep, stop []*net.TCPListener
	for _, tl := range s.tcp {
		if tl.Addr().(*net.TCPAddr).Port == port {
			stop = append(stop, tl)
		} else {
			keep = append(keep, tl)
		}
	}
	s.tcp = keep
	s.mu.Unlock()
	if len(stop) == 0 {
		return fmt.Errorf("%s has no TCP listener on port %d", name, port)
	}
	for _, tl := range stop {
		tl.Close()
	}
	return nil
}

// StartServerTCP listens again (every family of the lab) on port for server name, after
// StopServerTCP, inside the server's namespace; it serves as before.
func (l *Lab) StartServerTCP(name string, port int) error {
	s := l.ServerByName(name)
	if s == nil {
		return fmt.Errorf("no server %q", name)
	}
	h, err := l.ns(s.NS)
	if err != nil {
		return err
	}
	fams := [][2]string{{"tcp4", "0.0.0.0"}}
	if s.IP6 != "" {
		fams = append(fams, [2]string{"tcp6", "::"})
	}
	var started []*net.TCPListener
	err = inNS(h, func() error {
		for _, f := range fams {
			a, err := net.ResolveTCPAddr(f[0], net.JoinHostPort(f[1], strconv.Itoa(port)))
			if err != nil {
				return err
			}
			tl, err := net.ListenTCP(f[0], a)
			if err != nil {
				return err
			}
			started = append(started, tl)
		}
		return nil
	})
	if err != nil {
		for _, tl := range started {
			tl.Close()
		}
		return fmt.Errorf("server %s: listening on %d again: %w", name, port, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		for _, tl := range started {
			tl.Close()
		}
		return fmt.Errorf("server %s is closed", name)
	}
	for _, tl := range started {
		s.tcp = append(s.tcp, tl)
		s.wg.Add(1)
		go s.serveTCP(tl)
	}
	return nil
}
