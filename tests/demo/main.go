// Command demo shows ilbd balancing real traffic, end to end, on this machine.
//
// It builds the test lab (network namespaces: one client, ilbd on DPDK net_af_packet
// ports, three kernel servers; documentation addresses only), starts bin/ilbd, configures
// it with bin/ilbadm exactly as an administrator would (printing each command), sends
// TCP connections and UDP requests to the VIP, prints what each server answered, prints
// `ilbadm show-rule`, `show-servergroup`, `show-statistics` and `show-nat`, and removes everything again (also on
// Ctrl-C). It exits non-zero if any request went unanswered.
//
// Run as root from the repository root, after `make build`:
//
//	go run ./tests/demo
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

func main() {
	n := flag.Int("n", 300, "TCP connections and UDP requests to send (each)")
	verbose := flag.Bool("v", false, "print lab progress messages")
	flag.Parse()
	if *n < 1 || *n > 100000 {
		fmt.Fprintln(os.Stderr, "demo: -n must be between 1 and 100000")
		os.Exit(2)
	}
	os.Exit(run(*n, *verbose))
}

func run(n int, verbose bool) int {
	opts := lab.Options{Transcript: os.Stdout}
	if verbose {
		opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "lab: "+f+"\n", a...) }
	}
	if why := lab.Unsupported(opts); why != "" {
		fmt.Fprintln(os.Stderr, "demo:", why)
		return 2
	}
	if _, err := lab.BinDir(""); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 2
	}

	fmt.Println("== building the lab: client 198.51.100.2 -> ilbd (198.51.100.1 | 192.0.2.1) -> servers 192.0.2.11-13")
	l, err := lab.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	// Ctrl-C / SIGTERM: tear down and leave. Close is safe to call concurrently.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "\ndemo: %v: cleaning up\n", s)
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: cleanup:", err)
		}
		os.Exit(130)
	}()
	defer func() {
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: cleanup:", err)
		}
	}()

	fmt.Printf("== starting ilbd in namespace %s\n", l.LBNS)
	if _, err := l.StartIlbd(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}

	fmt.Println("== configuring ilbd")
	for _, args := range [][]string{
		{"create-servergroup", "-s", "server=192.0.2.11,192.0.2.12,192.0.2.13", "websg"},
		{"create-rule", "-e", "-i", "vip=203.0.113.10,port=80,protocol=tcp", "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webtcp"},
		{"create-rule", "-e", "-i", "vip=203.0.113.10,port=80,protocol=udp", "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=websg", "webudp"},
	} {
		out, errOut, code := l.Ilbadm(args...)
		fmt.Print(out)
		fmt.Fprint(os.Stderr, errOut)
		if code != 0 {
			fmt.Fprintf(os.Stderr, "demo: ilbadm exited %d\n--- ilbd log ---\n%s", code, l.IlbdLog())
			return 1
		}
	}

	vip := lab.VIPAddr()
	fmt.Printf("== sending %d TCP connections and %d UDP requests to %s from the client\n", n, n, vip)
	start := time.Now()
	perTCP, tcpErr := l.TCPRequests(vip, n, 5*time.Second)
	tcpTime := time.Since(start)
	start = time.Now()
	perUDP, udpErr := l.UDPRequests(vip, n, 2*time.Second)
	udpTime := time.Since(start)

	fmt.Printf("\n%-8s %-12s %8s %8s   %s\n", "SERVER", "ADDRESS", "TCP", "UDP", "CLIENT ADDRESSES SEEN")
	totTCP, totUDP := 0, 0
	for _, s := range l.Servers {
		fmt.Printf("%-8s %-12s %8d %8d   %s\n", s.Name, s.IP, perTCP[s.Name], perUDP[s.Name], peers(s))
		totTCP += perTCP[s.Name]
		totUDP += perUDP[s.Name]
	}
	fmt.Printf("%-8s %-12s %8d %8d\n", "total", "", totTCP, totUDP)
	fmt.Printf("TCP: %d/%d answered in %v; UDP: %d/%d answered in %v\n\n",
		totTCP, n, tcpTime.Round(time.Millisecond), totUDP, n, udpTime.Round(time.Millisecond))
	failed := false
	for _, e := range []error{tcpErr, udpErr} {
		if e != nil {
			fmt.Fprintln(os.Stderr, "demo:", e)
			failed = true
		}
	}

	// What the administrator sees afterwards: the rules, the servers, ilbd's counters (kept
	// by the DPDK worker) and a few entries of its NAT table (connections still within
	// their nat-timeout).
	for _, args := range [][]string{{"show-rule"}, {"show-servergroup"}, {"show-statistics", "-A", "-r", "webtcp", "-i"},
		{"show-statistics", "-A", "-o", "PKT_P,BYTES_P,PKT_D,BYTES_D"}, {"show-nat", "3"}} {
		out, errOut, code := l.Ilbadm(args...)
		fmt.Print(out)
		fmt.Fprint(os.Stderr, errOut)
		if code != 0 {
			failed = true
		}
		fmt.Println()
	}
	if failed || totTCP != n || totUDP != n {
		fmt.Fprintf(os.Stderr, "demo: FAILED: %d of %d requests unanswered\n--- ilbd log (%s) ---\n%s",
			2*n-totTCP-totUDP, 2*n, l.IlbdLogPath(), l.IlbdLog())
		return 1
	}
	fmt.Printf("demo: all %d requests answered\n", 2*n)
	return 0
}

func peers(s *lab.Server) string {
	m := s.TCPPeers()
	for ip, c := range s.UDPPeers() {
		m[ip] += c
	}
	var out []string
	for ip, c := range m {
		out = append(out, fmt.Sprintf("%s (%d)", ip, c))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
