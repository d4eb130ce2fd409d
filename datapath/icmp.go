package datapath

import "encoding/binary"

// ICMP for the load balancer's own addresses (spec §6.8). Only messages addressed to a VIP (of
// any rule, enabled or not) or to a full-NAT proxy-src address are handled; other ICMP is the
// host's or a transit packet's business and is passed.
//
//   - Echo requests are answered in place: addresses swapped, type changed, TTL/hop limit reset
//     to 64, checksums patched incrementally.
//   - IPv4 fragmentation-needed and IPv6 packet-too-big quote a packet we sent. It is looked up
//     in the connection table; on a hit both the quoted and the outer headers are translated
//     back to the side that sent the quoted packet, so path MTU discovery works through the
//     load balancer: a message to the VIP (about a reply we sent the client) goes to the
//     server, and for full NAT a message to the proxy-src address (about a request we sent the
//     server) goes to the client. Misses are dropped.
//   - Anything else is dropped.
//
// Counting uses the rule of the connection for translated errors, and otherwise the first rule
// on the VIP (Solaris counts on the rule it finds for the VIP). Proxy-src addresses belong to no
// single rule: only the global counters see their messages.

// handleICMP handles an ICMP or ICMPv6 message that is not neighbour discovery.
func (e *Engine) handleICMP(frame []byte, p *Parsed, in uint16) Result {
	k := e.known[p.dst]
	if k.flags&(knownVIP|knownProxy) == 0 {
		return e.passOther(p, frame)
	}
	rslot := int32(-1)
	if k.flags&knownVIP != 0 && int(k.rule) < len(e.rules) {
		rslot = e.rules[k.rule].slot
	}
	if p.isV6() {
		switch p.ICMPType {
		case ICMPv6EchoRequest:
			return e.icmpEcho(frame, p, in, rslot, ICMPv6EchoReply)
		case ICMPv6PacketTooBig:
			return e.icmpTooBig(frame, p, rslot)
		}
	} else {
		switch {
		case p.ICMPType == ICMPv4EchoRequest:
			return e.icmpEcho(frame, p, in, rslot, ICMPv4EchoReply)
		case p.ICMPType == ICMPv4DestUnreach && p.ICMPCode == ICMPv4FragNeededCode:
			return e.icmpTooBig(frame, p, rslot)
		}
	}
	if rslot >= 0 {
		e.ctr.ruleInc(rslot, rICMPDropped)
	}
	return e.drop(gICMPDropped, frame)
}

// icmpEchoTTL is the TTL/hop limit of echo replies the engine originates (the system default
// Solaris resets them to).
const icmpEchoTTL = 64

// icmpEcho answers an echo request in place and sends the reply back where the request came from.
func (e *Engine) icmpEcho(frame []byte, p *Parsed, in uint16, rslot int32, replyType uint8) Result {
	eth := Ethernet(frame)
	back := eth.Src()
	if !isUnicastMAC(back) {
		if rslot >= 0 {
			e.ctr.ruleInc(rslot, rICMPDropped)
		}
		return e.drop(gICMPDropped, frame)
	}
	// Swapping the addresses changes neither the IPv4 header checksum nor the ICMPv6
	// pseudo-header sum; only the TTL and the type enter the deltas.
	if p.isV6() {
		ip := IPv6(frame[p.L3Off:])
		ip.SetSrc(p.dst)
		ip.SetDst(p.src)
		ip.SetHopLimit(icmpEchoTTL)
	} else {
		ip := IPv4(frame[p.L3Off:p.L4Off])
		ip.SetSrc(p.dst.v4())
		ip.SetDst(p.src.v4())
		w := ip.TTLProtoWord()
		ip.SetTTL(icmpEchoTTL)
		ip.SetChecksum(csumUpdate(ip.Checksum(), csumDelta16(w, ip.TTLProtoWord())))
	}
	msg := ICMP(frame[p.L4Off:p.L3End])
	w := msg.TypeCodeWord()
	msg.SetType(replyType)
	sum := csumUpdate(msg.Checksum(), csumDelta16(w, msg.TypeCodeWord()))
	if sum == 0 && !p.isV6() && allZeroButChecksum(msg) {
		// An ICMPv4 reply of nothing but zeros (id 0, sequence 0, no data) sums to +0, whose
		// checksum is 0xffff; the incremental update yields the other zero. ICMPv6 always has
		// a non-zero pseudo-header, and every other rewrite covers a non-zero header.
		sum = 0xffff
	}
	msg.SetChecksum(sum)
	eth.SetDst(back)
	eth.SetSrc(e.ports[in].mac)
	if rslot >= 0 {
		e.ctr.ruleInc(rslot, rICMPEchoProcessed)
	}
	e.count(gICMPEchoReplies)
	return e.send(in, frame)
}

