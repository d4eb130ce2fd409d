package datapath

import "net/netip"

// Flow ownership among several workers. Each worker's engine holds its own connection shard,
// persistence table, full-NAT port share and counters, so every packet of a flow must be
// handled by one worker: its owner. Ownership follows from the packet alone:
//
//   - a packet to a VIP (client → server, DSR included): the client's address;
//   - a half-NAT reply (from a server, to a client): the client's address, its destination;
//   - a full-NAT reply (to a proxy-src address): the worker whose port share holds the
//     destination port (FullNATPortOwner);
//   - an ICMP error about a flow: the owner of the quoted packet's flow;
//   - traffic for the host itself, and anything else: worker 0, which owns the exception path.
//
// The client's address is taken under the steering prefix (SteerPrefix4/6, default the whole
// address), so that every client of one persistence prefix (pmask) is owned by one worker and
// persistence holds whichever worker a packet reaches first: set the steering prefix to the
// shortest pmask in use. Where the device cannot steer this way, the worker that received a
// packet it does not own hands it to the owner (ActionHandoff) over a single-producer,
// single-consumer ring; the owner processes it with ProcessHandedOff.
//
// ARP and NDP are not owned: every worker keeps its own neighbour table, so the worker that
// receives one processes it, and the others learn from a copy (LearnNeighbour).

// ownerOf returns the worker owning a decoded IP packet. It decides from steerKnown, not the
// current snapshot, so that connections of a deleted rule keep their owner while they drain;
// a VIP or proxy-src address that is also an interface address is balanced, not the host's.
func (e *Engine) ownerOf(frame []byte, p *Parsed) int {
	if p.Proto == ProtoICMPv6 && p.isV6() && isNDPType(p.ICMPType) {
		return e.worker // neighbour discovery: every worker's own (LearnNeighbour)
	}
	dst := e.steerKnown[p.dst]
	switch p.Proto {
	case ProtoTCP, ProtoUDP:
		switch {
		case p.Fragment || p.ExtOther:
			return e.worker // no ports: whoever got it drops or passes it
		case dst&knownVIP != 0:
			return e.clientOwner(p.src)
		case dst&knownProxy != 0:
			return FullNATPortOwner(p.DstPort, e.workers)
		case e.isLocalAddr(p.dst):
			return 0
		case e.steerKnown[p.src]&knownServer != 0:
			return e.clientOwner(p.dst) // a half-NAT reply
		}
		return 0
	case ProtoICMP, ProtoICMPv6:
		if dst&(knownVIP|knownProxy) == 0 {
			return 0
		}
		if !isICMPError(p) {
			return e.worker // echo: stateless, answered where it arrives
		}
		q, ok := parseQuoted(frame, p)
		if !ok {
			return e.worker
		}
		// The quoted packet is one the engine sent: toward a client (from a VIP), or toward a
		// server from a proxy-src address (full NAT).
		if dst&knownProxy != 0 && q.t.src == p.dst {
			return FullNATPortOwner(q.t.sport, e.workers)
		}
		return e.clientOwner(q.t.dst)
	}
	return 0 // the host's, or nobody's
}

// isICMPError reports whether an ICMP or ICMPv6 message is an error quoting a packet.
func isICMPError(p *Parsed) bool {
	if p.isV6() {
		return p.ICMPType < 128
	}
	switch p.ICMPType {
	case ICMPv4DestUnreach, 11, 12: // destination unreachable, time exceeded, parameter problem
		return true
	}
	return false
}

// clientOwner maps a client address, under the steering prefix, to a worker: a multiplicative
// hash reduced to [0, workers) without a division.
func (e *Engine) clientOwner(a addr) int {
	var h uint64
	if a.is4() {
		h = uint64(a.v4()&e.steer4) * 0x9e3779b97f4a7c15
	} else {
		m := a.and(e.steer6)
		h = (m.hi*0xff51afd7ed558ccd ^ m.lo) * 0x9e3779b97f4a7c15
	}
	return int((h >> 32) * uint64(e.workers) >> 32)
}

// ProcessHandedOff handles a frame another worker received and handed to this one as its
// owner (Result.Action ActionHandoff): as Process, without asking who owns it again.
func (e *Engine) ProcessHandedOff(frame []byte, inPort uint16) Result {
	e.ctr.g[gHandoffIn]++
	e.handedOff = true
	r := e.Process(frame, inPort)
	e.handedOff = false
	return r
}

