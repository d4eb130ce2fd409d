package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/tests/lab"
)

// These tests run ilbd the ways a service manager does, in configuration-only mode (no
// data plane, so no namespace is needed): as a daemon that detaches, as a systemd
// Type=notify service with a watchdog, and socket-activated.

// serviceDir writes a settings file for a configuration-only ilbd in a new directory.
func serviceDir(t *testing.T) (dir, conf, sock string) {
	t.Helper()
	needBinaries(t)
	dir = t.TempDir()
	sock = filepath.Join(dir, "ilb.sock")
	conf = filepath.Join(dir, "ilbd.conf")
	settings := "socket " + sock + "\nstore " + filepath.Join(dir, "config.json") + "\n"
	if err := os.WriteFile(conf, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, conf, sock
}

// cleanEnv is the test's environment without anything that would make ilbd think it runs
// under systemd or point it at another socket.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "INVOCATION_ID", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
			"WATCHDOG_USEC", "WATCHDOG_PID", "ILB_SOCKET":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func bin(t *testing.T, name string) string {
	t.Helper()
	dir, err := lab.BinDir("")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// ilbadmAt runs ilbadm against sock.
func ilbadmAt(t *testing.T, sock string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(t, "ilbadm"), args...)
	cmd.Env = cleanEnv("ILB_SOCKET=" + sock)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return o.String(), e.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("ilbadm: %v", err)
	}
	return o.String(), e.String(), 0
}

// peerPID returns the PID of the process serving sock, from the connection's peer
// credentials.
func peerPID(t *testing.T, sock string) int {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.(*net.UnixConn).SyscallConn()
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil {
		t.Fatal(err)
	}
	return int(cred.Pid)
}

// waitGone waits (bounded) until pid no longer exists.
func waitGone(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
	}
	return false
}

// killOnCleanup makes sure a daemon the test started does not outlive it.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		if syscall.Kill(pid, 0) == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 5*time.Second)
		}
	})
}

// Without -d, ilbd detaches as Solaris' ilbd does: the command returns once the daemon
// serves its socket, the daemon lives on in its own session, and SIGTERM stops it cleanly.
func TestDaemonizes(t *testing.T) {
	_, conf, sock := serviceDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(t, "ilbd"), "-f", conf)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ilbd -f: %v\n%s", err, out)
	}
	pid := peerPID(t, sock)
	killOnCleanup(t, pid)
	if pid == cmd.Process.Pid {
		t.Fatalf("the socket is served by the command itself (pid %d), not a daemon", pid)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("daemon %d is not a session leader (sid %d, %v)", pid, sid, err)
	}
	if _, errOut, code := ilbadmAt(t, sock, "create-servergroup", "sg1"); code != 0 {
		t.Fatalf("ilbadm against the daemon: %d %s", code, errOut)
	}
	if out, _, _ := ilbadmAt(t, sock, "show-servergroup"); !strings.HasPrefix(out, "SGNAME") {
		t.Fatalf("show-servergroup: %q", out)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	if !waitGone(pid, 10*time.Second) {
		t.Fatal("the daemon did not stop on SIGTERM")
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket was left behind: %v", err)
	}
}

// Under systemd (Type=notify), ilbd reports READY=1 only once its socket serves, pings the
// watchdog, and reports STOPPING=1 on SIGTERM.
func TestSystemdNotify(t *testing.T) {
	dir, conf, sock := serviceDir(t)
	notifyPath := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	cmd := exec.Command(bin(t, "ilbd"), "-f", conf)
	// INVOCATION_ID is how ilbd (like any service) knows systemd started it: it stays in
	// the foreground and logs to the journal (stderr).
	cmd.Env = cleanEnv("NOTIFY_SOCKET="+notifyPath, "INVOCATION_ID=test", "WATCHDOG_USEC=400000")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	got := map[string]int{}
	read := func(want string, within time.Duration) {
		t.Helper()
		buf := make([]byte, 4096)
		for deadline := time.Now().Add(within); got[want] == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %v (got %v); ilbd log:\n%s", want, within, got, log.String())
			}
			notify.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := notify.Read(buf)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				got[line]++
				if line == "READY=1" {
					// Ready means ready: the socket must already serve.
					if _, errOut, code := ilbadmAt(t, sock, "show-rule"); code != 0 {
						t.Errorf("READY=1 before the socket served: %s", errOut)
					}
				}
			}
		}
	}
	read("READY=1", 30*time.Second)
	read("WATCHDOG=1", 5*time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	read("STOPPING=1", 10*time.Second)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("ilbd exited with %v; log:\n%s", err, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ilbd did not exit after SIGTERM")
	}
}

