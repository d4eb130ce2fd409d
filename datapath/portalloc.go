package datapath

// Full-NAT source ports (spec §6.4). Solaris gives every (proxy-src, server, server port) tuple
// an arena covering ports 4096–65534. Here every proxy-src address has one arena per engine,
// shared by all rules, servers and both protocols: a NAT port is then unique per proxy address,
// which makes every server→proxy return key unique without consulting the connection table,
// and the memory is one small ring per address instead of one per server. The price is fewer
// concurrent connections per proxy address (61439 / WorkerCount instead of that many per server);
// ILB's own remedy applies: more proxy-src addresses (up to ten per rule).
//
// Workers split the range: worker i of n owns the ports p with p % n == i, so whichever worker
// receives a server's reply can tell the owning worker from the destination port alone.

const (
	natPortFirst = 4096                           // NAT_PORT_START
	natPortLast  = 65534                          // 65535 is never handed out
	natPortCount = natPortLast - natPortFirst + 1 // 61439
)

// FullNATPortOwner returns the index of the worker that allocated full-NAT source port p among
// workerCount workers: the worker owning the flow whose return traffic is addressed to port p.
func FullNATPortOwner(p uint16, workerCount int) int {
	if workerCount <= 1 {
		return 0
	}
	return int(p) % workerCount
}

// natArena hands out the ports of one proxy-src address: never-used ports first, lowest first,
// then returned ports first in, first out, so a port just returned is reused last and the
// server's TIME_WAIT for the old (proxy, port) pair has the longest time to end. Fresh ports
// come from a counter, so creating an arena costs no walk over its share.
type natArena struct {
	addr      addr
	fresh     int      // next never-used port; > natPortLast when all were used once
	ring      []uint16 // returned ports from head, n of them, wrapping
	head, n   int
	inUse     int
	live      bool // the arena exists (not on the free list)
	reference bool // a rule of the current snapshot uses the address
}

// natPorts is an engine's set of arenas.
type natPorts struct {
	worker, workers int
	arenas          []natArena
	byAddr          map[addr]int32
	free            []int32
}

func newNATPorts(worker, workers int) natPorts {
	return natPorts{worker: worker, workers: workers, byAddr: make(map[addr]int32)}
}

// firstPort returns this engine's lowest port.
func (n *natPorts) firstPort() int {
	return natPortFirst + (n.worker-natPortFirst%n.workers+n.workers)%n.workers
}

// beginSnapshot forgets which arenas the configuration references; arenaFor marks them again.
func (n *natPorts) beginSnapshot() {
	for i := range n.arenas {
		n.arenas[i].reference = false
	}
}

// arenaFor returns the arena of proxy address a, creating it. Control path: may allocate.
func (n *natPorts) arenaFor(a addr) int32 {
	if i, ok := n.byAddr[a]; ok {
		n.arenas[i].reference = true
		return i
	}
	var i int32
	if k := len(n.free); k > 0 {
		i = n.free[k-1]
		n.free = n.free[:k-1]
	} else {
		if len(n.arenas) >= maxArenas {
			return -1 // a connection entry names its arena in 16 bits: the address gets no ports
		}
		i = int32(len(n.arenas))
		n.arenas = append(n.arenas, natArena{ring: make([]uint16, natPortCount/n.workers+1)})
	}
	ar := &n.arenas[i]
	ar.addr, ar.fresh, ar.head, ar.n, ar.inUse, ar.live, ar.reference = a, n.firstPort(), 0, 0, 0, true, true
	n.byAddr[a] = i
	return i
}

// endSnapshot frees the arenas no rule references and no connection uses any more.
func (n *natPorts) endSnapshot() {
	for i := range n.arenas {
		ar := &n.arenas[i]
		if ar.live && !ar.reference && ar.inUse == 0 {
			ar.live = false
			delete(n.byAddr, ar.addr)
			n.free = append(n.free, int32(i))
		}
	}
}

// get takes the next free port of arena i.
func (n *natPorts) get(i int32) (uint16, bool) {
	if i < 0 {
		return 0, false
	}
	ar := &n.arenas[i]
	if ar.fresh <= natPortLast {
		p := ar.fresh
		ar.fresh += n.workers
		ar.inUse++
		return uint16(p), true
	}
	if ar.n == 0 {
		return 0, false
	}
	p := ar.ring[ar.head]
	if ar.head++; ar.head == len(ar.ring) {
		ar.head = 0
	}
	ar.n--
	ar.inUse++
	return p, true
}

// put returns port p to arena i.
func (n *natPorts) put(i int32, p uint16) {
	ar := &n.arenas[i]
	t := ar.head + ar.n
	if t >= len(ar.ring) {
		t -= len(ar.ring)
	}
	ar.ring[t] = p
	ar.n++
	ar.inUse--
}
