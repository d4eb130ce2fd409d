package datapath

// Neighbour (ARP and NDP) cache: fixed-size, pointer-free, open addressing with a bounded probe window.
// Slots are never emptied once used, only recycled in place, so a lookup may stop at the first
// never-used slot without tombstones.

// Neighbour timing, in nanoseconds of the worker's clock.
const (
	neighRefreshAfter = int64(30e9)  // re-request a used or configured entry after this long unconfirmed
	neighExpireAfter  = int64(300e9) // stop trusting a MAC after this long unconfirmed
	neighRetryAfter   = int64(1e9)   // minimum gap between requests for one address
	neighFastTries    = 3            // unanswered requests retried every neighRetryAfter, then every neighRefreshAfter
	neighProbeWindow  = 16           // slots an address may sit from its home slot
	neighScanPeriod   = int64(1e9)   // the maintenance scan covers the whole table this often
	neighScanLimit    = 256          // at most this many slots per burst, to bound a burst's latency
)

type neighState uint8

const (
	neighUnused     neighState = iota // never used: ends a lookup probe
	neighIncomplete                   // MAC unknown: requested or expired
	neighReachable                    // MAC known and confirmed at .confirmed
)

// Neighbour entry flags.
const (
	neighWanted uint8 = 1 << iota // a configured next hop (server or gateway): kept resolved proactively
	neighUsed                     // forwarded through since last confirmed: worth refreshing
	neighQueued                   // waiting in the ARP request queue
)

// neighbour is one cache entry, keyed by (address, port).
type neighbour struct {
	ip        addr
	confirmed int64 // when the MAC was last learned or confirmed
	requested int64 // when an ARP request was last sent
	mac       [6]byte
	port      uint16
	state     neighState
	flags     uint8
	tries     uint8 // requests sent since the last confirmation
	held      uint8 // frames in the hold queue waiting for this MAC
}

// neighTable is the cache storage.
type neighTable struct {
	slots []neighbour
	mask  uint32
	shift uint
	// epoch changes whenever a slot is recycled for another address, which invalidates the slot
	// numbers connections cache for their next hops.
	epoch uint32
}

func newNeighTable(capacity int) neighTable {
	n := ceilPow2(max(capacity, neighProbeWindow))
	return neighTable{slots: make([]neighbour, n), mask: uint32(n - 1), shift: uint(64 - log2(n))}
}

// home returns the first slot to probe for (ip, port), by Fibonacci hashing.
func (t *neighTable) home(ip addr, p uint16) uint32 {
	x := (ip.lo ^ ip.hi*0xff51afd7ed558ccd ^ uint64(p)<<52) * 0x9e3779b97f4a7c15
	return uint32(x >> t.shift)
}

// find returns the slot of (ip, port), or -1.
func (t *neighTable) find(ip addr, p uint16) int {
	i := t.home(ip, p)
	for k := 0; k < neighProbeWindow; k++ {
		n := &t.slots[i]
		if n.state == neighUnused {
			return -1
		}
		if n.ip == ip && n.port == p {
			return int(i)
		}
		i = (i + 1) & t.mask
	}
	return -1
}

// insert returns the slot of (ip, port), creating an incomplete entry if needed. When the window
// is full it recycles the least valuable entry: not configured, not queued, oldest activity.
func (t *neighTable) insert(ip addr, p uint16) int {
	i := t.home(ip, p)
	victim, victimScore := -1, int64(0)
	for k := 0; k < neighProbeWindow; k++ {
		n := &t.slots[i]
		if n.state == neighUnused {
			victim = int(i)
			break
		}
		if n.ip == ip && n.port == p {
			return int(i)
		}
		score := max(n.confirmed, n.requested)
		if n.flags&(neighWanted|neighQueued) != 0 || n.held > 0 {
			score += 1 << 62 // recycle configured or pending entries, or ones packets wait for, last
		}
		if victim < 0 || score < victimScore {
			victim, victimScore = int(i), score
		}
		i = (i + 1) & t.mask
	}
	if t.slots[victim].state != neighUnused {
		t.epoch++
	}
	t.slots[victim] = neighbour{ip: ip, port: p, state: neighIncomplete}
	return victim
}

// learn records that ip on port p has MAC mac, creating the entry if create is set.
func (e *Engine) learn(ip addr, p uint16, mac [6]byte, create bool) {
	if !isUnicastMAC(mac) || ip == addrFrom4(0) || ip.isZero() {
		return
	}
	i := e.neigh.find(ip, p)
	if i < 0 {
		if !create {
			return
		}
		i = e.neigh.insert(ip, p)
	}
	n := &e.neigh.slots[i]
	n.mac = mac
	n.state = neighReachable
	n.confirmed = e.now
	n.tries = 0
	n.flags &^= neighUsed
	if e.heldq.waiting > 0 { // by address, not by count: a recycled entry may have lost it
		n.held = 0
		e.releaseHeld(ip, p, mac)
	}
}

