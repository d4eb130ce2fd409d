// Package tests holds the end-to-end tests of ilbd and ilbadm.
//
// They build a lab of network namespaces (package tests/lab) with a kernel client and three
// kernel servers, run the real binaries from <repo>/bin (or $ILB_BIN; `make build` first)
// and drive them exactly as an administrator would, through ilbadm.
//
//	go test ./tests/ -run TestLabSelfCheck -v   # the lab alone (kernel routing, no ilbd)
//	go test ./tests/ -v                         # everything; as root
//
// What is where:
//
//	lab_test.go, labfull_test.go   the lab itself, without ilbd (IPv4; IPv6, return router,
//	                               client on the servers' subnet, emulated DSR)
//	e2e_test.go                    half-NAT IPv4, round robin, disable/enable-rule, kill -9
//	topologies_test.go             DSR (return router; capture and counters prove that no
//	                               answer crosses ilbd), full-NAT (proxy-src, the client on
//	                               the servers' subnet), port-bound rules on one VIP
//	ipv6_test.go                   the same over IPv6, half-NAT beside IPv4
//	persistence_test.go            create-rule -p with host and subnet pmask, show-persist
//	drain_test.go                  disable-server keeps established connections; conn-drain
//	hash_test.go                   hash-ip, hash-ip-vip, hash-ip-port
//	icmp_test.go                   echo, packet too big / fragmentation needed, other ICMP
//	exception_test.go              the exception path (TAP to the host's kernel)
//	configonly_test.go             configuration without a data plane
//	offload_test.go                hosts with the kernel's stock offloads: what ilbd turns off
//	                               on its interfaces and their veth peers, and restores; 300
//	                               TCP and 300 UDP requests through every topology and family
//	workers_test.go                ilbd on two workers: flows owned and handed off, show-worker
//	flood_test.go                  SYN and bare-ACK floods from spoofed sources, more flows
//	                               than the connection table holds, half-NAT and full-NAT
//
// `make test` runs the suite a second time with ilbd on two workers ($ILB_LAB_LCORES).
//
// Tests that need root or `ip` skip with the reason when those are missing; a
// missing bin/ilbd or bin/ilbadm is a failure (it means the build step was skipped).
package tests
