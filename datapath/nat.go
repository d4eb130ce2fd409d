package datapath

import (
	"encoding/binary"

	"github.com/ilbgo/ilb/rules"
)

// forwardConn sends a packet of an existing connection on, rewritten with the cached translation
// (spec §6.2 step 1): whatever the rule or server state is now. A packet whose next hop is
// still being resolved is rewritten all the same and held until the MAC is known.
func (e *Engine) forwardConn(frame []byte, p *Parsed, ci int32, dir int) Result {
	c := &e.conns.entries[ci]
	if p.TTL <= 1 {
		return e.drop(gTTLExceeded, frame)
	}
	out, mac, rt := e.routeConn(c, dir, frame)
	if rt == routeNone {
		return Result{Action: ActionDrop, Len: len(frame)}
	}
	c.last = e.nowMs
	e.rewrite(frame, p, c, dir, out, mac)
	if p.Proto == ProtoTCP {
		t := TCP(frame[p.L4Off:p.L3End])
		if c.state != connEstablished || p.TCPFlags&TCPRst != 0 {
			e.tcpSetup(ci, c, t, p.TCPFlags, dir)
		}
		if (c.flags&connFinMask != 0 || p.TCPFlags&(TCPFin|TCPSyn) != 0) &&
			trackTCP(c, &e.conns.meta[ci], t, p.TCPFlags, dir, p.L3End-p.L4Off-t.HeaderLen()) {
			e.removeConn(ci)
		}
	} else if c.state != connEstablished {
		if dir == dirS2C {
			e.establish(ci, c) // UDP: a reply confirms the flow
		} else {
			e.conns.hoTouch(ci)
		}
	}
	if rt == routeUnresolved {
		return e.hold(frame, out, c.server, p.IPLen)
	}
	return e.sent(out, frame, c.server, p.IPLen)
}