// glean records the MAC of a client on a connected subnet from the frame that opens its
// connection, unless the cache already holds a confirmed MAC for that address. A client that
// already knows ilbd's MAC never ARPs for it, so without this the server's first reply would
// be dropped while ilbd asks for the client's MAC, costing the client a retransmission
// (a second for a TCP SYN). A confirmed entry is never overwritten from an IP packet, so a
// forged source address cannot redirect a known neighbour; ARP refreshes gleaned entries.
func (e *Engine) glean(ip addr, p uint16, mac [6]byte) {
	if !isUnicastMAC(mac) || !e.isConnected(p, ip) {
		return
	}
	if i := e.neigh.find(ip, p); i >= 0 && e.neigh.slots[i].state == neighReachable {
		return
	}
	e.learn(ip, p, mac, true)
}

// resolve returns the neighbour slot of next hop nh on port p and, if known and fresh, its MAC.
// On a miss it schedules an ARP request and counts the miss; the caller holds the packet.
func (e *Engine) resolve(nh addr, p uint16) (int, [6]byte, bool) {
	i := e.neigh.find(nh, p)
	if i < 0 {
		i = e.neigh.insert(nh, p)
	}
	if mac, ok := e.neighMAC(i); ok {
		return i, mac, true
	}
	e.count(gNeighbourMisses)
	e.requestResolution(i)
	return i, [6]byte{}, false
}

// neighMAC returns the MAC of slot i if it is known and not expired, marking the entry used.
func (e *Engine) neighMAC(i int) ([6]byte, bool) {
	n := &e.neigh.slots[i]
	if n.state == neighReachable && e.now-n.confirmed < neighExpireAfter {
		n.flags |= neighUsed
		return n.mac, true
	}
	return [6]byte{}, false
}

// want marks the next hop toward ip as configured and schedules its resolution unless known.
func (e *Engine) want(ip addr) {
	p, nh, ok := e.nextHop(ip)
	if !ok {
		return
	}
	i := e.neigh.insert(nh, p)
	n := &e.neigh.slots[i]
	n.flags |= neighWanted
	if n.state != neighReachable || e.now-n.confirmed >= neighRefreshAfter {
		e.requestResolution(i)
	}
}

// resolveConfiguredNextHops marks the gateways and every server's next hop as wanted and asks for
// their MACs, so they are known before traffic arrives. Run on every new snapshot.
func (e *Engine) resolveConfiguredNextHops() {
	for i := range e.neigh.slots {
		e.neigh.slots[i].flags &^= neighWanted
	}
	if e.routes.hasGateway {
		e.want(addrFrom4(e.routes.gateway))
	}
	if e.routes.hasGateway6 {
		e.want(e.routes.gateway6)
	}
	for i := range e.rules {
		for _, s := range e.rules[i].servers {
			e.want(s.addr)
		}
	}
}

// maintainNeighbours visits the slots that came due since the last burst: it expires unconfirmed
// MACs and re-requests entries worth keeping (configured, or used since their last confirmation).
func (e *Engine) maintainNeighbours() {
	t := &e.neigh
	for k := e.neighPacer.due(e.now, len(t.slots), neighScanPeriod, neighScanLimit); k > 0; k-- {
		i := e.neighScan & t.mask
		e.neighScan++
		n := &t.slots[i]
		switch n.state {
		case neighReachable:
			age := e.now - n.confirmed
			keep := n.flags&(neighWanted|neighUsed) != 0
			if age >= neighExpireAfter {
				n.state = neighIncomplete
				n.flags &^= neighUsed
				if n.flags&neighWanted != 0 {
					e.requestResolution(int(i))
				}
			} else if age >= neighRefreshAfter && keep {
				e.requestResolution(int(i))
			}
		case neighIncomplete:
			if n.flags&neighWanted != 0 {
				e.requestResolution(int(i))
			}
		}
	}
}

// requestResolution queues an ARP request or neighbor solicitation for slot i unless one is queued or was sent too recently.
func (e *Engine) requestResolution(i int) {
	n := &e.neigh.slots[i]
	if n.flags&neighQueued != 0 {
		return
	}
	if n.tries > 0 {
		gap := neighRetryAfter
		if n.tries >= neighFastTries {
			gap = neighRefreshAfter // an address that does not answer is asked rarely
		}
		if e.now-n.requested < gap {
			return
		}
	}
	if e.arpq.push(uint32(i)) {
		n.flags |= neighQueued
	}
}

// ceilPow2 returns the smallest power of two ≥ n (n ≥ 1).
func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// log2 returns log2 of a power of two.
func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}
