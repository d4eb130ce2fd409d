package datapath

import (
	"math/bits"
	"time"
	"unsafe"
)

// Connection tracking (spec §6.5): one fixed array of entries, each holding both directions, and
// one bucketised cuckoo index (bucketindex.go) holding two keys per entry: its client→server key
// and its server→client key. A packet's addressing is looked up once and finds its entry
// whichever way it travels, so a reply costs one index search, not two. Everything is allocated
// up front and pointer-free, so the garbage collector never scans it.

// tuple is the addressing of a packet in one direction.
type tuple struct {
	src, dst     addr
	sport, dport uint16
}

// Direction of a packet relative to its connection.
const (
	dirC2S = 0 // client → server (arrives addressed to the VIP)
	dirS2C = 1 // server → client (reply)
)

// conn flags.
const (
	connInUse   uint8 = 1 << iota
	connFinC2S        // client sent FIN (finSeq[dirC2S] valid)
	connFinS2C        // server sent FIN
	connAckC2S        // client's FIN acknowledged by the server
	connAckS2C        // server's FIN acknowledged by the client
	connFullNAT       // source rewritten too: xlat.src is a proxy-src address, xlat.sport a NAT port
	connReplied       // the server answered (TCP: its SYN+ACK, whose sequence number is in finSeq[dirS2C] while half-open)
	connFinMask = connFinC2S | connFinS2C | connAckC2S | connAckS2C
)

// Connection states. Only established entries are safe from eviction: the others sit on the
// table's half-open list, least recently active first, with the short half-open timeout.
const (
	// connHalfOpen: created by a client SYN (or a UDP datagram) and not yet confirmed. TCP is
	// confirmed by the client's ACK of the server's SYN+ACK (a spoofed source never sends it,
	// so the server's SYN+ACK alone does not count); UDP by any reply.
	connHalfOpen uint8 = iota
	connEstablished
	// connClosing: a RST was seen. The entry keeps its server for the half-open timeout, so a
	// blind RST cannot move the flow: any later segment makes it established again.
	connClosing
)

// conn is the per-packet part of a tracked connection, laid out to fill exactly two cache lines
// (128 bytes); what only creation and removal need lives in connMeta. The first line holds what a
// client→server lookup compares (orig, proto) and the checksum deltas every rewrite applies.
type conn struct {
	// First line (bytes 0–63): the c2s key, proto, the rewrite deltas, half of xlat.
	orig       tuple     // client → VIP, as the client sent it: the c2s key
	proto      uint8     // compared first by a lookup
	flags      uint8     // conn flags
	state      uint8     // connHalfOpen, connEstablished or connClosing
	ipDelta    uint16    // RFC 1624 delta of the c2s IPv4 header rewrite; s2c applies its complement
	l4Delta    uint16    // delta of the c2s TCP/UDP checksum (pseudo-header addresses and ports)
	xlat       tuple     // the same packet as forwarded (client or proxy → server); reversed, the s2c key
	last       int64     // last packet in either direction, ns (64 bits: no wrap to reason about)
	timeoutMs  uint32    // idle time after which the entry expires, ms
	finSeq     [2]uint32 // sequence number carried by each direction's FIN
	serverSlot int32     // server counters
	nh         [2]uint32 // per direction: neighbour slot + 1 of the next hop, 0 = not cached
	nhEpoch    uint32    // neighbour table epoch the cached slots belong to
	// estTimeoutMs is the rule's idle timeout, which the entry takes once established. It
	// fills bytes 124–127, which would otherwise pad the entry.
	estTimeoutMs uint32
}

// connMeta is the rest of an entry (28 bytes: 4-byte aligned, no padding). The index hashes are
// not kept: removal recomputes them from orig and xlat, as insert computes them.
type connMeta struct {
	created  splitNs // creation time
	ruleSlot int32   // rule counters and reference
	arena    int32   // full NAT: port arena the source port (xlat.sport) returns to; -1 none
	sticky   int32   // persistence entry this connection holds; -1 none
	// prev and next link the half-open list (entries not established); -1 ends it. A free
	// entry's next links the free list instead, so the table needs no array of free numbers.
	prev, next int32
}

// splitNs is a time in ns as two 32-bit halves, low first: an int64 field would align connMeta
// to 8 bytes and pad it from 28 to 32.
type splitNs [2]uint32

