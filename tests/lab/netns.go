package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// inNS runs fn on an OS thread that has joined the network namespace ns.
//
// Sockets are bound to the namespace of the thread that creates them and stay there, so a
// listener or a dialled connection created inside fn keeps working after fn returns, from
// any goroutine. The goroutine is locked to its thread for the duration; the thread goes
// back to its original namespace afterwards. If it cannot go back, the goroutine exits
// still locked, which makes the Go runtime destroy the thread instead of reusing it.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("get current netns: %w", err)
			return // exits locked: thread discarded
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
			return
		}
		ferr := fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		} // else: leave locked, the thread dies with this goroutine
		errc <- ferr
	}()
	return <-errc
}

// sysctl writes value to /proc/sys/<key> (key with slashes, e.g. "net/ipv4/ip_forward")
// inside namespace ns. /proc/sys/net is resolved against the namespace of the calling
// thread, which inNS sets. A missing IPv6 tree (kernel booted with ipv6.disable=1) is
// not an error when disabling IPv6.
func sysctl(ns netns.NsHandle, key, value string) error {
	return inNS(ns, func() error {
		p := filepath.Join("/proc/sys", key)
		err := os.WriteFile(p, []byte(value), 0o644)
		if err != nil && errors.Is(err, os.ErrNotExist) && strings.HasPrefix(key, "net/ipv6/") && value == "1" {
			return nil
		}
		if err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
		}
		return nil
	})
}

// run executes a command with a deadline and returns its combined output.
// name is looked up with Tool.
func run(timeout time.Duration, name string, args ...string) (string, error) {
	bin, err := Tool(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s %s: timed out after %v", name, strings.Join(args, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Tool finds an administration command in $PATH or, as a non-login root shell may lack
// them in $PATH, in /usr/sbin or /sbin.
func Tool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		c := filepath.Join(d, name)
		if fi, serr := os.Stat(c); serr == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", err
}
