// Package dpdktest holds test helpers for code that uses package dpdk: EAL
// arguments that let several test binaries run at once on a machine without
// hugepages or NICs, ring-backed ports whose traffic a test injects and
// collects, and frame builders. It is meant for _test.go files only; it is
// also the only place that links a driver (net_ring) directly.
package dpdktest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ilbgo/ilb/dpdk"
)

// Environment knobs for test runs.
const (
	// EnvHuge set to 1 makes the tests use hugepages (--in-memory) instead
	// of --no-huge; needed for meaningful benchmark figures.
	EnvHuge = "ILB_DPDK_HUGE"
	// EnvLogLevel overrides the EAL log level of tests (default "4",
	// warnings and worse).
	EnvLogLevel = "ILB_DPDK_LOG"
)

var prefix atomic.Pointer[string]

// Hugepages reports whether Args asks for hugepages (EnvHuge=1).
func Hugepages() bool { return os.Getenv(EnvHuge) == "1" }

// Args returns EAL arguments for a test process: two lcores (0 = main,
// 1 = worker) on the first two CPUs this process may use (both on one CPU
// if there is only one), no PCI, no telemetry, no shared config and a
// file prefix unique to the process, so that test binaries of several
// packages can run in parallel. extra (such as "--vdev=net_null0") is
// appended; an extra "--lcores=..." replaces the two default lcores.
func Args(extra ...string) []string {
	p := fmt.Sprintf("ilbt%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	prefix.Store(&p)
	a, b := twoCPUs()
	level := os.Getenv(EnvLogLevel)
	if level == "" {
		level = "4"
	}
	lcores := fmt.Sprintf("--lcores=0@%d,1@%d", a, b)
	for i, e := range extra {
		if strings.HasPrefix(e, "--lcores=") {
			lcores, extra = e, append(append([]string(nil), extra[:i]...), extra[i+1:]...)
			break
		}
	}
	args := []string{
		"dpdktest",
		lcores,
		"--main-lcore=0",
		"--no-pci",
		"--no-telemetry",
		"--file-prefix=" + p,
		"--log-level=" + level,
	}
	if Hugepages() {
		// --in-memory implies --no-shconf; it cannot be combined with --no-huge.
		args = append(args, "--in-memory", "-m", "256")
	} else {
		args = append(args, "--no-huge", "-m", "256", "--no-shconf")
	}
	return append(args, extra...)
}

// InitForTests initialises EAL with Args(extra...).
func InitForTests(extra ...string) error {
	return dpdk.Init(Args(extra...))
}

// Run is a TestMain body: it initialises EAL with Args(extra...), runs the
// tests, then waits for worker lcores, cleans EAL up and removes the
// runtime directory of its file prefix. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(dpdktest.Run(m, "--vdev=net_null0")) }
func Run(m *testing.M, extra ...string) int {
	if err := InitForTests(extra...); err != nil {
		fmt.Fprintf(os.Stderr, "dpdktest: EAL init failed: %v\n", err)
		removeRuntimeDir()
		return 1
	}
	code := m.Run()
	Cleanup()
	return code
}

// Cleanup waits for the worker lcores, calls dpdk.Cleanup and removes the
// runtime directory that EAL created for this process's file prefix.
func Cleanup() {
	dpdk.WaitAll()
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintf(os.Stderr, "dpdktest: %v\n", err)
	}
	removeRuntimeDir()
}

// removeRuntimeDir deletes <runtime>/dpdk/<prefix>, which EAL creates even
// with --no-shconf; only this process's own prefix is touched.
func removeRuntimeDir() {
	p := prefix.Load()
	if p == nil {
		return
	}
	base := "/var/run"
	if os.Geteuid() != 0 {
		base = os.Getenv("XDG_RUNTIME_DIR")
		if base == "" {
			base = "/tmp"
		}
	}
	os.RemoveAll(filepath.Join(base, "dpdk", *p))
}

// twoCPUs returns the first two CPUs in this process's affinity list (the
// same CPU twice when only one is allowed), parsed from /proc/self/status so
// that only the standard library is needed.
func twoCPUs() (int, int) {
	cpus := allowedCPUs()
	switch len(cpus) {
	case 0:
		return 0, 0
	case 1:
		return cpus[0], cpus[0]
	}
	return cpus[0], cpus[1]
}

func allowedCPUs() []int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var cpus []int
		for _, r := range strings.Split(strings.TrimSpace(list), ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				continue
			}
			for c := a; c <= b && len(cpus) < 2; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	return nil
}

// TwoCPUs returns the first two CPUs this process may use (the same one twice if it may use
// only one), for a test's own --lcores mapping.
func TwoCPUs() (int, int) { return twoCPUs() }
