package datapath

// The hold queue: packets whose next hop's MAC is being resolved wait here, as a host's IP
// queues them on an incomplete neighbour entry (Linux: unres_qlen), instead of being lost. A
// server's first reply to a client whose MAC expired, or the first packet to a server right
// after its entry was recycled, then costs the flow no retransmission.
//
// A held packet is a copy in the engine's own fixed buffer (the frame's mbuf goes back to the
// worker at once), already translated, waiting only for its destination MAC. When the
// neighbour answers, its frames are marked ready and leave through NextControlFrame; after
// holdTimeout unanswered they are dropped and counted. Bounded per neighbour and in total, so a
// flood toward unresolvable addresses cannot hold more than holdCapacity buffers.

const (
	holdCapacity     = 256        // frames held at once per engine
	holdPerNeighbour = 8          // of which for one next hop
	holdFrameMax     = 2048       // largest frame held: one mbuf's data room
	holdTimeout      = int64(3e9) // neighFastTries requests neighRetryAfter apart, and then some
)

// heldFrame is one slot of the hold queue.
type heldFrame struct {
	at    int64 // when it was held
	nh    addr  // the next hop it waits for
	port  uint16
	n     uint16 // frame length; 0: slot free
	ready bool   // the MAC is in the frame: NextControlFrame sends it
}

// holdQueue is the engine's set of held frames.
type holdQueue struct {
	slots   []heldFrame
	buf     []byte // holdCapacity frames of holdFrameMax bytes
	free    []int32
	ready   []int32 // ring of slots to send, oldest first
	rhead   uint32
	rtail   uint32
	waiting int   // slots held for a MAC
	check   int64 // earliest time a waiting slot can expire
}

func newHoldQueue() holdQueue {
	q := holdQueue{
		slots: make([]heldFrame, holdCapacity),
		buf:   make([]byte, holdCapacity*holdFrameMax),
		free:  make([]int32, 0, holdCapacity),
		ready: make([]int32, holdCapacity),
	}
	for i := holdCapacity - 1; i >= 0; i-- {
		q.free = append(q.free, int32(i))
	}
	return q
}

func (q *holdQueue) frame(i int32) []byte {
	return q.buf[int(i)*holdFrameMax : int(i+1)*holdFrameMax]
}

// hold keeps a copy of a translated frame for out port out until the MAC of e.holdNH (set by
// the failed route) is known. The packet counts for its server now; it is counted as sent when
// it leaves.
func (e *Engine) hold(frame []byte, out uint16, serverSlot int32, ipLen int) Result {
	q := &e.heldq
	nh := e.holdNH
	ni := e.neigh.find(nh, out)
	if ni < 0 || len(q.free) == 0 || len(frame) > holdFrameMax || e.neigh.slots[ni].held >= holdPerNeighbour {
		return e.drop(gNextHopHeldOverflow, frame)
	}
	k := len(q.free) - 1
	i := q.free[k]
	q.free = q.free[:k]
	copy(q.frame(i), frame)
	q.slots[i] = heldFrame{at: e.now, nh: nh, port: out, n: uint16(len(frame))}
	if q.waiting == 0 || e.now+holdTimeout < q.check {
		q.check = e.now + holdTimeout
	}
	q.waiting++
	e.neigh.slots[ni].held++
	e.count(gNextHopHeld)
	if serverSlot >= 0 {
		e.ctr.serverAdd(serverSlot, ipLen)
	}
	return Result{Action: ActionHeld, Len: len(frame)}
}

// releaseHeld readdresses the frames waiting for ip on port p to mac and queues them to send.
func (e *Engine) releaseHeld(ip addr, p uint16, mac [6]byte) {
	q := &e.heldq
	for i := range q.slots {
		s := &q.slots[i]
		if s.n == 0 || s.ready || s.nh != ip || s.port != p {
			continue
		}
		Ethernet(q.frame(int32(i))).SetDst(mac)
		s.ready = true
		q.waiting--
		q.ready[q.rtail%holdCapacity] = int32(i)
		q.rtail++
	}
}

// expireHeld drops the frames that waited holdTimeout for a MAC.
func (e *Engine) expireHeld() {
	q := &e.heldq
	if q.waiting == 0 || e.now < q.check {
		return
	}
	next := e.now + holdTimeout
	for i := range q.slots {
		s := &q.slots[i]
		if s.n == 0 || s.ready {
			continue
		}
		if e.now-s.at < holdTimeout {
			next = min(next, s.at+holdTimeout)
			continue
		}
		if ni := e.neigh.find(s.nh, s.port); ni >= 0 && e.neigh.slots[ni].held > 0 {
			e.neigh.slots[ni].held--
		}
		*s = heldFrame{}
		q.free = append(q.free, int32(i))
		q.waiting--
		e.count(gNextHopHeldExpired)
		e.count(gDropped)
	}
	q.check = next
}

// nextReleased copies the oldest ready frame into buf and frees its slot.
func (e *Engine) nextReleased(buf []byte) (int, uint16, bool) {
	q := &e.heldq
	for q.rhead != q.rtail {
		i := q.ready[q.rhead%holdCapacity]
		q.rhead++
		s := &q.slots[i]
		n, port := int(s.n), s.port
		*s = heldFrame{}
		q.free = append(q.free, i)
		if n > len(buf) {
			e.drop(gNoRoom, buf[:0])
			continue
		}
		copy(buf, q.frame(i)[:n])
		e.count(gNextHopHeldSent)
		e.count(gForwarded)
		e.ctr.g[gTxPackets]++
		e.ctr.g[gTxBytes] += uint64(n)
		return n, port, true
	}
	return 0, 0, false
}

// ControlPending reports whether NextControlFrame has frames to give: released held packets or
// resolution requests. The worker then calls it without waiting for its periodic turn.
func (e *Engine) ControlPending() bool {
	return e.heldq.rhead != e.heldq.rtail || e.arpq.head != e.arpq.tail
}
