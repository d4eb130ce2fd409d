// Command ilbd is the Integrated Load Balancer daemon: it keeps the configuration that
// ilbadm changes, stores it durably, and runs the DPDK data plane that balances packets.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/syslog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/dataplane"
	"github.com/ilbgo/ilb/rules"
)

const version = "ilbd 1.0"

// daemonizedEnv marks the background child that daemonize starts.
const daemonizedEnv = "ILBD_DAEMONIZED"

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("ilbd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		debug, debugLong, showVersion bool
		settingsPath, socket, store   string
		eal, gateway, adminGroup      string
		exception                     string
		ports                         multiFlag
		// Settings of the connection table, one value each, as in the settings file.
		connFlags = map[string]*string{"conn-table": new(string), "half-open-timeout": new(string), "conn-full": new(string), "steer-prefix": new(string)}
	)
	fs.BoolVar(&debug, "d", false, "stay in the foreground and log to stderr")
	fs.BoolVar(&debugLong, "debug", false, "same as -d")
	fs.BoolVar(&showVersion, "V", false, "print the version")
	fs.StringVar(&settingsPath, "f", "", "settings file (default "+DefaultSettingsFile+")")
	fs.StringVar(&socket, "socket", "", "control socket path (default $ILB_SOCKET or "+api.DefaultSocket+")")
	fs.StringVar(&store, "store", "", "durable configuration file (default "+DefaultStore+")")
	fs.StringVar(&eal, "eal", "", "DPDK EAL arguments, space separated")
	fs.Var(&ports, "port", `data-plane port "DEVICE ADDR/PREFIX..." (repeatable)`)
	fs.StringVar(&gateway, "gateway", "", "default gateways of the data plane: one IPv4 and/or one IPv6 address, space separated")
	fs.StringVar(&exception, "exception", "", "exception path to the host's kernel through a TAP per port: on or off")
	fs.StringVar(&adminGroup, "admin-group", "", "group whose members may change the configuration")
	fs.StringVar(connFlags["conn-table"], "conn-table", "", "connection entries per worker (default 262144)")
	fs.StringVar(connFlags["half-open-timeout"], "half-open-timeout", "", "seconds a connection may stay half-open, or closing after a RST (default 5)")
	fs.StringVar(connFlags["steer-prefix"], "steer-prefix", "", `with several workers, the client-address prefix lengths that choose a flow's worker: "BITS4 [BITS6]" (default 32 128)`)
	fs.StringVar(connFlags["conn-full"], "conn-full", "", "when the connection table is full: evict (the oldest half-open entry) or drop (the new connection)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		// Asked for help: usage on stdout, success; a bad option: usage on stderr, failure.
		out, status := os.Stderr, 1
		if errors.Is(err, flag.ErrHelp) {
			out, status = os.Stdout, 0
		}
		fmt.Fprintf(out, "Usage: %s [-d|--debug] [-f settings] [-socket path] [-store path]\n", os.Args[0])
		fs.SetOutput(out)
		fs.PrintDefaults()
		return status
	}
	if showVersion {
		fmt.Println(version)
		fmt.Println("Copyright (c) 2005, 2010, Oracle and/or its affiliates. All rights reserved.")
		return 0
	}
	debug = debug || debugLong

	path, explicit := settingsPath, settingsPath != ""
	if !explicit {
		path = DefaultSettingsFile
	}
	// settings reads the file and applies the flags over it: at start, and again on SIGHUP.
	// Precedence: flag, then environment (socket only), then settings file, then default.
	settings := func() (*Settings, error) {
		s, err := loadSettings(path, explicit)
		if err != nil {
			return nil, err
		}
		return s, applyFlags(s)
	}
	applyFlags = func(s *Settings) error {
		if socket != "" {
			s.Socket = socket
		} else if env := os.Getenv(api.SocketEnv); env != "" {
			s.Socket = env
		}
		if s.Socket == "" {
			s.Socket = api.DefaultSocket
		}
		if store != "" {
			s.Store = store
		}
		if adminGroup != "" {
			s.AdminGroup = adminGroup
		}
		if eal != "" {
			s.EAL = strings.Fields(eal)
		}
		if gateway != "" {
			if err := s.set("gateway", strings.Fields(gateway)); err != nil {
				return err
			}
		}
		if exception != "" {
			if err := s.set("exception", []string{exception}); err != nil {
				return err
			}
		}
		for _, p := range ports {
			if err := s.set("port", strings.Fields(p)); err != nil {
				return err
			}
		}
		for _, k := range []string{"conn-table", "half-open-timeout", "conn-full", "steer-prefix"} {
			if v := *connFlags[k]; v != "" {
				if err := s.set(k, strings.Fields(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	s, err := settings()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ilbd: %v\n", err)
		return 1
	}

	underSystemd := os.Getenv("INVOCATION_ID") != "" || os.Getenv("NOTIFY_SOCKET") != ""
	if !debug && !underSystemd {
		return daemonize(args, s.Socket)
	}
	logger := log.New(os.Stderr, "ilbd: ", log.LstdFlags)
	if os.Getenv(daemonizedEnv) != "" {
		// A background daemon has no terminal: log to syslog as Solaris' ilbd does.
		if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_INFO, "ilbd"); err == nil {
			logger = log.New(w, "", 0)
		}
	}
	if err := serve(s, logger, settings); err != nil {
		logger.Printf("%v", err)
		return 1
	}
	return 0
}

// serve runs the daemon until SIGTERM, SIGINT or SIGQUIT; SIGHUP reads the settings again
// through reload.
func serve(s *Settings, logger *log.Logger, reload func() (*Settings, error)) error {
	mgr, err := rules.NewManager(&rules.Store{Path: s.Store})
	if err != nil {
		return fmt.Errorf("loading configuration: %w", err)
	}
	cfg := mgr.Config()
	logger.Printf("loaded %d rules, %d server groups, %d health checks from %s",
		len(cfg.Rules), len(cfg.Groups), len(cfg.HealthChecks), s.Store)

	var dp *dataplane.Dataplane
	if len(s.Ports) > 0 {
		dp, err = dataplane.Start(&s.Config, mgr.Snapshot(), logger)
		if err != nil {
			return fmt.Errorf("data plane: %w", err)
		}
		defer dp.Close()
	} else {
		logger.Printf("no data-plane port configured: configuration only")
	}

	// The socket is created only once the data plane runs, so a client that can connect
	// knows that ilbd is fully up.
	l, err := listener(s.Socket)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", s.Socket, err)
	}
	checker := startHealth(mgr, logger)
	defer checker.close()
	warnAdminGroup(s.AdminGroup, logger.Printf)
	svc := &api.Service{Mgr: mgr, AdminGroup: s.AdminGroup, Log: logger, Health: checker}
	if dp != nil {
		svc.Tables = tables{dp}
		stopWatch := make(chan struct{})
		go dp.WatchChecksums(stopWatch)
		defer close(stopWatch)
	}
	done := make(chan error, 1)
	go func() { done <- api.Serve(l, svc.Handle) }()
	logger.Printf("listening on %s", s.Socket)
	daemon.SdNotify(false, daemon.SdNotifyReady)
	stopWatchdog := watchdog(dp)
	defer stopWatchdog()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	for stop := false; !stop; {
		select {
		case got := <-sig:
			if got != syscall.SIGHUP {
				logger.Printf("%v: stopping", got)
				stop = true
				break
			}
			daemon.SdNotify(false, daemon.SdNotifyReloading)
			if ns, err := reload(); err != nil {
				logger.Printf("SIGHUP: settings not reloaded: %v", err)
			} else {
				s = applyReload(s, ns, svc, logger.Printf)
			}
			daemon.SdNotify(false, daemon.SdNotifyReady)
		case err := <-done:
			return err
		}
	}
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	l.Close()
	os.Remove(s.Socket)
	return nil
}

// listener returns the systemd-activated socket if there is one, or creates the socket.
func listener(path string) (*net.UnixListener, error) {
	if ls, err := activation.Listeners(); err == nil {
		for _, l := range ls {
			if ul, ok := l.(*net.UnixListener); ok {
				return ul, nil
			}
		}
	}
	if err := os.MkdirAll(dirOf(path), 0o755); err != nil {
		return nil, err
	}
	return api.Listen(path)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return path[:i]
	}
	return "."
}

