package datapath

// Direct server return (spec §6.2 step 5, §6.9): the packet keeps its addresses and ports — the
// server owns the VIP on a loopback and answers the client directly, so no server→client packet
// ever crosses the load balancer and no connection state exists. Only the Ethernet header is
// rewritten (to the server's MAC, from our port's) and the TTL decremented, as Solaris' IP does
// when ILB forces the next hop to the server.
//
// Being stateless, every packet runs the algorithm: round robin spreads even one TCP
// connection's packets over the servers, exactly as Solaris does (its round robin advances per
// packet in DSR). Use a hash algorithm or persistence to keep a flow on one server; the hashes
// depend only on the packet's addresses and port, so every packet of a flow lands on the same
// server while the server set is unchanged.

// forwardDSR sends a packet of a DSR rule to server si; advance moves round robin on (per
// packet, unless a persistence entry chose the server).
func (e *Engine) forwardDSR(frame []byte, p *Parsed, rs *ruleState, si int, advance bool) Result {
	sv := &rs.servers[si]
	if advance {
		rs.advance(si)
	}
	out, mac, rt := e.routeServer(sv, frame)
	if rt == routeNone {
		return Result{Action: ActionDrop, Len: len(frame)}
	}
	decrementTTL(frame, p)
	eth := Ethernet(frame)
	eth.SetDst(mac)
	eth.SetSrc(e.ports[out].mac)
	if rt == routeUnresolved {
		return e.hold(frame, out, sv.slot, p.IPLen)
	}
	return e.sent(out, frame, sv.slot, p.IPLen)
}

// routeServer finds the out port and MAC toward a server, caching the neighbour slot in the
// rule's server state so DSR packets skip the route lookup and the neighbour probe. Failures
// are handled as in routeConn.
func (e *Engine) routeServer(sv *serverState, frame []byte) (uint16, [6]byte, routeStatus) {
	if sv.nh != 0 && sv.nhEpoch == e.neigh.epoch {
		if mac, ok := e.neighMAC(int(sv.nh - 1)); ok {
			return e.neigh.slots[sv.nh-1].port, mac, routeOK
		}
	}
	out, nh, ok := e.nextHop(sv.addr)
	if !ok {
		e.drop(gNoRoute, frame)
		return 0, [6]byte{}, routeNone
	}
	i, mac, ok := e.resolve(nh, out)
	sv.nh, sv.nhEpoch = uint32(i)+1, e.neigh.epoch
	if !ok {
		e.holdNH = nh
		return out, [6]byte{}, routeUnresolved
	}
	return out, mac, routeOK
}
