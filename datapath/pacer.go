package datapath

// pacer spreads a periodic walk over a table across a period of the worker's clock: each call
// returns how many slots came due since the last, so the walk's speed does not depend on how
// often the worker runs bursts, and an idle worker does almost nothing.
type pacer struct {
	last    int64
	started bool
}

// due returns how many of n slots to visit now for a full pass every period, at most limit.
// When more than limit are due, the backlog is dropped: the next pass catches up.
func (s *pacer) due(now int64, n int, period int64, limit int) int {
	if !s.started {
		s.started, s.last = true, now
		return 0
	}
	limit = min(limit, n)     // one pass per call at most
	step := period / int64(n) // ns per slot
	if step <= 0 {
		step = 1
	}
	k := (now - s.last) / step
	switch {
	case k <= 0:
		return 0
	case k > int64(limit):
		s.last = now
		return limit
	}
	s.last += k * step
	return int(k)
}
