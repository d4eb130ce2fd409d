package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/tests/lab"
)

// needBinaries fails (does not skip) when ilbd/ilbadm have not been built.
func needBinaries(t *testing.T) {
	t.Helper()
	if _, err := lab.BinDir(""); err != nil {
		t.Fatal(err)
	}
}

// newLab skips when the machine cannot run the lab, fails when the binaries are missing,
// then builds the lab (cleaned up with the test).
func newLab(t *testing.T, opts lab.Options) *lab.Lab {
	t.Helper()
	if why := lab.Unsupported(opts); why != "" {
		t.Skip(why)
	}
	if !opts.KernelRouter {
		needBinaries(t)
	}
	return lab.NewT(t, opts)
}

// startIlbd starts the lab's ilbd or fails the test with its log.
func startIlbd(t *testing.T, l *lab.Lab) *lab.Ilbd {
	t.Helper()
	d, err := l.StartIlbd()
	if err != nil {
		t.Fatalf("starting ilbd: %v", err)
	}
	return d
}

// ilbadmOK runs ilbadm and fails the test unless it exits 0 with nothing on stderr.
func ilbadmOK(t *testing.T, l *lab.Lab, args ...string) string {
	t.Helper()
	out, errOut, code := l.Ilbadm(args...)
	if code != 0 || errOut != "" {
		t.Fatalf("ilbadm %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// configureWeb configures the foundation's service the way an administrator would:
// a group of two servers, a third one added, a TCP and a UDP half-NAT rule on the VIP.
func configureWeb(t *testing.T, l *lab.Lab) {
	t.Helper()
	for _, args := range [][]string{
		{"create-servergroup", "-s", "server=192.0.2.11,192.0.2.12", "websg"},
		{"add-server", "-s", "server=192.0.2.13", "websg"},
		{"create-rule", "-e", "-i", "vip=203.0.113.10,port=80,protocol=tcp", "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webtcp"},
		{"create-rule", "-e", "-i", "vip=203.0.113.10,port=80,protocol=udp", "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webudp"},
	} {
		if out := ilbadmOK(t, l, args...); out != "" {
			t.Fatalf("ilbadm %s printed %q; configuration commands print nothing", strings.Join(args, " "), out)
		}
	}
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameText fails with both texts shown visibly (trailing blanks, missing newline) if they differ.
func sameText(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s differs\n--- got (%d bytes) ---\n%s--- want (%d bytes) ---\n%s",
			what, len(got), visible(got), len(want), visible(want))
	}
}

func visible(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, " \n", "·\n"), "\n", "$\n")
}

// balanced fails unless per has exactly the lab's servers, each with want ± tol answers.
func balanced(t *testing.T, what string, per map[string]int, want, tol int) {
	t.Helper()
	var bad []string
	for i := range lab.ServerIPs {
		name := fmt.Sprintf("srv%d", i+1)
		if n := per[name]; n < want-tol || n > want+tol {
			bad = append(bad, fmt.Sprintf("%s=%d", name, n))
		}
	}
	if len(per) != len(lab.ServerIPs) {
		bad = append(bad, fmt.Sprintf("answers from %d distinct servers", len(per)))
	}
	if len(bad) > 0 {
		t.Errorf("%s: not balanced (want %d±%d each): %v (all: %v)", what, want, tol, bad, sortedCounts(per))
	}
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// diffCounts returns after-before per key.
func diffCounts(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if v-before[k] != 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// onlyClientPeers fails unless every peer address any server saw is the client's (half-NAT
// keeps the client address) and every request reached its server as its own flow (the
// client uses a new source port per request; half-NAT keeps it).
func onlyClientPeers(t *testing.T, l *lab.Lab) {
	t.Helper()
	for ip, n := range l.PeerIPs() {
		if ip != lab.ClientIP {
			t.Errorf("a server saw %d requests from %s; half-NAT must show the client address %s", n, ip, lab.ClientIP)
		}
	}
	for _, s := range l.Servers {
		if s.TCPFlows() != s.TCPCount() || s.UDPFlows() != s.UDPCount() {
			t.Errorf("%s answered %d TCP requests from %d distinct ip:port and %d UDP requests from %d; want one each",
				s.Name, s.TCPCount(), s.TCPFlows(), s.UDPCount(), s.UDPFlows())
		}
	}
}