// watchdog pings systemd's watchdog while the data-plane worker makes progress.
func watchdog(dp *dataplane.Dataplane) func() {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval == 0 {
		return func() {}
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if dp == nil || dp.Alive() {
					daemon.SdNotify(false, daemon.SdNotifyWatchdog)
				}
			}
		}
	}()
	return func() { close(stop) }
}

// daemonize starts ilbd again in the background (as Solaris' ilbd forks unless -d) and
// returns once the child serves its socket, or failed.
func daemonize(args []string, socket string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ilbd: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, append([]string{"-d"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = append(os.Environ(), daemonizedEnv+"=1")
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "ilbd: %v\n", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case err := <-exited:
			fmt.Fprintf(os.Stderr, "ilbd: daemon exited during start-up: %v\n", err)
			return 1
		case <-deadline:
			fmt.Fprintln(os.Stderr, "ilbd: daemon did not open its socket within 60 s")
			return 1
		case <-time.After(100 * time.Millisecond):
			if c, err := net.Dial("unix", socket); err == nil {
				c.Close()
				return 0
			} else if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
				fmt.Fprintf(os.Stderr, "ilbd: %v\n", err)
				return 1
			}
		}
	}
}

// warnAdminGroup logs once at start when the admin group does not exist: its members could
// not be told from anyone else, so only root may change the configuration, which an operator
// would otherwise learn only from a refused command.
func warnAdminGroup(group string, logf func(string, ...any)) {
	if group == "" {
		logf("no admin group configured: only root may change the configuration")
		return
	}
	if _, err := user.LookupGroup(group); err != nil {
		logf("warning: admin group %q does not exist (%v): only root may change the configuration; create it (groupadd %s) or set admin-group", group, err, group)
	}
}

