package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinDir finds the directory holding ilbd and ilbadm: dir if non-empty, else $ILB_BIN,
// else <repo>/bin where <repo> is the nearest parent of the working directory with the
// project's go.mod. It fails, telling to run `make build`, when a binary is missing.
func BinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("ILB_BIN")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, b := range []string{"ilbd", "ilbadm"} {
		p := filepath.Join(dir, b)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s not found or not executable: run `make build` first (or set ILB_BIN to the directory holding ilbd and ilbadm)", p)
		}
	}
	return dir, nil
}

// RepoRoot returns the nearest directory at or above the working directory whose go.mod
// declares module github.com/ilbgo/ilb.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/ilbgo/ilb")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of github.com/ilbgo/ilb above %s", wd)
		}
	}
}

// SocketPath is the control socket of the lab's ilbd.
func (l *Lab) SocketPath() string { return filepath.Join(l.Dir, "ilb.sock") }

// StorePath is the durable configuration file of the lab's ilbd.
func (l *Lab) StorePath() string { return filepath.Join(l.Dir, "config.json") }

// SettingsPath is the settings file given to ilbd with -f.
func (l *Lab) SettingsPath() string { return filepath.Join(l.Dir, "ilbd.conf") }

// IlbdLogPath is where ilbd's stdout and stderr go (all starts appended).
func (l *Lab) IlbdLogPath() string { return filepath.Join(l.Dir, "ilbd.log") }

// IlbdLog returns ilbd's output so far ("" if it never ran).
func (l *Lab) IlbdLog() string {
	b, _ := os.ReadFile(l.IlbdLogPath())
	return string(b)
}

// LcoresEnv names the environment variable that gives the lab's ilbd an EAL --lcores list,
// and so its number of workers (every lcore but the main one).
const LcoresEnv = "ILB_LAB_LCORES"

// Settings returns the settings file text for this lab.
func (l *Lab) Settings() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# ilbd settings written by tests/lab for %s\n", l.Prefix)
	fmt.Fprintf(&b, "socket   %s\n", l.SocketPath())
	fmt.Fprintf(&b, "store    %s\n", l.StorePath())
	if l.opts.ConfigOnly {
		b.WriteString("# configuration only: no eal, no port lines (no data plane)\n")
		return b.String()
	}
	eal := l.opts.EAL
	if eal == "" {
		// $ILB_LAB_LCORES (e.g. 0@0,1@0,2@1: two workers on a 2-CPU machine) runs ilbd with
		// several workers; by default one worker on lcore 1.
		lcores := "-l 0-1"
		if lc := os.Getenv(LcoresEnv); lc != "" {
			lcores = "--lcores=" + lc
		}
		if l.opts.Lcores != "" {
			lcores = "--lcores=" + l.opts.Lcores
		}
		eal = lcores + " --no-huge -m 512 --no-pci --no-telemetry --file-prefix=" + l.Prefix
	}
	fmt.Fprintf(&b, "eal      %s\n", eal)
	if l.opts.IPv6 {
		fmt.Fprintf(&b, "port     net_af_packet0,iface=lbc   %s/24 %s/64\n", ClientGW, ClientGW6)
		fmt.Fprintf(&b, "port     net_af_packet1,iface=lbs   %s/24 %s/64\n", ServerGW, ServerGW6)
	} else {
		fmt.Fprintf(&b, "port     net_af_packet0,iface=lbc   %s/24\n", ClientGW)
		fmt.Fprintf(&b, "port     net_af_packet1,iface=lbs   %s/24\n", ServerGW)
	}
	if l.opts.Gateway != "" {
		fmt.Fprintf(&b, "gateway  %s\n", l.opts.Gateway)
	}
	for _, line := range l.opts.ExtraSettings {
		fmt.Fprintf(&b, "%s\n", line)
	}
	return b.String()
}

// Ilbd is the ilbd subprocess of a lab.
type Ilbd struct {
	lab    *Lab
	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has been reaped
	exit   error         // its Wait result
	starts int
}

// StartIlbd writes the settings file, starts ilbd and waits until it is ready (its control
// socket accepts connections and `ilbadm show-rule` exits 0), at most Options.ReadyTimeout.
// In the namespace lab it runs as `ip netns exec <lb ns> <bin>/ilbd -d -f <settings>`; in a
// ConfigOnly lab as `<bin>/ilbd -d -f <settings>`.
func (l *Lab) StartIlbd() (*Ilbd, error) {
	if l.opts.KernelRouter {
		return nil, errors.New("ilbd cannot run in a KernelRouter lab")
	}
	bin, err := BinDir(l.opts.BinDir)
	if err != nil {
		return nil, err
	}
	if n := len(l.SocketPath()); n >= 108 {
		return nil, fmt.Errorf("socket path %s is %d bytes, too long for a Unix socket", l.SocketPath(), n)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("lab is closed")
	}
	if l.ilbd != nil {
		l.mu.Unlock()
		return nil, errors.New("ilbd already started")
	}
	d := &Ilbd{lab: l, bin: bin}
	l.ilbd = d // from now on Close stops it
	l.mu.Unlock()
	if err := os.WriteFile(l.SettingsPath(), []byte(l.Settings()), 0o644); err != nil {
		return nil, err
	}
	if err := d.startAndWait(); err != nil {
		return nil, err
	}
	return d, nil
}

// Ilbd returns the lab's ilbd (nil before StartIlbd).
func (l *Lab) Ilbd() *Ilbd {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ilbd
}

func (d *Ilbd) startAndWait() error {
	if err := d.start(); err != nil {
		return err
	}
	if err := d.waitReady(d.lab.opts.ReadyTimeout); err != nil {
		_ = d.Kill9()
		return fmt.Errorf("%w\n--- ilbd log (%s), last part ---\n%s", err, d.lab.IlbdLogPath(), tail(d.lab.IlbdLog(), 4000))
	}
	return nil
}

