package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// Exception-path interfaces ilbd creates in its namespace (defaults: ilb<port index>).
const (
	clientTap = "ilb0" // port 0, lbc, 198.51.100.1/24
	serverTap = "ilb1" // port 1, lbs, 192.0.2.1/24
)

// TestExceptionPath checks the exception path: traffic for the ilbd host's own addresses
// that is not load-balanced reaches the host's kernel through a TAP per port, and what the
// host's own sockets send leaves through the DPDK ports, while the VIP is balanced as
// before. The lb namespace plays the ilbd host.
func TestExceptionPath(t *testing.T) {
	// The third server doubles as the data plane's gateway (see the end).
	l := newLab(t, lab.Options{Gateway: lab.ServerIPs[2]})
	d := startIlbd(t, l)
	configureWeb(t, l)
	vip := lab.VIPAddr()
	lb := l.LBNS

	// The TAPs carry their port's MAC and addresses and are up.
	for _, c := range []struct{ tap, raw, addr string }{
		{clientTap, "lbc", lab.ClientGW + "/24"},
		{serverTap, "lbs", lab.ServerGW + "/24"},
	} {
		tap := iface(t, l, lb, c.tap)
		raw := iface(t, l, lb, c.raw)
		if tap.MAC != raw.MAC || !tap.Up || !slices.Contains(tap.Addrs, c.addr) {
			t.Errorf("%s = %+v; want up, MAC %s of %s, address %s", c.tap, tap, raw.MAC, c.raw, c.addr)
		}
		if len(raw.Addrs) != 0 {
			t.Errorf("%s has kernel addresses %v; ilbd must not give the raw port any", c.raw, raw.Addrs)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The load-balanced service works with the exception path on.
	if _, err := l.TCPRequest(vip, tcpTimeout); err != nil {
		t.Fatalf("TCP to the VIP %s: %v", vip, err)
	}

	// ping from the client to ilbd's client-side address: answered by the host's kernel,
	// exactly once each (the raw interface under af_packet must not answer too).
	pingOK(t, l, l.ClientNS, lab.ClientGW, 3)
	if r, err := l.PingGo(l.ClientNS, lab.ClientGW, 3, 2*time.Second); err != nil || r.Received != 3 || r.Dups != 0 {
		t.Errorf("Go ping from the client to %s: %+v, %v", lab.ClientGW, r, err)
	}

	// A line service of the host (the SSH/management case) on 198.51.100.1:2222.
	echo, err := l.ServeLinesIn(lb, net.JoinHostPort(lab.ClientGW, "2222"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.Close)
	echoFrom(t, l, l.ClientNS, net.JoinHostPort(lab.ClientGW, "2222"), lab.ClientIP)
	if t.Failed() {
		t.FailNow() // the rest depends on the same path
	}

	// An HTTP server of the host, fetched (and fed) by the client with real kernel TCP,
	// in bodies large enough for full-sized segments and windows of them.
	blob := make([]byte, 512<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range blob {
		blob[i] = byte(rng.UintN(256))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/blob", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(blob) })
	mux.HandleFunc("/sum", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d %x\n", n, h.Sum(nil))
	})
	hsrv, err := l.ServeHTTPIn(lb, net.JoinHostPort(lab.ClientGW, "8080"), mux)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hsrv.Close() })
	base := "http://" + net.JoinHostPort(lab.ClientGW, "8080")
	httpRoundTrips(t, l, base, blob)

	// The host's own sockets (what health checks will use): ping a server and the client,
	// and a TCP exchange with a server's service, which sees the host's server-side address.
	pingOK(t, l, lb, lab.ServerIPs[0], 3)
	pingOK(t, l, lb, lab.ClientIP, 2)
	hostToServer(t, l)

	// Exception traffic and balanced traffic at the same time.
	var wg sync.WaitGroup
	var perTCP, perUDP map[string]int
	var tcpErr, udpErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		perTCP, tcpErr = l.TCPRequests(vip, 30, tcpTimeout)
		perUDP, udpErr = l.UDPRequests(vip, 30, udpTimeout)
	}()
	for i := 0; i < 3; i++ {
		httpRoundTrips(t, l, base, blob)
		hostToServer(t, l)
		echoFrom(t, l, l.ClientNS, net.JoinHostPort(lab.ClientGW, "2222"), lab.ClientIP)
	}
	wg.Wait()
	if tcpErr != nil || udpErr != nil {
		t.Errorf("VIP requests during exception traffic: tcp %v; udp %v", tcpErr, udpErr)
	}
	balanced(t, "TCP during exception traffic", perTCP, 10, 1)
	balanced(t, "UDP during exception traffic", perUDP, 10, 1)
	// The servers saw the client (half-NAT) and the host's own 4 exchanges, nothing else.
	for ip, n := range l.PeerIPs() {
		if !(ip == lab.ClientIP || ip == lab.ServerGW && n == 4) {
			t.Errorf("the servers saw %d requests from %s; want only the client %s and 4 from the host %s",
				n, ip, lab.ClientIP, lab.ServerGW)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// A disabled rule's VIP traffic is passed to the host (its SYNs show up on the TAP),
	// whose kernel does not own the VIP and does not forward: dropped there, so the
	// connection fails and no server sees it.
	ilbadmOK(t, l, "disable-rule", "webtcp")
	before, _ := l.Counts()
	capt, err := l.StartCapture(lb, clientTap)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := l.TCPRequest(vip, 1500*time.Millisecond); err == nil {
		t.Errorf("TCP connection to %s answered by %s while webtcp is disabled", vip, r.Server)
	}
	if _, err := capt.Next(time.Second, tcpTo(lab.VIP, lab.ServicePort)); err != nil {
		t.Errorf("no TCP segment for the disabled rule's VIP reached the host through %s: %v", clientTap, err)
	}
	capt.Close()
	if after, _ := l.Counts(); sortedCounts(after) != sortedCounts(before) {
		t.Errorf("a server answered TCP while webtcp was disabled: before %v after %v", sortedCounts(before), sortedCounts(after))
	}
	ilbadmOK(t, l, "enable-rule", "webtcp")
	per, err := l.TCPRequests(vip, 6, tcpTimeout)
	if err != nil {
		t.Errorf("TCP after enable-rule: %v", err)
	}
	balanced(t, "TCP after enable-rule", per, 2, 0)

	// The gateway setting is the host's default route, through the TAP of the gateway's
	// port: an address beyond the ports' subnets, which only the gateway (the third
	// server, on its loopback) has, answers the host's ping and TCP.
	if out, err := l.RunIn(lb, 5*time.Second, "ip", "-4", "route", "show", "default"); err != nil ||
		!strings.Contains(out, "via "+lab.ServerIPs[2]+" dev "+serverTap) {
		t.Errorf("default route of the host: %q, %v; want via %s dev %s", out, err, lab.ServerIPs[2], serverTap)
	}
	const beyond = "203.0.113.77"
	if out, err := l.RunIn(l.Servers[2].NS, 5*time.Second, "ip", "addr", "add", beyond+"/32", "dev", "lo"); err != nil {
		t.Fatalf("adding %s to %s: %v %s", beyond, l.Servers[2].Name, err, out)
	}
	pingOK(t, l, lb, beyond, 2)
	far, err := l.ServeLinesIn(l.Servers[2].NS, net.JoinHostPort(beyond, "2222"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(far.Close)
	echoFrom(t, l, lb, net.JoinHostPort(beyond, "2222"), lab.ServerGW)

	// Clean shutdown removes the TAPs and gives the raw interfaces their settings back.
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	gone(t, l, lb, clientTap, serverTap)
	for _, k := range []string{"net/ipv4/conf/lbc/rp_filter", "net/ipv4/conf/lbc/arp_ignore"} {
		if v, err := l.SysctlIn(lb, k); err != nil || v != "0" {
			t.Errorf("%s = %q, %v after ilbd stopped; want the original 0", k, v, err)
		}
	}

	// Started again, then killed with -9: the kernel removes the TAPs with the process,
	// and the next start creates them again.
	if err := d.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	pingOK(t, l, l.ClientNS, lab.ClientGW, 2)
	if err := d.Kill9(); err != nil {
		t.Fatal(err)
	}
	gone(t, l, lb, clientTap, serverTap)
	if err := d.Restart(); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	pingOK(t, l, l.ClientNS, lab.ClientGW, 2)
	hostToServer(t, l)
	if _, err := l.TCPRequest(vip, tcpTimeout); err != nil {
		t.Errorf("TCP to the VIP after restart: %v", err)
	}
}

// TestExceptionPathOff checks "exception off" (here as the -exception flag): no TAP is
// created and the host's kernel gets nothing (ping to ilbd's address goes unanswered),
// while balancing still works.
func TestExceptionPathOff(t *testing.T) {
	if why := lab.Unsupported(lab.Options{}); why != "" {
		t.Skip(why)
	}
	l := newLab(t, lab.Options{BinDir: wrappedBin(t, "-exception", "off")})
	d := startIlbd(t, l)
	configureWeb(t, l)
	for _, tap := range []string{clientTap, serverTap} {
		if _, ok, err := l.InterfaceIn(l.LBNS, tap); err != nil || ok {
			t.Errorf("interface %s exists (%v) with the exception path off", tap, err)
		}
	}
	if r, err := l.PingFrom(l.ClientNS, lab.ClientGW, 2, time.Second); err != nil || r.Received != 0 {
		t.Errorf("ping to %s with the exception path off: %+v, %v; want no answer", lab.ClientGW, r, err)
	}
	per, err := l.TCPRequests(lab.VIPAddr(), 6, tcpTimeout)
	if err != nil {
		t.Errorf("TCP to the VIP: %v", err)
	}
	balanced(t, "TCP with the exception path off", per, 2, 0)
	if !strings.Contains(d.Log(), "exception path off") {
		t.Errorf("ilbd did not log that the exception path is off")
	}
}

// wrappedBin returns a directory whose ilbd runs the real one with extra arguments
// first, and whose ilbadm is the real one: the lab starts "<bin>/ilbd -d -f settings".
func wrappedBin(t *testing.T, args ...string) string {
	t.Helper()
	real, err := lab.BinDir("")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + filepath.Join(real, "ilbd") + " " + strings.Join(args, " ") + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "ilbd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "ilbadm"), filepath.Join(dir, "ilbadm")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func iface(t *testing.T, l *lab.Lab, ns, dev string) lab.Interface {
	t.Helper()
	ifc, ok, err := l.InterfaceIn(ns, dev)
	if err != nil || !ok {
		t.Fatalf("interface %s in %s: present %v, %v", dev, ns, ok, err)
	}
	return ifc
}

// gone fails unless the interfaces disappear from ns within 3 s.
func gone(t *testing.T, l *lab.Lab, ns string, devs ...string) {
	t.Helper()
	for _, dev := range devs {
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, ok, err := l.InterfaceIn(ns, dev)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("interface %s still exists after ilbd ended", dev)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// pingOK fails unless count pings from ns to addr are each answered exactly once.
func pingOK(t *testing.T, l *lab.Lab, ns, addr string, count int) {
	t.Helper()
	r, err := l.PingFrom(ns, addr, count, 2*time.Second)
	if err != nil {
		t.Errorf("ping %s from %s: %v", addr, ns, err)
		return
	}
	if r.Received != count || r.Dups != 0 {
		t.Errorf("ping %s from %s (%s): %d sent, %d received, %d duplicates; want each answered once\n%s",
			addr, ns, r.Tool, r.Sent, r.Received, r.Dups, r.Output)
	}
}

// echoFrom sends lines over one TCP connection from ns to a LineEcho at addr and checks
// that each comes back, and that the service saw the connection from peerIP.
func echoFrom(t *testing.T, l *lab.Lab, ns, addr, peerIP string) {
	t.Helper()
	c, err := l.DialIn(ns, addr, tcpTimeout)
	if err != nil {
		t.Errorf("connect from %s to the host's service %s: %v", ns, addr, err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(tcpTimeout))
	r := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		line := fmt.Sprintf("exception path line %d %s\n", i, strings.Repeat("x", 100*i))
		if _, err := io.WriteString(c, line); err != nil {
			t.Errorf("write to %s: %v", addr, err)
			return
		}
		got, err := r.ReadString('\n')
		if err != nil || got != line {
			t.Errorf("echo from %s: %q, %v; want %q", addr, got, err, line)
			return
		}
	}
	if host, _, _ := net.SplitHostPort(c.LocalAddr().String()); host != peerIP {
		t.Errorf("connection to %s left from %s, want %s", addr, host, peerIP)
	}
}

// httpRoundTrips fetches /blob from the host's HTTP server and posts it back to /sum,
// with curl when there is one (else Go's client), from the client namespace.
func httpRoundTrips(t *testing.T, l *lab.Lab, base string, blob []byte) {
	t.Helper()
	want := fmt.Sprintf("%d %x\n", len(blob), sha256.Sum256(blob))
	if lab.HasCurl() {
		dir := t.TempDir()
		got := filepath.Join(dir, "got")
		if out, err := l.RunIn(l.ClientNS, 20*time.Second, "curl", "-sS", "--max-time", "15", "-o", got, base+"/blob"); err != nil {
			t.Errorf("curl GET %s/blob: %v\n%s", base, err, out)
		} else if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, blob) {
			t.Errorf("curl GET %s/blob: %d bytes, want the %d sent (%v)", base, len(b), len(blob), err)
		}
		src := filepath.Join(dir, "src")
		if err := os.WriteFile(src, blob, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := l.RunIn(l.ClientNS, 20*time.Second, "curl", "-sS", "--max-time", "15", "--data-binary", "@"+src, base+"/sum")
		if err != nil || out != want {
			t.Errorf("curl POST %s/sum: %q, %v; want %q", base, out, err, want)
		}
		return
	}
	c, err := l.HTTPClientIn(l.ClientNS, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(base + "/blob")
	if err != nil {
		t.Errorf("GET %s/blob: %v", base, err)
	} else {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(b, blob) {
			t.Errorf("GET %s/blob: %d bytes, want the %d sent (%v)", base, len(b), len(blob), err)
		}
	}
	resp, err = c.Post(base+"/sum", "application/octet-stream", bytes.NewReader(blob))
	if err != nil {
		t.Errorf("POST %s/sum: %v", base, err)
		return
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != want {
		t.Errorf("POST %s/sum: %q, %v; want %q", base, b, err, want)
	}
}

// hostToServer connects from the host (the lb namespace) to the first server's service,
// as a health check would, and checks that the server saw the host's server-side address.
func hostToServer(t *testing.T, l *lab.Lab) {
	t.Helper()
	addr := net.JoinHostPort(lab.ServerIPs[0], fmt.Sprint(lab.ServicePort))
	c, err := l.DialIn(l.LBNS, addr, tcpTimeout)
	if err != nil {
		t.Errorf("connect from the ilbd host to %s: %v", addr, err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(tcpTimeout))
	if _, err := io.WriteString(c, "health\n"); err != nil {
		t.Errorf("write to %s: %v", addr, err)
		return
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) < 2 || f[0] != l.Servers[0].Name {
		t.Errorf("answer of %s to the host: %q, %v", addr, line, err)
		return
	}
	if host, _, _ := net.SplitHostPort(f[1]); host != lab.ServerGW {
		t.Errorf("%s saw the host as %s, want its address %s", addr, f[1], lab.ServerGW)
	}
}

// tcpTo matches Ethernet frames of IPv4 TCP segments to ip:port.
func tcpTo(ip string, port int) func([]byte) bool {
	want := net.ParseIP(ip).To4()
	return func(f []byte) bool {
		if len(f) < 14+20+4 || f[12] != 0x08 || f[13] != 0x00 || f[14]>>4 != 4 || f[14+9] != 6 {
			return false
		}
		l4 := 14 + int(f[14]&0x0f)*4
		return len(f) >= l4+4 && bytes.Equal(f[14+16:14+20], want) && int(f[l4+2])<<8|int(f[l4+3]) == port
	}
}