// allZeroButChecksum reports whether every byte of an ICMP message but its checksum is zero.
func allZeroButChecksum(msg ICMP) bool {
	for i, b := range msg {
		if b != 0 && i != icmpChecksum && i != icmpChecksum+1 {
			return false
		}
	}
	return true
}

// quoted is the addressing of the packet an ICMP error quotes.
type quoted struct {
	l3, l4  int // offsets of the quoted IP and transport headers in the frame
	end     int // end of the quoted bytes
	proto   uint8
	t       tuple
	v6      bool
	hasCsum bool // the quoted bytes include the transport checksum field
}

// parseQuoted finds the quoted IP header and the ports after it; false if the quote is too
// short or not TCP/UDP (only those have connections), or a non-first fragment (no ports).
func parseQuoted(frame []byte, p *Parsed) (q quoted, ok bool) {
	q.l3, q.end = p.L4Off+icmpBody, p.L3End
	b := frame[q.l3:q.end]
	if p.isV6() {
		if len(b) < IPv6HeaderSize+8 || IPv6(b).Version() != 6 {
			return q, false
		}
		ip := IPv6(b)
		q.v6, q.proto, q.l4 = true, ip.NextHeader(), q.l3+IPv6HeaderSize
		q.t.src, q.t.dst = ip.Src(), ip.Dst()
	} else {
		if len(b) < IPv4MinSize || IPv4(b).Version() != 4 {
			return q, false
		}
		ip := IPv4(b)
		hl := ip.HeaderLen()
		if hl < IPv4MinSize || hl+8 > len(b) || binary.BigEndian.Uint16(b[ipv4FlagsFrag:])&ipv4FragOffset != 0 {
			return q, false
		}
		q.proto, q.l4 = ip.Protocol(), q.l3+hl
		q.t.src, q.t.dst = addrFrom4(ip.Src()), addrFrom4(ip.Dst())
	}
	if q.proto != ProtoTCP && q.proto != ProtoUDP {
		return q, false
	}
	l4 := frame[q.l4:q.end]
	q.t.sport = binary.BigEndian.Uint16(l4[l4SrcPort:])
	q.t.dport = binary.BigEndian.Uint16(l4[l4DstPort:])
	q.hasCsum = len(l4) >= l4ChecksumOffset(q.proto)+2
	return q, true
}

