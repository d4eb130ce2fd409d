package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ilbgo/ilb/datapath"
)

// DefaultSettingsFile is read when -f is not given; it may be absent.
const DefaultSettingsFile = "/etc/ilb/ilbd.conf"

// DefaultStore is where the configuration is kept durably.
const DefaultStore = "/var/lib/ilb/config.json"

// PortSetting is one data-plane port: a DPDK device and the addresses ilbd owns on it.
type PortSetting struct {
	// Device is a vdev ("net_af_packet0,iface=lb0") or a PCI address ("0000:03:00.0").
	Device string
	Addrs  []netip.Prefix
	// Tap names the kernel interface of the port's exception path ("tap=NAME" on the
	// port line); empty means the default, DefaultTapPrefix + the port's index.
	Tap string
	// Exception is the port's own "exception=on|off" option; exceptionDefault means
	// the global "exception" setting decides.
	Exception tristate
}

// tristate is an on/off option that may be left to a default.
type tristate uint8

const (
	exceptionDefault tristate = iota
	exceptionOn
	exceptionOff
)

// DefaultTapPrefix names the kernel interfaces of the exception path: ilb0 for the
// first port, ilb1 for the second, and so on.
const DefaultTapPrefix = "ilb"

// IsVdev reports whether the device is a virtual device (given to EAL with --vdev) rather
// than a PCI device (given with -a).
func (p PortSetting) IsVdev() bool { return strings.HasPrefix(p.Device, "net_") }

// Name is the name DPDK registers the port under: the vdev name without its arguments, or
// the PCI address.
func (p PortSetting) Name() string {
	name, _, _ := strings.Cut(p.Device, ",")
	return name
}

// Settings are ilbd's own settings (the load-balancing configuration is in the store).
type Settings struct {
	Socket     string
	Store      string
	EAL        []string
	Ports      []PortSetting
	Gateways   []netip.Addr // default gateways, at most one IPv4 and one IPv6
	AdminGroup string
	// ConnTable is the number of connection entries per data-plane worker.
	ConnTable int
	// HalfOpenTimeout is how long a connection entry may stay half-open (no completed
	// handshake, or no UDP reply) and how long one lingers after a RST.
	HalfOpenTimeout time.Duration
	// ConnFullDrop refuses new connections when the table is full ("conn-full drop")
	// instead of evicting the least recently active half-open entry ("conn-full evict").
	ConnFullDrop bool
	// NoException turns the exception path (a TAP per port to the host's kernel) off
	// for every port that does not turn it on itself ("exception off").
	NoException bool
}

// parseSettings reads a settings file: one "key value..." per line, '#' starts a comment.
func parseSettings(path string, s *Settings) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if err := s.set(fields[0], fields[1:]); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// set applies one setting; flags and the file share it so both accept the same values.
func (s *Settings) set(key string, args []string) error {
	one := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("%s takes one value", key)
		}
		return args[0], nil
	}
	var err error
	switch key {
	case "socket":
		s.Socket, err = one()
	case "store":
		s.Store, err = one()
	case "admin-group":
		s.AdminGroup, err = one()
	case "eal":
		s.EAL = append([]string(nil), args...)
	case "gateway":
		// One default gateway per address family, on one line or on several.
		if len(args) == 0 {
			return errors.New("gateway needs an address")
		}
		for _, v := range args {
			gw, perr := netip.ParseAddr(v)
			if perr != nil {
				return perr
			}
			s.Gateways = slices.DeleteFunc(s.Gateways, func(g netip.Addr) bool { return g.Is4() == gw.Is4() })
			s.Gateways = append(s.Gateways, gw)
		}
	case "conn-table":
		var v string
		if v, err = one(); err == nil {
			s.ConnTable, err = strconv.Atoi(v)
			if err == nil && s.ConnTable < 1024 {
				err = errors.New("conn-table must be at least 1024")
			}
		}
	case "half-open-timeout":
		var v string
		if v, err = one(); err == nil {
			var n int
			n, err = strconv.Atoi(v)
			if err != nil || n < 1 || n > 3600 {
				err = fmt.Errorf("half-open-timeout must be a number of seconds from 1 to 3600, not %q", v)
			}
			s.HalfOpenTimeout = time.Duration(n) * time.Second
		}
	case "conn-full":
		var v string
		if v, err = one(); err == nil {
			switch v {
			case "evict":
				s.ConnFullDrop = false
			case "drop":
				s.ConnFullDrop = true
			default:
				err = fmt.Errorf("conn-full must be evict or drop, not %q", v)
			}
		}
	case "exception":
		var v string
		if v, err = one(); err == nil {
			var t tristate
			if t, err = parseOnOff(key, v); err == nil {
				s.NoException = t == exceptionOff
			}
		}
	case "port":
		if len(args) < 2 {
			return errors.New("port needs a device and at least one address/prefix")
		}
		p := PortSetting{Device: args[0]}
		for _, a := range args[1:] {
			if k, v, ok := strings.Cut(a, "="); ok {
				if perr := p.setOption(k, v); perr != nil {
					return fmt.Errorf("port %s: %w", args[0], perr)
				}
				continue
			}
			pfx, perr := netip.ParsePrefix(a)
			if perr != nil {
				return fmt.Errorf("port %s: %w", args[0], perr)
			}
			p.Addrs = append(p.Addrs, pfx)
		}
		if len(p.Addrs) == 0 {
			return fmt.Errorf("port %s: needs at least one address/prefix", args[0])
		}
		s.Ports = append(s.Ports, p)
	default:
		return fmt.Errorf("unknown setting %q", key)
	}
	return err
}

