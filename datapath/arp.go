package datapath

// handleARP answers requests for addresses we own by turning the request into the reply in place,
// and learns neighbours from replies and from requests addressed to us (as Linux does).
func (e *Engine) handleARP(frame []byte, p *Parsed, in uint16) Result {
	a := ARP(frame[p.L3Off:p.L3End])
	if !a.IsEthernetIPv4() {
		return e.drop(gARPIgnored, frame)
	}
	senderMAC, senderIP, target := a.SenderHW(), a.SenderIP(), a.TargetIP()
	switch a.Op() {
	case ARPRequest:
		if !e.answersARP(in, target) {
			// Not ours, but a sender we already know may have moved (gratuitous ARP): update only.
			e.learn(addrFrom4(senderIP), in, senderMAC, false)
			return e.drop(gARPIgnored, frame)
		}
		e.learn(addrFrom4(senderIP), in, senderMAC, true)
		if !isUnicastMAC(senderMAC) {
			return e.drop(gARPIgnored, frame)
		}
		mac := e.ports[in].mac
		a.SetOp(ARPReply)
		a.SetTarget(senderMAC, senderIP)
		a.SetSender(mac, target)
		eth := Ethernet(frame)
		eth.SetDst(senderMAC)
		eth.SetSrc(mac)
		e.count(gARPRepliesSent)
		return e.send(in, frame)
	case ARPReply:
		// Create entries only for senders on the port's subnets, so stray replies cannot fill the cache.
		e.learn(addrFrom4(senderIP), in, senderMAC, e.isConnected(in, addrFrom4(senderIP)))
		// The host behind the exception path may be waiting for this reply too.
		return e.pass(gARPRepliesReceived, frame)
	}
	return e.drop(gARPIgnored, frame)
}

// answersARP reports whether the engine owns ip on port in: one of the port's interface
// addresses, a VIP of any rule (enabled or not) or a full-NAT proxy-src address of the current
// snapshot. VIPs and proxy addresses are answered on every port: clients and servers may sit
// behind any of them.
func (e *Engine) answersARP(in uint16, ip uint32) bool {
	return e.owns(in, addrFrom4(ip))
}

// owns reports whether the engine answers ARP/NDP for a on port in.
func (e *Engine) owns(in uint16, a addr) bool {
	if e.portHasAddr(in, a) {
		return true
	}
	return !a.isZero() && a != addrFrom4(0) && e.known[a].flags&(knownVIP|knownProxy) != 0
}

// arpQueue is a ring of neighbour slots waiting for an ARP request to be sent.
type arpQueue struct {
	ring       []uint32
	head, tail uint32 // head: next to pop; tail: next free; both free-running
}

func newARPQueue(n int) arpQueue { return arpQueue{ring: make([]uint32, ceilPow2(n))} }

func (q *arpQueue) push(i uint32) bool {
	if q.tail-q.head == uint32(len(q.ring)) {
		return false // full: the entry is not marked queued and will be retried
	}
	q.ring[q.tail&uint32(len(q.ring)-1)] = i
	q.tail++
	return true
}

func (q *arpQueue) pop() (uint32, bool) {
	if q.head == q.tail {
		return 0, false
	}
	i := q.ring[q.head&uint32(len(q.ring)-1)]
	q.head++
	return i, true
}

// MaxControlFrameSize is the largest frame NextControlFrame writes (a neighbor solicitation);
// an ARP request takes MinFrameSize.
const MaxControlFrameSize = ndpFrameSize

// NextControlFrame writes one frame the engine wants to send of its own accord (a held packet
// whose next hop answered, an ARP request or an IPv6 neighbor solicitation) into buf[:cap(buf)]
// and returns its length and out port; ok is false when nothing is pending. cap(buf) must be at
// least MinFrameSize; with less than MaxControlFrameSize, solicitations are skipped (and retried
// later); give it a whole mbuf's room, or held packets longer than it are dropped. Call it on
// the worker goroutine, after EndBurst.
func (e *Engine) NextControlFrame(buf []byte) (n int, port uint16, ok bool) {
	buf = buf[:cap(buf)]
	if len(buf) < MinFrameSize {
		return 0, 0, false
	}
	if n, port, ok := e.nextReleased(buf); ok {
		return n, port, true
	}
	for {
		i, more := e.arpq.pop()
		if !more {
			return 0, 0, false
		}
		nb := &e.neigh.slots[i]
		if nb.flags&neighQueued == 0 {
			continue // recycled while queued
		}
		nb.flags &^= neighQueued
		if nb.state == neighReachable && e.now-nb.confirmed < neighRefreshAfter {
			continue // answered meanwhile
		}
		if !nb.ip.is4() && len(buf) < ndpFrameSize {
			continue // no room: the maintenance scan asks again
		}
		nb.requested = e.now
		if nb.tries < 255 {
			nb.tries++
		}
		if nb.ip.is4() {
			n = e.buildARPRequest(buf, nb.port, nb.ip.v4())
			e.count(gARPRequestsSent)
		} else {
			n = e.buildNeighSolicit(buf, nb.port, nb.ip)
			e.count(gNDPSolicitsSent)
		}
		e.ctr.g[gTxPackets]++
		e.ctr.g[gTxBytes] += uint64(n)
		return n, nb.port, true
	}
}

// buildARPRequest writes a broadcast who-has for target out of port p, padded to MinFrameSize.
func (e *Engine) buildARPRequest(buf []byte, p uint16, target uint32) int {
	frame := buf[:MinFrameSize]
	clear(frame)
	mac := e.ports[p].mac
	eth := Ethernet(frame)
	eth.SetDst(broadcastMAC)
	eth.SetSrc(mac)
	eth.SetType(EtherTypeARP)
	a := ARP(frame[EthernetHeaderSize:])
	a.SetEthernetIPv4(ARPRequest)
	a.SetSender(mac, e.arpSource(p, target))
	a.SetTarget([6]byte{}, target)
	return MinFrameSize
}
