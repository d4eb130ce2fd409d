// Package tests holds the end-to-end tests of ilbd and ilbadm.
//
// They build a lab of network namespaces (package tests/lab) with a kernel client and three
// kernel servers, run the real binaries from <repo>/bin (or $ILB_BIN; `make build` first)
// and drive them exactly as an administrator would, through ilbadm.
//
//	go test ./tests/ -run TestLabSelfCheck -v   # the lab alone (kernel routing, no ilbd)
//	go test ./tests/ -v                         # everything; as root
//
// Tests that need root, `ip` or `ethtool` skip with the reason when those are missing; a
// missing bin/ilbd or bin/ilbadm is a failure (it means the build step was skipped).
package tests