// With socket activation (systemd's .socket unit, here systemd-socket-activate) ilbd
// serves the socket it is handed instead of creating one, so no client request is lost
// while it starts.
func TestSocketActivation(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate is not installed (package systemd)")
	}
	dir, conf, _ := serviceDir(t)
	activated := filepath.Join(dir, "activated.sock")
	cmd := exec.Command(activate, "-l", activated, bin(t, "ilbd"), "-d", "-f", conf)
	cmd.Env = cleanEnv()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, cmd.Process.Pid)
	// The socket exists before ilbd runs; the first client starts it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(activated); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-socket-activate did not create %s; log:\n%s", activated, log.String())
		}
	}
	if _, errOut, code := ilbadmAt(t, activated, "create-servergroup", "sg1"); code != 0 {
		t.Fatalf("first request through the activated socket: %d %s; log:\n%s", code, errOut, log.String())
	}
	if out, _, code := ilbadmAt(t, activated, "show-servergroup"); code != 0 || !strings.Contains(out, "sg1") {
		t.Fatalf("show-servergroup: %d %q", code, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("ilbd did not stop; log:\n%s", log.String())
	}
}

// The units in dist/ verify with systemd-analyze (with ExecStart pointed at the built ilbd),
// the socket unit listens where ilbd and ilbadm expect, and the service reloads by SIGHUP.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	for _, u := range []string{"ilbd.service", "ilbd.socket"} {
		b, err := os.ReadFile(filepath.Join("..", "dist", u))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "/usr/sbin/ilbd", bin(t, "ilbd"))
		if u == "ilbd.socket" && !strings.Contains(text, "\nListenStream="+api.DefaultSocket+"\n") {
			t.Errorf("ilbd.socket does not listen on %s", api.DefaultSocket)
		}
		if u == "ilbd.service" && !strings.Contains(text, "\nExecReload=/bin/kill -HUP $MAINPID\n") {
			t.Error("ilbd.service has no ExecReload by SIGHUP")
		}
		if err := os.WriteFile(filepath.Join(dir, u), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(analyze, "verify", filepath.Join(dir, "ilbd.socket"), filepath.Join(dir, "ilbd.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// SIGHUP makes a running ilbd read its settings again: a new admin group applies (and a
// missing one is reported), a changed store is named as waiting for a restart.
func TestSIGHUPReload(t *testing.T) {
	dir, conf, sock := serviceDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logPath := filepath.Join(dir, "ilbd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin(t, "ilbd"), "-d", "-f", conf)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	waitLog := func(what string) {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(logText(), what) {
				return
			}
		}
		t.Fatalf("ilbd never logged %q:\n%s", what, logText())
	}
	waitLog("listening on")
	settings := "socket " + sock + "\nstore " + filepath.Join(dir, "other.json") + "\nadmin-group ilb-no-such-group-xyz\n"
	if err := os.WriteFile(conf, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog("takes effect when ilbd restarts")
	if _, _, code := ilbadmAt(t, sock, "show-servergroup"); code != 0 {
		t.Error("ilbd does not serve after SIGHUP")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	log := logText()
	for _, want := range []string{`SIGHUP: admin group is now "ilb-no-such-group-xyz"`, `admin group "ilb-no-such-group-xyz" does not exist`,
		"SIGHUP: store changed in the settings; it takes effect when ilbd restarts"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "stopping") && strings.Index(log, "stopping") < strings.Index(log, "SIGHUP") {
		t.Errorf("SIGHUP stopped ilbd:\n%s", log)
	}
}
