package datapath

// Full NAT (spec §6.3, §6.4): the client's packet leaves with source proxy-src:NAT-port and
// destination server:port, so the server sees the load balancer as its client and needs no
// route back through it — which is also why a client on the servers' own subnet works. The
// connection entry's xlat tuple holds the proxy endpoint; the server's reply is found by its
// reversed key (server → proxy:NAT-port) and translated back by the same rewrite code as
// half-NAT, with the complement of the same checksum deltas.

// allocNATPort picks the proxy-src address and source port for a new full-NAT connection of rs.
// fixed ≥ 0 is the address a persistence entry has fixed: only it is tried. Otherwise the rule's
// cursor moves on first (Solaris' ++cur % n: the first connection uses the second address) and
// the addresses are tried from there until one has a free port.
func (e *Engine) allocNATPort(rs *ruleState, fixed int) (pi int, arena int32, port uint16, ok bool) {
	n := len(rs.proxies)
	if n == 0 {
		return -1, -1, 0, false
	}
	if fixed >= 0 && fixed < n {
		arena = rs.proxies[fixed].arena
		port, ok = e.nat.get(arena)
		return fixed, arena, port, ok
	}
	if rs.pcursor++; rs.pcursor >= n {
		rs.pcursor = 0
	}
	for k := 0; k < n; k++ {
		if pi = rs.pcursor + k; pi >= n {
			pi -= n
		}
		arena = rs.proxies[pi].arena
		if port, ok = e.nat.get(arena); ok {
			return pi, arena, port, true
		}
	}
	return -1, -1, 0, false
}