func toSplitNs(ns int64) splitNs { return splitNs{uint32(ns), uint32(uint64(ns) >> 32)} }
func (s splitNs) ns() int64      { return int64(uint64(s[1])<<32 | uint64(s[0])) }

// connRef is what the index holds for a key: entry number << 1 | direction of the key.
type connRef uint32

func (r connRef) entry() int32 { return int32(r >> 1) }
func (r connRef) dir() int     { return int(r & 1) }

func indexRef(i int32, dir int) uint32 { return uint32(i)<<1 | uint32(dir) }

// connTable holds the entries and their index.
type connTable struct {
	entries []conn
	meta    []connMeta  // parallel to entries
	index   bucketIndex // two keys per entry: 10-slot buckets at most 0.8 full
	// freeHead is the first free entry, the others linked through meta.next; -1 none.
	freeHead int32
	nfree    int
	seed     [3]uint64
	sweep    uint32 // next entry the expiry sweep visits
	// The half-open list: every entry not established, least recently active at the head,
	// so eviction and expiry take the head in O(1).
	hoHead, hoTail int32
	hoCount        int
	halfOpenMs     uint32 // idle timeout of entries on the half-open list
}

// DefaultHalfOpenTimeout is how long an entry lives without completing its handshake (or, for
// UDP, without a reply), and how long one lingers after a RST. A client's SYN retransmissions
// (1, 3, 7 s apart) refresh it; a flood's entries go this soon after the flood.
const DefaultHalfOpenTimeout = 5 * time.Second

func newConnTable(capacity int, seed [3]uint64) connTable {
	n := ceilPow2(max(capacity, 1))
	t := connTable{
		entries: make([]conn, n),
		meta:    make([]connMeta, n),
		index:   newBucketIndex(2 * n),
		nfree:   n,
		seed:    seed,
		hoHead:  -1,
		hoTail:  -1,

		halfOpenMs: uint32(DefaultHalfOpenTimeout / time.Millisecond),
	}
	for i := range t.meta {
		t.meta[i].next = int32(i + 1) // pop low entries first
	}
	t.meta[n-1].next = -1
	return t
}

// count returns the number of live entries.
func (t *connTable) count() int { return len(t.entries) - t.nfree }

// hash mixes a packet's addressing with the table's random seed (so flows cannot be chosen to
// collide) through a 64×64→128-bit multiply, the folding step of wyhash. All 64 bits are used:
// the low ones choose the home bucket, the top 16 are the tag.
func (t *connTable) hash(src, dst addr, sport, dport uint16, proto uint8) uint64 {
	k := uint64(sport)<<48 | uint64(dport)<<32 | uint64(proto)
	hi, lo := bits.Mul64(src.lo^t.seed[0], dst.lo^k^t.seed[1])
	h := hi ^ lo
	if src.hi|dst.hi != 0 { // IPv6: fold in the upper halves too
		hi, lo = bits.Mul64(h^src.hi, dst.hi^t.seed[2])
		h = hi ^ lo
	}
	return h
}

// lookup returns the entry a packet with this addressing belongs to and the direction it
// travels, or -1. h is the hash of the same addressing. The home bucket is one cache line; the
// alternate is read only when the key is not at home.
func (t *connTable) lookup(src, dst addr, sport, dport uint16, proto uint8, h uint64) (int32, int) {
	b, tag := t.index.home(h)
	if ci, dir := t.scan(b, tag, src, dst, sport, dport, proto); ci >= 0 {
		return ci, dir
	}
	if b2 := t.index.alt(b, tag); b2 != b {
		return t.scan(b2, tag, src, dst, sport, dport, proto)
	}
	return -1, 0
}

// scan looks for the key in bucket b: tags first, the entry only where the tag matches.
func (t *connTable) scan(b uint32, tag uint16, src, dst addr, sport, dport uint16, proto uint8) (int32, int) {
	bk := &t.index.buckets[b]
	for s, tg := range bk.tags {
		if tg != tag {
			continue
		}
		r := connRef(bk.refs[s])
		ci := r.entry()
		c := &t.entries[ci]
		if c.proto != proto {
			continue
		}
		if r.dir() == dirC2S {
			if c.orig.src == src && c.orig.dst == dst && c.orig.sport == sport && c.orig.dport == dport {
				return ci, dirC2S
			}
		} else if c.xlat.dst == src && c.xlat.src == dst && c.xlat.dport == sport && c.xlat.sport == dport {
			return ci, dirS2C
		}
	}
	return -1, 0
}