// newFlow balances the first packet of a flow that matched rule ri (spec §6.2 steps 2–6): every
// packet of a DSR rule, the first of a half-NAT or full-NAT connection.
func (e *Engine) newFlow(frame []byte, p *Parsed, ri int, h uint64) Result {
	r := &e.snap.Rules[ri]
	rs := &e.rules[ri]
	if !r.Enabled {
		// A disabled rule's traffic is not processed: it goes on to the host, not dropped.
		e.ctr.ruleAdd(rs.slot, rPktNotProcessed, p.IPLen)
		return e.pass(gNotProcessed, frame)
	}
	if p.TTL <= 1 {
		return e.drop(gTTLExceeded, frame)
	}
	if rs.topo != rules.TopoDSR && p.Proto == ProtoTCP && p.TCPFlags&(TCPSyn|TCPAck|TCPRst|TCPFin) != TCPSyn {
		// Only a SYN opens a connection. Anything else without an entry (a flood of ACKs, a
		// flow that outlived its entry) would only fill the table; the sender's stack
		// retransmits or resets, the server never sees a segment it cannot place.
		e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
		return e.drop(gTCPNoConn, frame)
	}
	si, st, proxy, status := e.chooseServer(rs, p)
	switch status {
	case chooseNoServer:
		e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
		return e.drop(gDropped, frame)
	case chooseNoMemory:
		e.ctr.ruleAdd(rs.slot, rNoMemPktDropped, p.IPLen)
		return e.drop(gStickyFull, frame)
	case chooseUnknownAlgo:
		e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
		return e.drop(gUnknownAlgo, frame)
	}
	switch rs.topo {
	case rules.TopoDSR:
		return e.forwardDSR(frame, p, rs, si, status == chooseOK)
	case rules.TopoHalfNAT, rules.TopoNAT:
	default:
		e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
		return e.drop(gUnsupported, frame)
	}
	sv := &rs.servers[si]
	c := conn{client: p.src, cport: p.SrcPort, vport: p.DstPort, nport: p.SrcPort,
		sport: r.ServerPort(&r.Servers[si], p.DstPort), proto: p.Proto, rule: rs.slot, server: sv.slot, sticky: -1}
	natSrc := p.src
	if rs.topo == rules.TopoNAT {
		pi, a, port, ok := e.allocNATPort(rs, proxy)
		// Ports exhausted: half-open entries (a SYN flood's) give theirs back first.
		for k := 0; !ok && k < natEvictTries && e.evictHalfOpenFor(rs); k++ {
			pi, a, port, ok = e.allocNATPort(rs, proxy)
		}
		if !ok {
			e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
			e.ctr.ruleAdd(rs.slot, rNoPortPktDropped, p.IPLen)
			return e.drop(gNoPort, frame)
		}
		natSrc, c.nport, c.arena = rs.proxies[pi].addr, port, uint16(a+1)
		c.flags = connFullNAT
		if st >= 0 {
			e.sticky.entries[st].proxy = int8(pi)
		}
	}
	c.ipDelta = csumAdd(csumDeltaAddr(p.src, natSrc), csumDeltaAddr(p.dst, sv.addr))
	c.l4Delta = csumAdd(c.ipDelta, csumAdd(csumDelta16(p.SrcPort, c.nport), csumDelta16(p.DstPort, c.sport)))
	ci, ist := e.conns.insert(&c, h, e.now)
	if ist == insertFull && e.evictHalfOpen() {
		ci, ist = e.conns.insert(&c, h, e.now)
	}
	// An index without room for a key counts as a full table. No entry is evicted for it: that
	// would free slots in unrelated buckets, not in this key's two.
	if ist != insertOK {
		if c.arena != 0 {
			e.nat.put(int32(c.arena-1), c.nport)
		}
		if ist == insertFull || ist == insertNoRoom {
			e.ctr.ruleAdd(rs.slot, rNoMemPktDropped, p.IPLen)
			return e.drop(gNoMemory, frame)
		}
		e.ctr.ruleAdd(rs.slot, rPktDropped, p.IPLen)
		return e.drop(gConnConflict, frame)
	}
	if st >= 0 {
		e.conns.entries[ci].sticky = st
		e.sticky.entries[st].refs++
	}
	e.slots[rs.slot].refs++
	e.srv[sv.slot].refs++
	if status == chooseOK {
		rs.advance(si)
	}
	// The entry exists from here on even if the next hop is not resolved yet: the packet then
	// waits in the hold queue for ARP/NDP, as Solaris' IP would have queued it.
	return e.forwardConn(frame, p, ci, dirC2S)
}

// natEvictTries bounds the half-open entries a new full-NAT connection evicts to free a port.
const natEvictTries = 16

// routeStatus says whether a next hop was found and its MAC is known.
type routeStatus uint8

const (
	routeOK         routeStatus = iota
	routeNone                   // no route: counted and dropped
	routeUnresolved             // the next hop's MAC is being resolved: the caller holds the packet
)

// routeConn finds the out port and next-hop MAC for a packet of c travelling in dir: toward its
// server or its client.
// The next hop's neighbour slot is cached, toward the server in its server slot (every
// connection to it shares the route), toward the client in the entry, so an established flow
// skips the route lookup and the neighbour hash probe. Without a route the reason is counted; on
// a neighbour miss a resolution is scheduled and the next hop noted for hold.
func (e *Engine) routeConn(c *conn, dir int, frame []byte) (uint16, [6]byte, routeStatus) {
	slot, epoch := &c.nh, &c.nhEpoch
	if dir == dirC2S {
		run := &e.srv[c.server]
		slot, epoch = &run.nh, &run.nhEpoch
	}
	if s := *slot; s != 0 && *epoch == e.neigh.epoch {
		if mac, ok := e.neighMAC(int(s - 1)); ok {
			return e.neigh.slots[s-1].port, mac, routeOK
		}
	}
	dst := c.client
	if dir == dirC2S {
		dst = e.conns.names.server[c.server]
	}
	out, nh, ok := e.nextHop(dst)
	if !ok {
		e.drop(gNoRoute, frame)
		return 0, [6]byte{}, routeNone
	}
	i, mac, ok := e.resolve(nh, out)
	*slot, *epoch = uint32(i)+1, e.neigh.epoch // after resolve, which may recycle a slot
	if !ok {
		e.holdNH = nh
		return out, [6]byte{}, routeUnresolved
	}
	return out, mac, routeOK
}