// setOption applies one KEY=VALUE option of a port line.
func (p *PortSetting) setOption(k, v string) error {
	switch k {
	case "tap":
		if err := checkIfName(v); err != nil {
			return fmt.Errorf("tap=%s: %w", v, err)
		}
		p.Tap = v
	case "exception":
		t, err := parseOnOff(k, v)
		if err != nil {
			return err
		}
		p.Exception = t
	default:
		return fmt.Errorf("unknown port option %q (want tap=NAME or exception=on|off)", k+"="+v)
	}
	return nil
}

func parseOnOff(key, v string) (tristate, error) {
	switch v {
	case "on":
		return exceptionOn, nil
	case "off":
		return exceptionOff, nil
	}
	return exceptionDefault, fmt.Errorf("%s must be on or off, not %q", key, v)
}

// checkIfName accepts a Linux interface name that can also be passed inside a DPDK
// device argument: 1 to 15 bytes, no '/', ',', '=', ':' or white space.
func checkIfName(n string) error {
	if n == "" || len(n) > 15 {
		return errors.New("interface names are 1 to 15 bytes long")
	}
	if n == "." || n == ".." {
		return errors.New("not a valid interface name")
	}
	for _, c := range []byte(n) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/,=:", c) >= 0 {
			return fmt.Errorf("character %q is not allowed in an interface name", c)
		}
	}
	return nil
}

// TapName returns the kernel interface of port i's exception path and whether the port
// has one at all.
func (s *Settings) TapName(i int) (string, bool) {
	p := s.Ports[i]
	if p.Exception == exceptionOff || (p.Exception == exceptionDefault && s.NoException) {
		return "", false
	}
	if p.Tap != "" {
		return p.Tap, true
	}
	return fmt.Sprintf("%s%d", DefaultTapPrefix, i), true
}

// checkTaps fails if two ports would use the same exception interface, or one a kernel
// interface that a port's device works on (its iface= argument).
func (s *Settings) checkTaps() error {
	seen := map[string]int{}
	for i := range s.Ports {
		name, ok := s.TapName(i)
		if !ok {
			continue
		}
		if j, dup := seen[name]; dup {
			return fmt.Errorf("ports %s and %s would both use the exception interface %s (give one of them tap=NAME)",
				s.Ports[j].Name(), s.Ports[i].Name(), name)
		}
		seen[name] = i
	}
	for _, p := range s.Ports {
		if i, dup := seen[deviceIface(p.Device)]; dup {
			n, _ := s.TapName(i)
			return fmt.Errorf("port %s: its exception interface %s is the interface of port %s (name it with tap=NAME)",
				s.Ports[i].Name(), n, p.Device)
		}
	}
	return nil
}

// loadSettings reads the settings file: the default one may be missing, an explicit one not.
func loadSettings(path string, explicit bool) (*Settings, error) {
	s := &Settings{Store: DefaultStore, AdminGroup: "ilbadm", ConnTable: 1 << 18, HalfOpenTimeout: datapath.DefaultHalfOpenTimeout}
	err := parseSettings(path, s)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && !explicit) {
		return nil, err
	}
	return s, nil
}
