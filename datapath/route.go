package datapath

// port is the engine's view of one NIC port.
type port struct {
	mac    [6]byte
	addrs  []uint32 // IPv4 interface addresses
	addrs6 []addr   // IPv6 interface addresses (global or configured link-local)
	ll6    addr     // the EUI-64 link-local address derived from the MAC, answered in NDP
	// sampleIn counts down the TCP/UDP packets received until the next checksum sample.
	sampleIn uint32
}

// connectedNet is an IPv4 subnet directly reachable through a port, from its interface prefixes.
type connectedNet struct {
	net, mask uint32
	bits      int
	port      uint16
	src       uint32 // our address on the subnet: the sender of ARP requests into it
}

// connectedNet6 is an IPv6 prefix directly reachable through a port.
type connectedNet6 struct {
	net, mask addr
	bits      int
	port      uint16
	src       addr // our address on the prefix: the source of neighbor solicitations into it
}

// routes is the static routing the engine derives from its ports.
type routes struct {
	connected    []connectedNet  // longest prefix first
	connected6   []connectedNet6 // longest prefix first
	hasGateway   bool
	gateway      uint32
	gatewayPort  uint16
	hasGateway6  bool
	gateway6     addr
	gateway6Port uint16
}

// nextHop returns the port and next-hop address for a destination: the destination itself when
// it is on a connected subnet (longest prefix wins), otherwise the default gateway of its family.
// An IPv6 link-local destination is only reachable on a link we can name: the IPv6 gateway's,
// or the only port.
func (e *Engine) nextHop(dst addr) (out uint16, nh addr, ok bool) {
	r := &e.routes
	if dst.is4() {
		d := dst.v4()
		for i := range r.connected {
			c := &r.connected[i]
			if d&c.mask == c.net {
				return c.port, dst, true
			}
		}
		if r.hasGateway {
			return r.gatewayPort, addrFrom4(r.gateway), true
		}
		return 0, addr{}, false
	}
	if dst.isLinkLocal6() {
		switch {
		case r.hasGateway6 && dst == r.gateway6:
			return r.gateway6Port, dst, true
		case len(e.ports) == 1:
			return 0, dst, true
		}
		return 0, addr{}, false
	}
	for i := range r.connected6 {
		c := &r.connected6[i]
		if dst.and(c.mask) == c.net {
			return c.port, dst, true
		}
	}
	if r.hasGateway6 {
		return r.gateway6Port, r.gateway6, true
	}
	return 0, addr{}, false
}

// isLocalAddr reports whether ip is an interface address of any port.
func (e *Engine) isLocalAddr(ip addr) bool {
	for i := range e.ports {
		if e.portHasAddr(uint16(i), ip) {
			return true
		}
	}
	return false
}

// portHasAddr reports whether ip is an interface address of port p, its derived link-local
// address included.
func (e *Engine) portHasAddr(p uint16, ip addr) bool {
	pt := &e.ports[p]
	if ip.is4() {
		for _, a := range pt.addrs {
			if a == ip.v4() {
				return true
			}
		}
		return false
	}
	if ip == pt.ll6 {
		return true
	}
	for _, a := range pt.addrs6 {
		if a == ip {
			return true
		}
	}
	return false
}

// isConnected reports whether ip lies on a connected subnet of port p (for IPv6, link-local
// addresses are on every port's link).
func (e *Engine) isConnected(p uint16, ip addr) bool {
	if ip.is4() {
		for i := range e.routes.connected {
			if c := &e.routes.connected[i]; c.port == p && ip.v4()&c.mask == c.net {
				return true
			}
		}
		return false
	}
	if ip.isLinkLocal6() {
		return true
	}
	for i := range e.routes.connected6 {
		if c := &e.routes.connected6[i]; c.port == p && ip.and(c.mask) == c.net {
			return true
		}
	}
	return false
}

// arpSource returns the sender address for an ARP request for target out of port p: our address
// on the target's subnet, else the port's first address, else 0.0.0.0 (an ARP probe).
func (e *Engine) arpSource(p uint16, target uint32) uint32 {
	for i := range e.routes.connected {
		if c := &e.routes.connected[i]; c.port == p && target&c.mask == c.net {
			return c.src
		}
	}
	if a := e.ports[p].addrs; len(a) > 0 {
		return a[0]
	}
	return 0
}

// ndpSource returns the source address of a neighbor solicitation for target out of port p:
// our address on the target's prefix, else the port's link-local address (always valid on-link).
func (e *Engine) ndpSource(p uint16, target addr) addr {
	if !target.isLinkLocal6() {
		for i := range e.routes.connected6 {
			if c := &e.routes.connected6[i]; c.port == p && target.and(c.mask) == c.net {
				return c.src
			}
		}
	}
	return e.ports[p].ll6
}
