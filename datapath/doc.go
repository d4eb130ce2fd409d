// Package datapath is the load balancer's packet engine: pure Go, I/O-agnostic, one Engine per
// worker goroutine. The worker hands it received frames as byte slices; the engine parses them
// with zero-copy header views, answers ARP for the addresses ilbd owns, tracks connections,
// rewrites packets in place (half-NAT today; DSR, full-NAT, IPv6 and ICMP later) and tells the
// worker what to do with each frame.
//
// Speed comes from construction, not tuning: per-engine state only, fixed-size pointer-free
// tables allocated up front, no allocation, locks, interfaces, closures or defer on the packet
// path, checksums updated incrementally (RFC 1624), time passed in by the worker.
//
// A burst is processed as:
//
//	e.BeginBurst(now)            // picks up a new rules.Snapshot if one was published
//	for each frame: r := e.Process(frame, inPort)
//	e.EndBurst()                 // publishes counters, sweeps expired state
//	for { n, port, ok := e.NextControlFrame(buf); if !ok { break }; send buf[:n] on port }
//
// Only Stats and RequestNATDump may be called from other goroutines.
package datapath
