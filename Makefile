# Solaris ILB for Linux: ilbadm + ilbd on DPDK.
# All targets that touch DPDK, namespaces or hugepages need root.

GO      ?= $(shell command -v go || echo /usr/local/go/bin/go)
BIN     := bin
APT_PKGS := dpdk dpdk-dev libdpdk-dev pkg-config iproute2 ethtool openssh-client curl iputils-ping
HUGEPAGES ?= 1024

.PHONY: all deps build test unit e2e e2e-workers demo bench fuzz hugepages vet man install deb clean

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

# install puts ilbd and ilbadm, the systemd units, the manual pages, bash completion, the
# example settings, the admin group (sysusers.d) and the directories (tmpfiles.d) in place:
# make install [DESTDIR=staging] [PREFIX=/usr]
PREFIX  ?= /usr
DESTDIR ?=
install: build man
	install -D -m 0755 $(BIN)/ilbd $(DESTDIR)$(PREFIX)/sbin/ilbd
	install -D -m 0755 $(BIN)/ilbadm $(DESTDIR)$(PREFIX)/sbin/ilbadm
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	sed 's|/usr/sbin/|$(PREFIX)/sbin/|g' dist/ilbd.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/ilbd.service
	install -m 0644 dist/ilbd.socket $(DESTDIR)$(PREFIX)/lib/systemd/system/ilbd.socket
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/ilbd.service
	install -D -m 0644 $(BIN)/man/ilbadm.8 $(DESTDIR)$(PREFIX)/share/man/man8/ilbadm.8
	install -D -m 0644 $(BIN)/man/ilbd.8 $(DESTDIR)$(PREFIX)/share/man/man8/ilbd.8
	install -D -m 0644 $(BIN)/man/ilbd.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/ilbd.conf.5
	install -D -m 0644 dist/ilbadm.bash-completion $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ilbadm
	install -D -m 0644 dist/sysusers.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/ilb.conf
	install -D -m 0644 dist/tmpfiles.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/ilb.conf
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/ilb/README.md
	install -D -m 0644 dist/ilbd.conf.example $(DESTDIR)/etc/ilb/ilbd.conf.example
	@if [ -z "$(DESTDIR)" ]; then \
		command -v systemd-sysusers >/dev/null && systemd-sysusers $(PREFIX)/lib/sysusers.d/ilb.conf; \
		command -v systemd-tmpfiles >/dev/null && systemd-tmpfiles --create $(PREFIX)/lib/tmpfiles.d/ilb.conf; \
		[ -e /etc/ilb/ilbd.conf ] || cp dist/ilbd.conf.example /etc/ilb/ilbd.conf; \
		command -v systemctl >/dev/null && systemctl daemon-reload || true; \
	fi

# deb builds bin/ilb_VERSION_ARCH.deb from a make install tree (dpkg-deb); DEB_DIR is the
# staging tree, DEB_OUT where the package goes.
VERSION ?= 1.0
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_DIR ?= $(CURDIR)/$(BIN)/deb
DEB_OUT ?= $(CURDIR)/$(BIN)
deb:
	rm -rf $(DEB_DIR)
	$(MAKE) install DESTDIR=$(DEB_DIR) PREFIX=/usr
	install -d $(DEB_DIR)/DEBIAN
	printf 'Package: ilb\nVersion: $(VERSION)\nArchitecture: $(DEB_ARCH)\nMaintainer: ilb maintainers <root@localhost>\nDepends: dpdk\nSection: net\nPriority: optional\nDescription: Integrated Load Balancer (Solaris ilbadm and ilbd) on DPDK\n ilbadm administers rules, server groups and health checks with Solaris syntax;\n ilbd forwards the balanced traffic through DPDK poll-mode workers.\n' > $(DEB_DIR)/DEBIAN/control
	echo /etc/ilb/ilbd.conf.example > $(DEB_DIR)/DEBIAN/conffiles
	printf '#!/bin/sh\nset -e\nsystemd-sysusers /usr/lib/sysusers.d/ilb.conf || true\nsystemd-tmpfiles --create /usr/lib/tmpfiles.d/ilb.conf || true\n[ -e /etc/ilb/ilbd.conf ] || cp /etc/ilb/ilbd.conf.example /etc/ilb/ilbd.conf\nsystemctl daemon-reload 2>/dev/null || true\n' > $(DEB_DIR)/DEBIAN/postinst
	chmod 0755 $(DEB_DIR)/DEBIAN/postinst
	dpkg-deb --root-owner-group --build $(DEB_DIR) $(DEB_OUT)/ilb_$(VERSION)_$(DEB_ARCH).deb

clean:
	rm -rf $(BIN)