// insertStatus says why insert failed.
type insertStatus uint8

const (
	insertOK       insertStatus = iota
	insertFull                  // no free entry
	insertConflict              // another entry already owns the server→client key
	// insertNoRoom: the index found no room for a key within its displacement bound. Sized
	// for load ≤ 0.8 this practically never happens; callers treat it as a full table.
	insertNoRoom
)

// insert adds c (orig, xlat and proto set) whose c2s key hashes to hC2S, created now under rule
// slot rs, and returns its number; its meta has no NAT arena nor persistence entry yet. The
// caller has looked the c2s key up and not found it.
func (t *connTable) insert(c *conn, hC2S uint64, rs int32, now int64) (int32, insertStatus) {
	if t.nfree == 0 {
		return -1, insertFull
	}
	x := &c.xlat
	hS2C := t.hash(x.dst, x.src, x.dport, x.sport, c.proto)
	if ci, _ := t.lookup(x.dst, x.src, x.dport, x.sport, c.proto, hS2C); ci >= 0 {
		// Replies would be ambiguous: e.g. one client endpoint talking to two VIPs that map to
		// the same server endpoint. The later flow cannot be told apart, so refuse it.
		return -1, insertConflict
	}
	i := t.freeHead
	if !t.index.place(hC2S, indexRef(i, dirC2S)) {
		return -1, insertNoRoom
	}
	if !t.index.place(hS2C, indexRef(i, dirS2C)) {
		t.index.unplace(hC2S, indexRef(i, dirC2S))
		return -1, insertNoRoom
	}
	t.freeHead = t.meta[i].next
	t.nfree--
	c.flags |= connInUse
	t.entries[i] = *c
	t.entries[i].estTimeoutMs = c.timeoutMs
	t.meta[i] = connMeta{created: toSplitNs(now), ruleSlot: rs, arena: -1, sticky: -1, prev: -1, next: -1}
	if c.state != connEstablished {
		t.entries[i].timeoutMs = min(c.timeoutMs, t.halfOpenMs)
		t.hoPush(i)
	}
	return i, insertOK
}

// hoPush appends entry i to the tail of the half-open list.
func (t *connTable) hoPush(i int32) {
	m := &t.meta[i]
	m.prev, m.next = t.hoTail, -1
	if t.hoTail >= 0 {
		t.meta[t.hoTail].next = i
	} else {
		t.hoHead = i
	}
	t.hoTail = i
	t.hoCount++
}

// hoUnlink takes entry i off the half-open list.
func (t *connTable) hoUnlink(i int32) {
	m := &t.meta[i]
	if m.prev >= 0 {
		t.meta[m.prev].next = m.next
	} else {
		t.hoHead = m.next
	}
	if m.next >= 0 {
		t.meta[m.next].prev = m.prev
	} else {
		t.hoTail = m.prev
	}
	m.prev, m.next = -1, -1
	t.hoCount--
}

// hoTouch moves entry i, which is on the half-open list, to its tail: it was just active.
func (t *connTable) hoTouch(i int32) {
	if t.hoTail != i {
		t.hoUnlink(i)
		t.hoPush(i)
	}
}

// remove deletes entry i's two keys from the index, rehashing them as insert hashed them, and
// frees it.
func (t *connTable) remove(i int32) {
	c := &t.entries[i]
	if c.state != connEstablished {
		t.hoUnlink(i)
	}
	o, x := &c.orig, &c.xlat
	t.index.unplace(t.hash(o.src, o.dst, o.sport, o.dport, c.proto), indexRef(i, dirC2S))
	t.index.unplace(t.hash(x.dst, x.src, x.dport, x.sport, c.proto), indexRef(i, dirS2C))
	c.flags, c.state = 0, 0
	t.meta[i].next = t.freeHead
	t.freeHead = i
	t.nfree++
}

// expired reports whether c has been idle in both directions for longer than its timeout.
func (c *conn) expired(now int64) bool { return now-c.last > int64(c.timeoutMs)*1e6 }