// IsNeighbourFrame reports, from the headers alone, whether a frame is ARP or an IPv6
// neighbour solicitation or advertisement without extension headers: what every worker's
// neighbour table must see (LearnNeighbour), whichever worker received it.
func IsNeighbourFrame(frame []byte) bool {
	if len(frame) < EthernetHeaderSize {
		return false
	}
	switch Ethernet(frame).Type() {
	case EtherTypeARP:
		return true
	case EtherTypeIPv6:
		const icmpType = EthernetHeaderSize + IPv6HeaderSize
		if len(frame) <= icmpType || frame[EthernetHeaderSize+6] != ProtoICMPv6 {
			return false
		}
		return frame[icmpType] == ICMPv6NeighSolicit || frame[icmpType] == ICMPv6NeighAdvert
	}
	return false
}

// LearnNeighbour updates the neighbour table from a copy of an ARP or NDP frame that another
// worker received (and answered, if it asked for one of our addresses): entries are learned as
// that worker learned them, nothing is sent. Other frames are ignored. It never allocates.
func (e *Engine) LearnNeighbour(frame []byte, inPort uint16) {
	if int(inPort) >= len(e.ports) {
		return
	}
	e.ctr.g[gNeighbourCopies]++
	p := &e.pkt
	if p.Decode(frame) != ParseOK || p.Tagged {
		return
	}
	switch {
	case p.EtherType == EtherTypeARP:
		a := ARP(frame[p.L3Off:p.L3End])
		if !a.IsEthernetIPv4() {
			return
		}
		sender := addrFrom4(a.SenderIP())
		switch a.Op() {
		case ARPRequest:
			e.learn(sender, inPort, a.SenderHW(), e.answersARP(inPort, a.TargetIP()))
		case ARPReply:
			e.learn(sender, inPort, a.SenderHW(), e.isConnected(inPort, sender))
		}
	case p.isV6() && p.Proto == ProtoICMPv6 && isNDPType(p.ICMPType):
		e.learnNDP(frame, p, inPort)
	}
}

// learnNDP learns from a copy of a neighbour solicitation or advertisement as handleNDP and
// answerSolicit would, validating it the same way (RFC 4861 §7.1), without answering.
func (e *Engine) learnNDP(frame []byte, p *Parsed, in uint16) {
	if p.ICMPType != ICMPv6NeighSolicit && p.ICMPType != ICMPv6NeighAdvert {
		return
	}
	msg := frame[p.L4Off:p.L3End]
	if p.TTL != ndpHopLimit || p.ICMPCode != 0 || len(msg) < ndpMinSize || !icmpChecksumValid(frame, p) {
		return
	}
	n := NDP(msg)
	target := n.Target()
	if target.isMulticast6() {
		return
	}
	if p.ICMPType == ICMPv6NeighSolicit {
		lla, found, valid := n.LinkAddr(ndpOptSrcLLA)
		if valid && found && !p.src.isZero() {
			e.learn(p.src, in, lla, e.owns(in, target))
		}
		return
	}
	lla, found, valid := n.LinkAddr(ndpOptTgtLLA)
	if !valid || !found || (p.dst.isMulticast6() && n.Flags()&ndpFlagSolicit != 0) {
		return
	}
	e.learn(target, in, lla, !p.dst.isMulticast6() && e.isConnected(in, target))
}

// ConnCapacity returns the number of entries of the engine's connection table.
func (e *Engine) ConnCapacity() int { return len(e.conns.entries) }

// Worker returns the engine's index among the workers.
func (e *Engine) Worker() int { return e.worker }

// OwnerOfClient returns the worker, among workers, that owns the flows of client a with the
// default steering prefix (the whole address): for tests and tools that place flows.
func OwnerOfClient(a netip.Addr, workers int) int {
	e := Engine{workers: max(workers, 1), steer4: ^uint32(0), steer6: prefixMask(false, 128)}
	return e.clientOwner(addrFromNetip(a.Unmap()))
}

// ConnTableBytes returns the memory of the connection table as allocated (entries, their
// metadata, the index and the free list), for the bytes-per-connection figure.
func (e *Engine) ConnTableBytes() int { return e.conns.bytes() }
