package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ilbgo/ilb/tests/lab"
)

// nobody is the unprivileged user the authorization test runs ilbadm as.
const nobody = 65534

// TestAuthorization: an ordinary user (not root, not in the admin group) is refused every
// change with Solaris' message and nothing changes, while every show command works for them.
// The identity comes from the socket's peer credentials, so this runs the real ilbadm binary
// as another user.
func TestAuthorization(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run ilbadm as another user")
	}
	l := newLab(t, lab.Options{ConfigOnly: true})
	startIlbd(t, l)
	configureWeb(t, l)
	ilbadmOK(t, l, strings.Fields("create-healthcheck -h hc-test=tcp hc1")...)
	before := ilbadmOK(t, l, "export-config")

	// The socket is world-connectable; let the other user reach it through the test's own
	// directories.
	for d := l.Dir; d != "/" && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	bin, err := lab.BinDir("")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(l.Dir, "import.ilb")
	os.WriteFile(script, []byte("create-servergroup x\n"), 0o644)
	as := func(args string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "ilbadm"), strings.Fields(args)...)
		cmd.Env = []string{"ILB_SOCKET=" + l.SocketPath(), "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ilbadm %s as uid %d: %v", args, nobody, err)
		}
		return o.String(), e.String(), code
	}

	const denied = "user is not authorized to execute command"
	for _, c := range []struct{ args, stderr string }{
		{"create-servergroup sg2", "ilbadm: " + denied + "\n"},
		{"delete-servergroup websg", "ilbadm: " + denied + "\n"},
		{"add-server -s server=192.0.2.14 websg", "ilbadm: cannot add 192.0.2.14 to websg: " + denied + "\n"},
		{"remove-server -s server=_websg.0 websg", "ilbadm: cannot remove _websg.0 from websg: " + denied + "\n"},
		{"disable-server _websg.0", "ilbadm: " + denied + "\n"},
		{"enable-server _websg.0", "ilbadm: " + denied + "\n"},
		{"create-rule -e -i vip=203.0.113.30,port=80 -m lbalg=rr,type=HALF-NAT -o servergroup=websg r3", "ilbadm: " + denied + "\n"},
		{"delete-rule webtcp", "ilbadm: " + denied + "\n"},
		{"delete-rule -a", "ilbadm: " + denied + "\n"},
		{"disable-rule webtcp", "ilbadm: " + denied + "\n"},
		{"disable-rule", "ilbadm: " + denied + "\n"},
		{"enable-rule webtcp", "ilbadm: " + denied + "\n"},
		{"create-healthcheck -h hc-test=ping hc2", "ilbadm: " + denied + "\n"},
		{"delete-healthcheck hc1", "ilbadm: " + denied + "\n"},
		{"import-config -p " + script, "ilbadm: " + denied + "\n"},
		{"import-config " + script, "ilbadm: " + denied + "\n"},
	} {
		out, errOut, code := as(c.args)
		if code != 1 || out != "" || errOut != c.stderr {
			t.Errorf("ilbadm %s as uid %d:\n got exit %d stdout %q stderr %q\nwant exit 1 stderr %q", c.args, nobody, code, out, errOut, c.stderr)
		}
	}
	if after := ilbadmOK(t, l, "export-config"); after != before {
		t.Fatalf("refused changes modified the configuration:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Reading needs no authorization: every show command prints what root sees.
	for _, args := range []string{"show-rule", "show-rule -f", "show-servergroup", "show-server",
		"show-healthcheck", "show-hc-result", "show-statistics", "show-nat", "show-persist", "export-config"} {
		out, errOut, code := as(args)
		if want := ilbadmOK(t, l, strings.Fields(args)...); code != 0 || errOut != "" || (out != want && args != "show-statistics") {
			t.Errorf("ilbadm %s as uid %d: exit %d stderr %q\n got %q\nwant %q", args, nobody, code, errOut, out, want)
		}
	}
}