// connDead reports whether entry i must go before its next packet: idle past its timeout, or
// its server's conn-drain deadline has passed (spec §6.9).
func (e *Engine) connDead(i int32) bool {
	c := &e.conns.entries[i]
	if c.expired(e.now) {
		return true
	}
	if e.nDraining == 0 {
		return false
	}
	if d := e.srv[c.serverSlot].drainAt; d != 0 && e.now >= d {
		e.count(gConnDrained)
		return true
	}
	return false
}

// removeConn deletes entry i and drops what it holds: its rule reference (a rule gone from the
// configuration whose last connection this was gets its slot reclaimed at the end of the
// burst), its full-NAT source port and its persistence entry, whose persist-timeout starts now.
func (e *Engine) removeConn(i int32) {
	m := &e.conns.meta[i]
	rs := &e.slots[m.ruleSlot]
	rs.refs--
	if rs.refs == 0 && !rs.live {
		e.reclaimPending = true
	}
	e.releaseServer(e.conns.entries[i].serverSlot)
	if m.arena >= 0 {
		e.nat.put(m.arena, e.conns.entries[i].xlat.sport)
	}
	if m.sticky >= 0 {
		e.sticky.release(m.sticky, e.now)
	}
	e.conns.remove(i)
}

// The expiry sweep visits the whole table every connSweepPeriod (Solaris: 15 s), so entries that
// are never looked up again go at most that late; connSweepLimit bounds one burst's share.
const (
	connSweepPeriod = int64(10e9)
	connSweepLimit  = 1024
)

// sweepConns removes expired entries among those that came due for a visit.
func (e *Engine) sweepConns() {
	t := &e.conns
	k := e.connPacer.due(e.now, len(t.entries), connSweepPeriod, connSweepLimit)
	if t.nfree == len(t.entries) {
		return
	}
	m := uint32(len(t.entries) - 1)
	for ; k > 0; k-- {
		i := t.sweep
		t.sweep = (t.sweep + 1) & m
		if t.entries[i].flags&connInUse != 0 && e.connDead(int32(i)) {
			e.removeConn(int32(i))
		}
	}
}

// trackTCP follows the close of a TCP connection from a segment travelling in dir (spec §6.5)
// and reports whether the entry should go once the segment is forwarded: a FIN records its
// sequence number, and when both FINs are acknowledged the entry goes. A client SYN, or a
// segment beyond a recorded FIN (port reuse), clears the close state. RSTs are not its
// business: tcpSetup makes them a closing state, so that a blind one cannot end the flow.
func trackTCP(c *conn, t TCP, flags uint8, dir int, payload int) bool {
	if c.flags&connFinMask == 0 && flags&(TCPFin|TCPSyn) == 0 {
		return false // the common case: an established connection moving data
	}
	seq := t.Seq()
	finFlag, ackFlag := connFinC2S, connAckC2S
	otherFin, otherAck := connFinS2C, connAckS2C
	if dir == dirS2C {
		finFlag, ackFlag, otherFin, otherAck = connFinS2C, connAckS2C, connFinC2S, connAckC2S
	}
	if dir == dirC2S && flags&TCPSyn != 0 && flags&TCPAck == 0 {
		c.flags &^= connFinMask
	}
	if c.flags&finFlag != 0 && flags&TCPFin == 0 && int32(seq-(c.finSeq[dir]+1)) > 0 {
		c.flags &^= connFinMask
	}
	if flags&TCPFin != 0 {
		// The FIN occupies the sequence number after the segment's data.
		c.finSeq[dir] = seq + uint32(payload)
		if flags&TCPSyn != 0 {
			c.finSeq[dir]++
		}
		c.flags |= finFlag
		c.flags &^= ackFlag
	}
	if flags&TCPAck != 0 && c.flags&otherFin != 0 && int32(t.Ack()-(c.finSeq[1-dir]+1)) >= 0 {
		c.flags |= otherAck
	}
	return c.flags&(connAckC2S|connAckS2C) == connAckC2S|connAckS2C
}