// applyFlags applies the command line over settings read from the file (set in run).
var applyFlags func(*Settings) error

// applyReload takes what can change while ilbd runs from the settings read again on SIGHUP
// (the admin group) and logs every other setting that differs: those take effect at the next
// restart. It returns the settings now in force.
func applyReload(cur, next *Settings, svc *api.Service, logf func(string, ...any)) *Settings {
	out := *cur
	if next.AdminGroup != cur.AdminGroup {
		svc.SetAdminGroup(next.AdminGroup)
		out.AdminGroup = next.AdminGroup
		logf("SIGHUP: admin group is now %q", next.AdminGroup)
		warnAdminGroup(next.AdminGroup, logf)
	}
	changed := settingsDiff(cur, next)
	seen := map[string]bool{}
	for _, field := range changed {
		key := settingKeys[field]
		if key == "" {
			key = field
		}
		if field != "AdminGroup" && !seen[key] {
			seen[key] = true
			logf("SIGHUP: %s changed in the settings; it takes effect when ilbd restarts", key)
		}
	}
	if len(changed) == 0 {
		logf("SIGHUP: settings unchanged")
	}
	return &out
}

// settingKeys names the settings file's key of each Settings field, for the reload's log.
var settingKeys = map[string]string{
	"Socket": "socket", "Store": "store", "AdminGroup": "admin-group", "EAL": "eal", "Ports": "port",
	"Gateways": "gateway", "ConnTable": "conn-table", "HalfOpenTimeout": "half-open-timeout",
	"ConnFullDrop": "conn-full", "SteerPrefix4": "steer-prefix", "SteerPrefix6": "steer-prefix",
	"NoException": "exception",
}

// settingsDiff names the settings that differ between a and b: their fields and those of
// the data plane's configuration.
func settingsDiff(a, b *Settings) []string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	for i := 0; i < va.NumField(); i++ {
		f := va.Type().Field(i)
		if f.Anonymous {
			da, db := va.Field(i), vb.Field(i)
			for j := 0; j < da.NumField(); j++ {
				if !reflect.DeepEqual(da.Field(j).Interface(), db.Field(j).Interface()) {
					out = append(out, da.Type().Field(j).Name)
				}
			}
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, f.Name)
		}
	}
	return out
}
