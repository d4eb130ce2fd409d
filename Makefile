# Solaris ILB for Linux: ilbadm + ilbd on DPDK.
# All targets that touch DPDK, namespaces or hugepages need root.

GO      ?= $(shell command -v go || echo /usr/local/go/bin/go)
BIN     := bin
APT_PKGS := dpdk dpdk-dev libdpdk-dev pkg-config iproute2 ethtool openssh-client curl iputils-ping
HUGEPAGES ?= 1024

.PHONY: all deps build test unit e2e e2e-workers demo bench fuzz hugepages vet man clean

# LAB_LCORES gives ilbd two workers on a 2-CPU machine (lcore 1 shares CPU 0 with the main
# lcore) for the second pass of the end-to-end suite.
LAB_LCORES ?= 0@0,1@0,2@1

all: build

# deps installs the Debian packages the build and the tests need (idempotent).
deps:
	@missing=""; for p in $(APT_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "deps: all packages present"; fi

build: deps
	$(GO) build -o $(BIN)/ilbadm ./ilbadm
	$(GO) build -o $(BIN)/ilbd ./ilbd

vet:
	$(GO) vet ./...

# test runs every unit test and the end-to-end lab (root: namespaces and DPDK), then the lab
# again with ilbd on two workers.
test: build vet
	$(GO) test -count=1 -timeout 20m ./...
	ILB_LAB_LCORES=$(LAB_LCORES) $(GO) test -count=1 -timeout 20m ./tests/

unit: build
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /tests)

e2e: build
	$(GO) test -count=1 -v -timeout 15m ./tests/

e2e-workers: build
	ILB_LAB_LCORES=$(LAB_LCORES) $(GO) test -count=1 -v -timeout 15m ./tests/

# demo builds a lab of network namespaces, runs ilbd on DPDK af_packet ports and sends
# real TCP and UDP traffic through the VIP.
demo: build
	$(GO) run ./tests/demo

# hugepages reserves 2 MiB pages for speed measurements (functional tests use --no-huge).
hugepages:
	@echo $(HUGEPAGES) > /proc/sys/vm/nr_hugepages
	@mkdir -p /dev/hugepages
	@mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages
	@grep -E 'HugePages_(Total|Free)' /proc/meminfo

# bench measures the packet path (root, hugepages, about 5 minutes here): the engine's Go
# benchmarks, the DPDK binding's, then the table of ilbd's worker loop on DPDK next to
# dpdk-testpmd on the same captures (printed, and written to bin/bench.csv).
BENCH_CSV ?= $(BIN)/bench.csv
bench: build hugepages
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 300ms ./datapath/
	ILB_DPDK_HUGE=1 $(GO) test -run '^$$' -bench . -benchmem ./dpdk/
	$(GO) test -c -o $(BIN)/dataplane.test ./dataplane/
	ILB_DPDK_HUGE=1 ILB_BENCH_TABLE=$(BENCH_CSV) ILB_BENCH_ONLY=$(ILB_BENCH_ONLY) $(BIN)/dataplane.test -test.run '^TestBenchTable$$' -test.v -test.timeout 30m

# fuzz runs each fuzz target for a while (FUZZTIME each); crashers land in testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzProcess$$' -fuzztime $(FUZZTIME) ./datapath/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFastPath$$' -fuzztime $(FUZZTIME) ./datapath/
	$(GO) test -run '^$$' -fuzz '^FuzzCreateRule$$' -fuzztime $(FUZZTIME) ./compat/
	$(GO) test -run '^$$' -fuzz '^FuzzParseServers$$' -fuzztime $(FUZZTIME) ./compat/
	$(GO) test -run '^$$' -fuzz '^FuzzOfmt$$' -fuzztime $(FUZZTIME) ./compat/
	$(GO) test -run '^$$' -fuzz '^FuzzImport$$' -fuzztime $(FUZZTIME) ./ilbadm/

# man renders the manual pages (docs/man/*.md) into bin/man: man -l bin/man/ilbadm.8
MAN_PAGES := ilbadm.8 ilbd.8 ilbd.conf.5
man:
	@mkdir -p $(BIN)/man
	@for p in $(MAN_PAGES); do $(GO) tool go-md2man -in docs/man/$$p.md -out $(BIN)/man/$$p || exit 1; done
	@echo "rendered $(MAN_PAGES) into $(BIN)/man"

clean:
	rm -rf $(BIN)