func (d *Ilbd) start() error {
	l := d.lab
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil && !isDone(d.done) {
		return errors.New("ilbd is already running")
	}
	ilbd := filepath.Join(d.bin, "ilbd")
	args := []string{ilbd, "-d", "-f", l.SettingsPath()}
	if !l.opts.ConfigOnly {
		ip, err := Tool("ip")
		if err != nil {
			return err
		}
		args = append([]string{ip, "netns", "exec", l.LBNS}, args...)
	}
	logf, err := os.OpenFile(l.IlbdLogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	d.starts++
	fmt.Fprintf(logf, "=== start %d at %s: %s\n", d.starts, time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "ILB_SOCKET="+l.SocketPath())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = l.Dir
	// Own process group: a Ctrl-C on the demo's terminal reaches the demo, which then
	// stops ilbd in order. Pdeathsig: if the test process dies without cleaning up, ilbd
	// (which `ip netns exec` execs in place, same PID) does not keep polling a core.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting ilbd: %w", err)
	}
	d.cmd = cmd
	done := make(chan struct{})
	d.done = done
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.exit = err
		d.mu.Unlock()
		close(done)
	}()
	l.opts.Logf("ilbd started (pid %d): %s", cmd.Process.Pid, strings.Join(args, " "))
	return nil
}

func isDone(c chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (d *Ilbd) waitReady(timeout time.Duration) error {
	l := d.lab
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-done:
			d.mu.Lock()
			err := d.exit
			d.mu.Unlock()
			return fmt.Errorf("ilbd exited before it was ready: %v", err)
		default:
		}
		c, err := net.DialTimeout("unix", l.SocketPath(), 500*time.Millisecond)
		if err == nil {
			c.Close()
			out, serr, code := l.ilbadm(false, "show-rule")
			if code == 0 {
				l.opts.Logf("ilbd ready (start %d)", d.starts)
				return nil
			}
			last = fmt.Sprintf("ilbadm show-rule: exit %d, stdout %q, stderr %q", code, out, serr)
		} else {
			last = err.Error()
		}
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("ilbd not ready after %v (last: %s)", timeout, last)
}

// Pid is the current process id (0 if not running).
func (d *Ilbd) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil || isDone(d.done) {
		return 0
	}
	return d.cmd.Process.Pid
}

// Running tells whether the ilbd process is alive.
func (d *Ilbd) Running() bool { return d.Pid() != 0 }

// ExitError is the Wait result of the last process that ended (nil: exit status 0).
func (d *Ilbd) ExitError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exit
}

// signalAndWait sends sig and waits up to timeout for the process to end.
func (d *Ilbd) signalAndWait(sig syscall.Signal, timeout time.Duration) bool {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil || isDone(done) {
		return true
	}
	if sig == syscall.SIGKILL {
		// The whole process group (ilbd leads its own): nothing it started survives.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop ends ilbd gracefully: SIGTERM, up to 10 s, then SIGKILL. It reports an error if
// SIGKILL was needed or ilbd exited with a non-zero status after SIGTERM.
func (d *Ilbd) Stop() error {
	if !d.Running() {
		return nil
	}
	if d.signalAndWait(syscall.SIGTERM, 10*time.Second) {
		if err := d.ExitError(); err != nil {
			return fmt.Errorf("ilbd exited with %v after SIGTERM", err)
		}
		return nil
	}
	if d.signalAndWait(syscall.SIGKILL, 5*time.Second) {
		return errors.New("ilbd ignored SIGTERM for 10 s: killed")
	}
	return fmt.Errorf("ilbd (pid %d) survived SIGKILL for 5 s", d.Pid())
}

// Kill9 kills ilbd with SIGKILL (a crash: no chance to clean up) and waits for it.
func (d *Ilbd) Kill9() error {
	if d.signalAndWait(syscall.SIGKILL, 5*time.Second) {
		d.lab.opts.Logf("ilbd killed with SIGKILL")
		return nil
	}
	return fmt.Errorf("ilbd (pid %d) survived SIGKILL for 5 s", d.Pid())
}

// Restart starts ilbd again with the same settings (stopping it first if it runs) and
// waits until it is ready.
func (d *Ilbd) Restart() error {
	if err := d.Stop(); err != nil {
		return err
	}
	return d.startAndWait()
}

// Log is the lab's ilbd log.
func (d *Ilbd) Log() string { return d.lab.IlbdLog() }

// Ilbadm runs `<bin>/ilbadm args...` in the caller's namespace with ILB_SOCKET set to the
// lab's socket (a filesystem path, so it reaches ilbd across network namespaces), bounded
// to 30 s. exit is -1 if ilbadm could not be run or timed out (stderr then says why).
func (l *Lab) Ilbadm(args ...string) (stdout, stderr string, exit int) {
	return l.ilbadm(true, args...)
}

func (l *Lab) ilbadm(transcript bool, args ...string) (string, string, int) {
	if transcript && l.opts.Transcript != nil {
		fmt.Fprintf(l.opts.Transcript, "# ilbadm %s\n", shellJoin(args))
	}
	bin, err := BinDir(l.opts.BinDir)
	if err != nil {
		return "", err.Error(), -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "ilbadm"), args...)
	cmd.Env = append(os.Environ(), "ILB_SOCKET="+l.SocketPath())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		return o.String(), e.String() + "\n[lab: ilbadm timed out after 30s]", -1
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			return o.String(), e.String(), ee.ExitCode()
		}
		return o.String(), e.String() + "\n[lab: " + err.Error() + "]", -1
	}
	return o.String(), e.String(), 0
}

// shellJoin quotes args for display like a shell would need them.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
