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

// conn is the per-packet part of a tracked connection: one cache line (64 bytes), so a lookup
// and a rewrite touch one line of the table. It holds the client's address and the ports, and
// names the rest by number: the VIP and the timeout by rule slot, the server by server slot,
// full NAT's source address by port arena (connNames). Those numbers stay valid while the entry
// lives: slots and arenas are reclaimed only after their last connection.
type conn struct {
	client  addr   // the client's address (the c2s source)
	cport   uint16 // the client's port
	vport   uint16 // the VIP port the client addressed
	sport   uint16 // the server's port
	nport   uint16 // the source port toward the server: full NAT's port, else cport
	rule    int32  // rule slot: VIP, idle timeout, counters and reference
	server  int32  // server slot: address, counters, next hop toward it
	last    uint32 // last packet in either direction, ms of the worker clock (compared modulo 2^32)
	created uint32 // creation, ms of the worker clock (for the NAT table dump)
	nh      uint32 // neighbour slot + 1 of the next hop toward the client, 0 = not cached
	nhEpoch uint32 // neighbour table epoch nh belongs to
	sticky  int32  // persistence entry this connection holds; -1 none
	ipDelta uint16 // RFC 1624 delta of the c2s IPv4 header rewrite; s2c applies its complement
	l4Delta uint16 // delta of the c2s TCP/UDP checksum (pseudo-header addresses and ports)
	arena   uint16 // full NAT: port arena + 1 the source port (nport) returns to; 0 none
	proto   uint8
	flags   uint8
	state   uint8 // connHalfOpen, connEstablished or connClosing
	_       [3]byte
}

// connMeta is the rest of an entry: what only the handshake, the close and the half-open list
// need (16 bytes).
type connMeta struct {
	finSeq [2]uint32 // sequence number carried by each direction's FIN; the server's ISN while half-open
	// prev and next link the half-open list (entries not established); -1 ends it. A free
	// entry's next links the free list instead, so the table needs no array of free numbers.
	prev, next int32
}

// connNames are the addresses entries name by number, kept current by the engine as it
// creates rule slots, server slots and port arenas.
type connNames struct {
	vip       []addr   // by rule slot
	timeoutMs []uint32 // by rule slot: the idle timeout of its established connections
	server    []addr   // by server slot
	proxy     []addr   // by port arena
}

// maxConnTimeoutMs bounds an idle timeout so that entry times compared modulo 2^32 ms stay
// unambiguous (the sweep visits every entry far more often than this).
const maxConnTimeoutMs = 1<<31 - 1

// setRule records rule slot s's VIP and idle timeout.
func (n *connNames) setRule(s int32, vip addr, timeoutMs uint32) {
	for int(s) >= len(n.vip) {
		n.vip, n.timeoutMs = append(n.vip, addr{}), append(n.timeoutMs, 0)
	}
	n.vip[s], n.timeoutMs[s] = vip, min(timeoutMs, maxConnTimeoutMs)
}

// setServer records server slot s's address.
func (n *connNames) setServer(s int32, a addr) {
	for int(s) >= len(n.server) {
		n.server = append(n.server, addr{})
	}
	n.server[s] = a
}

// setProxy records port arena i's address.
func (n *connNames) setProxy(i int32, a addr) {
	for int(i) >= len(n.proxy) {
		n.proxy = append(n.proxy, addr{})
	}
	n.proxy[i] = a
}

// maxArenas is the number of port arenas an entry can name.
const maxArenas = 1<<16 - 1

// natSrc returns the source address of c's packets toward the server.
func (t *connTable) natSrc(c *conn) addr {
	if c.arena != 0 {
		return t.names.proxy[c.arena-1]
	}
	return c.client
}

// orig returns c's client → VIP addressing, as the client sends it: the c2s key.
func (t *connTable) orig(c *conn) tuple {
	return tuple{src: c.client, dst: t.names.vip[c.rule], sport: c.cport, dport: c.vport}
}

