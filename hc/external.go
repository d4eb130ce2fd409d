package hc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxProbeOutput is how much of an external probe's output is read: Solaris read at most
// HC_MAX_PROBE_OUTPUT-1 = 23 bytes, once, when the first output arrived.
const maxProbeOutput = 23

// external runs p.Path directly (no shell) with Solaris' six arguments, an empty
// environment, stdin and (unless System.Stderr is set) stderr on /dev/null, stdout on a
// pipe, in a process group of its own. The verdict is the first output read (at most 23
// bytes, parsed like strtoll): -1 is a failure, a value > 0 success with that RTT in µs,
// anything else success without RTT. No output before the probe closes its stdout, or none
// before the deadline, is a failure. The whole process group is killed (SIGKILL) at the
// deadline if the probe is still running then, and once the probe has exited, so that
// nothing it started outlives it; the exit status is ignored.
func (s *System) external(ctx context.Context, p Probe, deadline time.Time) Outcome {
	closing := s.closingCh()
	s.mu.Lock()
	select {
	case <-closing:
		s.mu.Unlock()
		return Outcome{NotRun: true, Err: errors.New("shutting down")}
	default:
	}
	s.wg.Add(1)
	s.mu.Unlock()

	r, w, err := os.Pipe()
	if err != nil {
		s.wg.Done()
		return Outcome{NotRun: true, Err: err}
	}
	cmd := &exec.Cmd{
		Path:        p.Path,
		Args:        append([]string{p.Path}, p.Args()...),
		Env:         []string{}, // empty, not inherited (Solaris: posix_spawn with envp NULL)
		Stdout:      w,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		s.wg.Done()
		return Outcome{NotRun: true, Err: err}
	}
	kill := make(chan struct{})
	go s.reap(cmd, deadline, kill, closing)

	out, n, rerr := readFirst(ctx, r, deadline)
	r.Close()
	if n == 0 {
		close(kill) // silent until EOF, deadline or shutdown: nothing more to wait for
		if errors.Is(rerr, os.ErrDeadlineExceeded) {
			return Outcome{Err: fmt.Errorf("killed after hc-timeout without output")}
		}
		return Outcome{Err: fmt.Errorf("no output: %v", rerr)}
	}
	return parseOutput(out[:n])
}

// readFirst performs one read of at most maxProbeOutput bytes from r, bounded by the
// deadline and ctx.
func readFirst(ctx context.Context, r *os.File, deadline time.Time) ([maxProbeOutput]byte, int, error) {
	var buf [maxProbeOutput]byte
	if err := r.SetReadDeadline(deadline); err != nil {
		return buf, 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = r.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	n, err := r.Read(buf[:])
	return buf, n, err
}

// reap waits for the probe to exit, killing its process group at the deadline, when told
// to, or on shutdown; then it kills whatever is left of the group and collects the exit
// status. The group is only ever signalled while its leader is unreaped (a zombie at
// worst), so its ID cannot have been reused by an unrelated process.
func (s *System) reap(cmd *exec.Cmd, deadline time.Time, kill, closing <-chan struct{}) {
	defer s.wg.Done()
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		// WNOWAIT: learn of the exit without reaping, keeping the group ID reserved.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
		close(exited)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
	case <-kill:
	case <-closing:
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
	<-exited
	_ = cmd.Wait()
}

// parseOutput interprets a probe's output as Solaris' ilbd did (strtoll, base 10).
func parseOutput(b []byte) Outcome {
	v := strtoll(b)
	switch {
	case v == -1:
		return Outcome{Err: errors.New("probe reported -1")}
	case v > 0 && v <= 0xFFFFFFFF:
		return Outcome{OK: true, RTT: v}
	}
	return Outcome{OK: true}
}

// strtoll parses like C's strtoll(s, NULL, 10): leading white space, an optional sign,
// decimal digits up to the first non-digit; no digits gives 0; overflow saturates.
func strtoll(b []byte) int64 {
	i := 0
	for i < len(b) && (b[i] == ' ' || (b[i] >= '\t' && b[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var v uint64
	const limit = 1 << 63
	over := false
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if over || v > (limit-d)/10 {
			over = true
			continue
		}
		v = v*10 + d
	}
	switch {
	case neg && (over || v == limit):
		return -1 << 63
	case neg:
		return -int64(v)
	case over || v == limit:
		return 1<<63 - 1
	}
	return int64(v)
}
