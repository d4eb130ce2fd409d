package datapath

// Connection draining (spec §6.9). A server that stops being usable — disabled by the
// administrator or a health check, removed from its group, or its rule deleted — keeps its
// established connections: they are found in the connection table before any rule is
// consulted. With conn-drain > 0 the server also gets a deadline, the time it stopped plus
// conn-drain; once it passes, its connections are deleted as they are next seen or swept, even if
// active. Becoming usable again clears the deadline. With conn-drain 0 connections end only
// gracefully or by idle timeout.
//
// Transitions are seen at snapshot changes, so the deadline starts at the first burst that
// sees the new configuration, which is when the data plane stops choosing the server.

// startDrains sets or clears drain deadlines after a snapshot was applied: e.srv holds each
// server slot's activity now and before.
func (e *Engine) startDrains() {
	e.nDraining = 0
	for i := range e.slots {
		rsl := &e.slots[i]
		if !rsl.used {
			continue
		}
		for _, sv := range rsl.servers {
			run := &e.srv[sv.slot]
			switch {
			case run.active:
				run.drainAt = 0
			case run.wasActive && rsl.connDrain > 0:
				run.drainAt = max(e.now+int64(rsl.connDrain), 1)
			}
			if run.drainAt != 0 {
				e.nDraining++
			}
		}
	}
}