// xlat returns c's addressing as forwarded to the server; reversed, it is the s2c key.
func (t *connTable) xlat(c *conn) tuple {
	return tuple{src: t.natSrc(c), dst: t.names.server[c.server], sport: c.nport, dport: c.sport}
}

// timeoutMs returns c's idle timeout: its rule's once established, at most the half-open
// timeout before that and after a RST.
func (t *connTable) timeoutMs(c *conn) uint32 {
	to := t.names.timeoutMs[c.rule]
	if c.state != connEstablished {
		to = min(to, t.halfOpenMs)
	}
	return to
}

// msOf converts a worker time in ns to the ms ticks entries record.
func msOf(ns int64) uint32 { return uint32(ns / 1e6) }

// msBefore returns the worker time in ns of a tick recorded at most 2^31 ms before now.
func msBefore(now int64, tick uint32) int64 {
	return (now/1e6 - int64(msOf(now)-tick)) * 1e6
}

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
	names   connNames   // what entries name by number
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
	if b2 := t.index.alt(b, tag); b2 != b && t.index.buckets[b].spill != 0 { // else the key is not in its alternate
		return t.scan(b2, tag, src, dst, sport, dport, proto)
	}
	return -1, 0
}

// scan looks for the key in bucket b: tags first, the entry only where the tag matches.
func (t *connTable) scan(b uint32, tag uint16, src, dst addr, sport, dport uint16, proto uint8) (int32, int) {
	bk := &t.index.buckets[b]
	for m := bk.match(tag); m != 0; m &= m - 1 {
		r := connRef(bk.refs[bits.TrailingZeros32(m)])
		ci := r.entry()
		c := &t.entries[ci]
		if c.proto != proto {
			continue
		}
		if r.dir() == dirC2S {
			if c.client == src && c.cport == sport && c.vport == dport && t.names.vip[c.rule] == dst {
				return ci, dirC2S
			}
		} else if c.sport == sport && c.nport == dport && t.names.server[c.server] == src && t.natSrc(c) == dst {
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

// insert adds c (addressing, rule, server, arena and proto set; its addresses in t.names)
// whose c2s key hashes to hC2S, created now, and returns its number. The caller has looked the
// c2s key up and not found it.
func (t *connTable) insert(c *conn, hC2S uint64, now int64) (int32, insertStatus) {
	if t.nfree == 0 {
		return -1, insertFull
	}
	x := t.xlat(c)
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
	c.last, c.created = msOf(now), msOf(now)
	t.entries[i] = *c
	t.meta[i] = connMeta{prev: -1, next: -1}
	if c.state != connEstablished {
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
	o, x := t.orig(c), t.xlat(c)
	t.index.unplace(t.hash(o.src, o.dst, o.sport, o.dport, c.proto), indexRef(i, dirC2S))
	t.index.unplace(t.hash(x.dst, x.src, x.dport, x.sport, c.proto), indexRef(i, dirS2C))
	c.flags, c.state = 0, 0
	t.meta[i].next = t.freeHead
	t.freeHead = i
	t.nfree++
}

// expired reports whether entry i has been idle in both directions for longer than its timeout
// at nowMs (msOf of the worker time).
func (t *connTable) expired(i int32, nowMs uint32) bool {
	c := &t.entries[i]
	return nowMs-c.last > t.timeoutMs(c)
}

// connDead reports whether entry i must go before its next packet: idle past its timeout, or
// its server's conn-drain deadline has passed (spec §6.9).
func (e *Engine) connDead(i int32) bool {
	if e.conns.expired(i, e.nowMs) {
		return true
	}
	return e.nDraining != 0 && e.drainDue(i)
}

// drainDue reports (and counts) whether entry i's server's conn-drain deadline has passed.
func (e *Engine) drainDue(i int32) bool {
	if d := e.srv[e.conns.entries[i].server].drainAt; d != 0 && e.now >= d {
		e.count(gConnDrained)
		return true
	}
	return false
}

// removeConn deletes entry i and drops what it holds: its rule reference (a rule gone from the
// configuration whose last connection this was gets its slot reclaimed at the end of the
// burst), its full-NAT source port and its persistence entry, whose persist-timeout starts now.
func (e *Engine) removeConn(i int32) {
	c := &e.conns.entries[i]
	rs := &e.slots[c.rule]
	rs.refs--
	if rs.refs == 0 && !rs.live {
		e.reclaimPending = true
	}
	e.releaseServer(c.server)
	if c.arena != 0 {
		e.nat.put(int32(c.arena-1), c.nport)
	}
	if c.sticky >= 0 {
		e.sticky.release(c.sticky, e.now)
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
func trackTCP(c *conn, m *connMeta, t TCP, flags uint8, dir int, payload int) bool {
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
	if c.flags&finFlag != 0 && flags&TCPFin == 0 && int32(seq-(m.finSeq[dir]+1)) > 0 {
		c.flags &^= connFinMask
	}
	if flags&TCPFin != 0 {
		// The FIN occupies the sequence number after the segment's data.
		m.finSeq[dir] = seq + uint32(payload)
		if flags&TCPSyn != 0 {
			m.finSeq[dir]++
		}
		c.flags |= finFlag
		c.flags &^= ackFlag
	}
	if flags&TCPAck != 0 && c.flags&otherFin != 0 && int32(t.Ack()-(m.finSeq[1-dir]+1)) >= 0 {
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
			c.state = connClosing // its timeout is the half-open one from here
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
			ct.meta[ci].finSeq[dirS2C] = t.Seq()
		}
		ct.hoTouch(ci)
	case flags&(TCPSyn|TCPAck) == TCPAck && c.flags&connReplied != 0 && t.Ack() == ct.meta[ci].finSeq[dirS2C]+1:
		// The client acknowledges the server's SYN+ACK: only a client that received it
		// knows the server's initial sequence number.
		e.establish(ci, c)
	default:
		ct.hoTouch(ci)
	}
}

// establish makes entry ci established: off the half-open list, so with its rule's timeout.
func (e *Engine) establish(ci int32, c *conn) {
	ct := &e.conns
	ct.hoUnlink(ci)
	c.state = connEstablished
	c.flags |= connReplied
	c.flags &^= connFinMask // finSeq held the server's ISN, or the close it tracked was reset
	ct.meta[ci].finSeq = [2]uint32{}
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
	e.conns.warmVictims()
	return true
}

// warmVictims prepares the next evictions from the head of the half-open list: it prefetches
// the index buckets of the next victim's keys (its entry was warmed by the previous call) and
// the entry and metadata of the one after. A flood evicts one entry per SYN, and an eviction
// would otherwise wait for four or five cold lines one after another.
func (t *connTable) warmVictims() {
	v := t.hoHead
	if v < 0 {
		return
	}
	c := &t.entries[v]
	o, x := t.orig(c), t.xlat(c)
	b1, _ := t.index.home(t.hash(o.src, o.dst, o.sport, o.dport, c.proto))
	b2, _ := t.index.home(t.hash(x.dst, x.src, x.dport, x.sport, c.proto))
	lines := [4]uintptr{uintptr(unsafe.Pointer(&t.index.buckets[b1])), uintptr(unsafe.Pointer(&t.index.buckets[b2]))}
	k := 2
	if n := t.meta[v].next; n >= 0 {
		lines[2], lines[3] = uintptr(unsafe.Pointer(&t.entries[n])), uintptr(unsafe.Pointer(&t.meta[n]))
		k = 4
	}
	prefetchLines(&lines[0], k)
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
		a := int32(t.entries[i].arena) - 1
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
		if i < 0 || !t.expired(i, e.nowMs) {
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