// tcpSetup follows the states of entry ci outside the established fast path, from a segment
// travelling in dir: the handshake of a half-open entry, a RST (any state: the entry starts
// closing), and what follows a RST.
func (e *Engine) tcpSetup(ci int32, c *conn, t TCP, flags uint8, dir int) {
	ct := &e.conns
	switch {
	case flags&TCPRst != 0:
		// RFC 5961's concern: a RST with a guessed sequence number must not tear a flow down.
		// The entry keeps its server, for a short time only; a real reset is followed by
		// silence, a blind one by the flow's next segment, which restores it.
		if c.state == connEstablished {
			c.state = connClosing
			c.timeoutMs = min(c.timeoutMs, ct.halfOpenMs)
			ct.hoPush(ci)
			e.count(gConnReset)
		} else {
			ct.hoTouch(ci)
		}
	case c.state == connClosing:
		if dir == dirC2S && flags&(TCPSyn|TCPAck) == TCPSyn {
			// The client reopens the same endpoints: a new handshake, to the same server.
			c.state = connHalfOpen
			c.flags &^= connReplied
			ct.hoTouch(ci)
			return
		}
		e.establish(ci, c)
	case dir == dirS2C:
		if flags&(TCPSyn|TCPAck) == TCPSyn|TCPAck {
			c.flags |= connReplied
			c.finSeq[dirS2C] = t.Seq()
		}
		ct.hoTouch(ci)
	case flags&(TCPSyn|TCPAck) == TCPAck && c.flags&connReplied != 0 && t.Ack() == c.finSeq[dirS2C]+1:
		// The client acknowledges the server's SYN+ACK: only a client that received it
		// knows the server's initial sequence number.
		e.establish(ci, c)
	default:
		ct.hoTouch(ci)
	}
}

// establish makes entry ci established: off the half-open list, with its rule's timeout.
func (e *Engine) establish(ci int32, c *conn) {
	ct := &e.conns
	ct.hoUnlink(ci)
	c.state = connEstablished
	c.flags |= connReplied
	c.flags &^= connFinMask // finSeq held the server's ISN, or the close it tracked was reset
	c.finSeq = [2]uint32{}
	c.timeoutMs = c.estTimeoutMs
}

// evictHalfOpen removes the least recently active entry that is not established, if there is
// one, to make room: never an established entry.
func (e *Engine) evictHalfOpen() bool {
	i := e.conns.hoHead
	if i < 0 || !e.evict {
		return false
	}
	e.removeConn(i)
	e.count(gHalfOpenEvicted)
	return true
}

// natEvictScan bounds how far down the half-open list a full-NAT connection looks for an entry
// holding one of its ports.
const natEvictScan = 64

// evictHalfOpenFor removes the least recently active half-open entry that holds a full-NAT port
// of one of rs's proxy-src addresses, among the natEvictScan oldest: a connection that finds its
// ports exhausted takes them back from a flood's entries, never from other rules' handshakes.
func (e *Engine) evictHalfOpenFor(rs *ruleState) bool {
	if !e.evict {
		return false
	}
	t := &e.conns
	for i, k := t.hoHead, 0; i >= 0 && k < natEvictScan; i, k = t.meta[i].next, k+1 {
		a := t.meta[i].arena
		if a < 0 {
			continue
		}
		for _, px := range rs.proxies {
			if px.arena == a {
				e.removeConn(i)
				e.count(gHalfOpenEvicted)
				return true
			}
		}
	}
	return false
}

// halfOpenExpireLimit bounds the expired half-open entries one burst removes.
const halfOpenExpireLimit = 256

// expireHalfOpen removes expired entries from the head of the half-open list. The list is in
// order of last activity and its entries share one timeout, so the first live entry ends the
// walk; a flood's entries (and their full-NAT ports) go as soon as they time out.
func (e *Engine) expireHalfOpen() {
	t := &e.conns
	for k := 0; k < halfOpenExpireLimit; k++ {
		i := t.hoHead
		if i < 0 || !t.entries[i].expired(e.now) {
			return
		}
		e.removeConn(i)
		e.count(gHalfOpenExpired)
	}
}

// bytes returns the table's allocated memory: entries, their metadata and the index.
func (t *connTable) bytes() int {
	return len(t.entries)*int(unsafe.Sizeof(conn{})) + len(t.meta)*int(unsafe.Sizeof(connMeta{})) + t.index.bytes()
}
