package datapath

// port is the engine's view of one NIC port.
type port struct {
	mac   [6]byte
	addrs []uint32 // IPv4 interface addresses
}

// connectedNet is an IPv4 subnet directly reachable through a port, from its interface prefixes.
type connectedNet struct {
	net, mask uint32
	bits      int
	port      uint16
	src       uint32 // our address on the subnet: the sender of ARP requests into it
}

// nextHop returns the port and next-hop address for an IPv4 destination: the destination itself
// when it is on a connected subnet (longest prefix wins), otherwise the default gateway.
func (e *Engine) nextHop(dst uint32) (out uint16, nh uint32, ok bool) {
	for i := range e.routes.connected {
		c := &e.routes.connected[i]
		if dst&c.mask == c.net {
			return c.port, dst, true
		}
	}
	if e.routes.hasGateway {
		return e.routes.gatewayPort, e.routes.gateway, true
	}
	return 0, 0, false
}

// isLocalAddr reports whether ip is an interface address of any port.
func (e *Engine) isLocalAddr(ip uint32) bool {
	for i := range e.ports {
		for _, a := range e.ports[i].addrs {
			if a == ip {
				return true
			}
		}
	}
	return false
}

// portHasAddr reports whether ip is an interface address of port p.
func (e *Engine) portHasAddr(p uint16, ip uint32) bool {
	for _, a := range e.ports[p].addrs {
		if a == ip {
			return true
		}
	}
	return false
}

// isConnected reports whether ip lies on a connected subnet of port p.
func (e *Engine) isConnected(p uint16, ip uint32) bool {
	for i := range e.routes.connected {
		if c := &e.routes.connected[i]; c.port == p && ip&c.mask == c.net {
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
