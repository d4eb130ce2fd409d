// Package datapath is the load balancer's packet engine: pure Go, I/O-agnostic, one Engine per
// worker goroutine. The worker hands it received frames as byte slices; the engine parses them
// with zero-copy header views, answers ARP and NDP for the addresses ilbd owns, tracks
// connections, rewrites packets in place and tells the worker what to do with each frame.
//
// It covers every topology, algorithm and table of Solaris ILB (spec §6), for IPv4 and IPv6:
//
//   - topologies: DSR (dsr.go: MAC rewrite only, no state), half-NAT and full NAT (nat.go,
//     fullnat.go; full-NAT source ports in portalloc.go, split between workers by port number);
//   - algorithms: round robin (rules.go) and hash-ip, hash-ip-port, hash-ip-vip (hash.go);
//   - tables: connections (conntrack.go), persistence (sticky.go), neighbours (neighbour.go);
//   - connection draining (drain.go), ICMP echo and frag-needed/packet-too-big (icmp.go),
//     neighbour discovery (ndp.go), fragments and IPv6 extension headers (parse.go, engine.go);
//   - the kstat counters of show-statistics (counters.go) and the show-nat / show-persist
//     dumps (natdump.go, sticky.go).
//
// Speed comes from construction, not tuning: per-engine state only, fixed-size pointer-free
// tables allocated up front, no allocation, locks, interfaces, closures or defer on the packet
// path, checksums updated incrementally (RFC 1624), time passed in by the worker.
//
// A burst is processed as:
//
//	e.BeginBurst(now)            // picks up a new rules.Snapshot if one was published
//	for each frame: r := e.Process(frame, inPort)
//	e.EndBurst()                 // publishes counters, sweeps expired state, serves dumps
//	for { n, port, ok := e.NextControlFrame(buf); if !ok { break }; send buf[:n] on port }
//
// Only Stats, RequestNATDump and RequestPersistDump may be called from other goroutines.
//
// Deliberate differences from Solaris ILB, each for a stated reason:
//
//   - IPv6 hash keys use the whole address, not its low 32 bits (hash.go).
//   - Full-NAT ports come from one arena per proxy-src address per worker, not one per
//     (proxy, server, port) tuple (portalloc.go).
//   - ICMP echo requests to proxy-src addresses are answered too (the engine, not the host,
//     owns those addresses), and frag-needed/packet-too-big sent to a proxy-src address is
//     translated back to the client; Solaris only handles messages to VIPs.
//   - IPv6 hop-by-hop and destination options headers are skipped and such packets balanced;
//     routing (and other unwalked) extension headers and Fragment headers toward a VIP or proxy
//     address are dropped and counted, as IPv4 fragments are.
//   - Expiry is lazy on lookup plus a paced sweep over the whole table every 10 s (Solaris: GC
//     every 15 s), so removals happen at most that late.
package datapath