// icmpTooBig translates a fragmentation-needed / packet-too-big message about one of our
// connections and forwards it to the endpoint that sent the quoted packet.
func (e *Engine) icmpTooBig(frame []byte, p *Parsed, rslot int32) Result {
	// The message is rewritten and its checksum recomputed below, which must not launder a
	// corrupted message into a valid one: verify first.
	if !icmpChecksumValid(frame, p) {
		return e.tooBigDropped(frame, rslot)
	}
	q, ok := parseQuoted(frame, p)
	if !ok {
		return e.tooBigDropped(frame, rslot)
	}
	// The quoted packet is one we sent; the reply direction of its own flow is its key reversed.
	t := &e.conns
	h := t.hash(q.t.dst, q.t.src, q.t.dport, q.t.sport, q.proto)
	ci, dir := t.lookup(q.t.dst, q.t.src, q.t.dport, q.t.sport, q.proto, h)
	if ci >= 0 && e.connDead(ci) {
		e.removeConn(ci)
		ci = -1
	}
	if ci < 0 {
		return e.tooBigDropped(frame, rslot)
	}
	c := &t.entries[ci]
	full := c.flags&connFullNAT != 0
	o, x := t.orig(c), t.xlat(c)
	var outSrc, outDst addr
	var inner tuple
	if dir == dirC2S {
		// The quote went VIP → client: the server sent it. Back to the server, and for full NAT
		// from the proxy address, which is what the server knows us by (Solaris' ilb_nat_icmpv4).
		if p.dst != o.dst {
			return e.tooBigDropped(frame, rslot)
		}
		outSrc, outDst = p.src, x.dst
		if full {
			outSrc = x.src
		}
		inner = tuple{src: x.dst, dst: x.src, sport: x.dport, dport: x.sport}
	} else {
		// The quote went proxy → server: the client sent it (full NAT only). Back to the client,
		// from the VIP it talks to.
		if !full || p.dst != x.src {
			return e.tooBigDropped(frame, rslot)
		}
		outSrc, outDst = o.dst, o.src
		inner = tuple{src: o.src, dst: o.dst, sport: o.sport, dport: o.dport}
	}
	if p.TTL <= 1 {
		return e.drop(gTTLExceeded, frame)
	}
	out, mac, rt := e.routeConn(c, dir, frame) // toward outDst: the server (c2s) or the client
	if rt != routeOK {
		if rt == routeUnresolved {
			e.count(gDropped) // an ICMP error is not worth a hold slot
		}
		return Result{Action: ActionDrop, Len: len(frame)}
	}
	rewriteQuoted(frame, &q, &inner)
	if p.isV6() {
		ip := IPv6(frame[p.L3Off:])
		ip.SetSrc(outSrc)
		ip.SetDst(outDst)
		ip.SetHopLimit(ip.HopLimit() - 1)
	} else {
		ip := IPv4(frame[p.L3Off:p.L4Off])
		ip.SetSrc(outSrc.v4())
		ip.SetDst(outDst.v4())
		w := ip.TTLProtoWord()
		ip.SetTTL(ip.TTL() - 1)
		d := csumAdd(csumAdd(csumDeltaAddr(p.src, outSrc), csumDeltaAddr(p.dst, outDst)), csumDelta16(w, w-0x100))
		ip.SetChecksum(csumUpdate(ip.Checksum(), d))
	}
	setICMPChecksum(frame[p.L4Off:p.L3End], p.isV6(), outSrc, outDst)
	eth := Ethernet(frame)
	eth.SetDst(mac)
	eth.SetSrc(e.ports[out].mac)
	e.ctr.ruleInc(c.rule, rICMPTooBigProcessed)
	e.count(gICMPTooBigForwarded)
	return e.send(out, frame)
}

// rewriteQuoted readdresses the quoted packet to inner, patching its IPv4 header checksum and,
// where the quote includes it, its transport checksum, so the receiver matches it to its socket.
func rewriteQuoted(frame []byte, q *quoted, inner *tuple) {
	dAddr := csumAdd(csumDeltaAddr(q.t.src, inner.src), csumDeltaAddr(q.t.dst, inner.dst))
	if q.v6 {
		ip := IPv6(frame[q.l3:])
		ip.SetSrc(inner.src)
		ip.SetDst(inner.dst)
	} else {
		ip := IPv4(frame[q.l3:q.l4])
		ip.SetSrc(inner.src.v4())
		ip.SetDst(inner.dst.v4())
		ip.SetChecksum(csumUpdate(ip.Checksum(), dAddr))
	}
	l4 := frame[q.l4:q.end]
	binary.BigEndian.PutUint16(l4[l4SrcPort:], inner.sport)
	binary.BigEndian.PutUint16(l4[l4DstPort:], inner.dport)
	if !q.hasCsum {
		return
	}
	off := l4ChecksumOffset(q.proto)
	sum := binary.BigEndian.Uint16(l4[off:])
	if q.proto == ProtoUDP && sum == 0 {
		return // no checksum, stays so
	}
	d := csumAdd(dAddr, csumAdd(csumDelta16(q.t.sport, inner.sport), csumDelta16(q.t.dport, inner.dport)))
	if sum = csumUpdate(sum, d); sum == 0 && q.proto == ProtoUDP {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(l4[off:], sum)
}

// tooBigDropped counts and drops a frag-needed / packet-too-big message we cannot translate.
func (e *Engine) tooBigDropped(frame []byte, rslot int32) Result {
	if rslot >= 0 {
		e.ctr.ruleInc(rslot, rICMPTooBigDropped)
	}
	return e.drop(gICMPTooBigDropped, frame)
}
