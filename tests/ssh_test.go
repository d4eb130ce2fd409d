package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestSSHThroughExceptionPath: the OpenSSH client logs in to an SSH server on the ilbd host
// (in ilbd's namespace, on its port address) from the client, and from the ilbd host to a
// server; curl on the ilbd host fetches a page from a server; all over the DPDK ports and
// the exception path, while the VIP is balanced.
func TestSSHThroughExceptionPath(t *testing.T) {
	if _, err := lab.Tool("ssh"); err != nil {
		t.Skip("no OpenSSH client (Debian package openssh-client, installed by make deps)")
	}
	l := newLab(t, lab.Options{})
	startIlbd(t, l)
	configureWeb(t, l)
	key, err := lab.NewSSHKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	host, err := l.ServeSSHIn(l.LBNS, "198.51.100.1:22", "ilbd-host", key.Public)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if out, err := l.SSHFrom(l.ClientNS, "198.51.100.1", key, 30*time.Second); err != nil || out != "ssh-ok ilbd-host 198.51.100.2\n" {
		t.Fatalf("ssh client -> ilbd host: %q, %v", out, err)
	}

	srv := l.Servers[0]
	server, err := l.ServeSSHIn(srv.NS, srv.IP+":22", srv.Name, key.Public)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if out, err := l.SSHFrom(l.LBNS, srv.IP, key, 30*time.Second); err != nil || out != "ssh-ok "+srv.Name+" 192.0.2.1\n" {
		t.Fatalf("ssh ilbd host -> %s: %q, %v", srv.Name, out, err)
	}

	// curl from the ilbd host to a web server on a server: the host's own HTTP client.
	if lab.HasCurl() {
		web, err := l.ServeHTTPIn(srv.NS, srv.IP+":8081", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s from %s\n", r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')], srv.Name)
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer web.Close()
		out, err := l.RunIn(l.LBNS, 30*time.Second, "curl", "-sS", "--max-time", "10", "http://"+srv.IP+":8081/")
		if err != nil || out != "hello 192.0.2.1 from "+srv.Name+"\n" {
			t.Fatalf("curl from the ilbd host: %q, %v", out, err)
		}
	}

	counts, err := l.TCPRequests("203.0.113.10:80", 30, 10*time.Second)
	if err != nil {
		t.Fatalf("VIP traffic alongside ssh: %v", err)
	}
	for _, s := range l.Servers {
		if n := counts[s.Name]; n < 9 || n > 11 {
			t.Errorf("%s answered %d of 30: %v", s.Name, n, counts)
		}
	}
}