// rewrite applies c's translation for direction dir to a TCP/UDP packet in place, decrements the
// TTL or hop limit and patches the checksums incrementally (spec §6.3), then readdresses the
// Ethernet header to the next hop. The caller has checked TTL > 1.
func (e *Engine) rewrite(frame []byte, p *Parsed, c *conn, dir int, out uint16, mac [6]byte) {
	// Only what the translation changes is written: toward the server the destination (and,
	// full NAT, the source); back toward the client the source (and, full NAT, the destination).
	full := c.arena != 0
	ipDelta, l4Delta := c.ipDelta, c.l4Delta
	var srcA, dstA *addr
	var sport, dport uint16
	if dir == dirC2S {
		dstA, dport = &e.conns.names.server[c.server], c.sport
		if full {
			srcA, sport = &e.conns.names.proxy[c.arena-1], c.nport
		}
	} else {
		ipDelta, l4Delta = ^ipDelta, ^l4Delta // undoing a change adds the complement of its delta
		srcA, sport = &e.conns.names.vip[c.rule], c.vport
		if full {
			dstA, dport = &c.client, c.cport
		}
	}
	if p.isV6() {
		// No header checksum; the addresses enter the transport checksum through the
		// pseudo-header, which l4Delta covers (csumDeltaAddr works on all 128 bits).
		ip := IPv6(frame[p.L3Off:p.L4Off])
		if srcA != nil {
			ip.SetSrc(*srcA)
		}
		if dstA != nil {
			ip.SetDst(*dstA)
		}
		ip.SetHopLimit(ip.HopLimit() - 1)
	} else {
		ip := IPv4(frame[p.L3Off:p.L4Off])
		if srcA != nil {
			ip.SetSrc(srcA.v4())
		}
		if dstA != nil {
			ip.SetDst(dstA.v4())
		}
		ttlWord := ip.TTLProtoWord()
		ip.SetTTL(ip.TTL() - 1)
		ip.SetChecksum(csumUpdate(ip.Checksum(), csumAdd(ipDelta, csumDelta16(ttlWord, ttlWord-0x100))))
	}
	l4 := frame[p.L4Off:p.L3End]
	if srcA != nil {
		binary.BigEndian.PutUint16(l4[l4SrcPort:], sport)
	}
	if dstA != nil {
		binary.BigEndian.PutUint16(l4[l4DstPort:], dport)
	}
	off := l4ChecksumOffset(p.Proto)
	sum := binary.BigEndian.Uint16(l4[off:])
	if p.Proto == ProtoUDP {
		// 0 means "no checksum" in IPv4 (RFC 768) and must stay so; IPv6 never carries 0
		// (the parser drops such datagrams).
		if sum != 0 {
			if sum = csumUpdate(sum, l4Delta); sum == 0 {
				sum = 0xffff // a computed 0 is sent as all ones
			}
		}
	} else {
		sum = csumUpdate(sum, l4Delta)
	}
	binary.BigEndian.PutUint16(l4[off:], sum)

	eth := Ethernet(frame)
	eth.SetDst(mac)
	eth.SetSrc(e.ports[out].mac)
}

// decrementTTL lowers the TTL (patching the IPv4 header checksum) or the hop limit by one.
// The caller has checked it is above 1.
func decrementTTL(frame []byte, p *Parsed) {
	if p.isV6() {
		ip := IPv6(frame[p.L3Off:])
		ip.SetHopLimit(ip.HopLimit() - 1)
		return
	}
	ip := IPv4(frame[p.L3Off:p.L4Off])
	w := ip.TTLProtoWord()
	ip.SetTTL(ip.TTL() - 1)
	ip.SetChecksum(csumUpdate(ip.Checksum(), csumDelta16(w, w-0x100)))
}
