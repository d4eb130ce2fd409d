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
	"github.com/ilbgo/ilb/dataplane"
)

// DefaultSettingsFile is read when -f is not given; it may be absent.
const DefaultSettingsFile = "/etc/ilb/ilbd.conf"

// DefaultStore is where the configuration is kept durably.
const DefaultStore = "/var/lib/ilb/config.json"

// Settings are ilbd's own settings (the load-balancing configuration is in the store): its
// control socket, store and admin group, and the data plane's configuration.
type Settings struct {
	Socket     string
	Store      string
	AdminGroup string
	dataplane.Config
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
	case "steer-prefix":
		if len(args) < 1 || len(args) > 2 {
			return errors.New("steer-prefix takes an IPv4 prefix length and optionally an IPv6 one")
		}
		b4, e4 := strconv.Atoi(args[0])
		if e4 != nil || b4 < 1 || b4 > 32 {
			return fmt.Errorf("steer-prefix: IPv4 prefix length must be 1 to 32, not %q", args[0])
		}
		b6 := 128
		if len(args) == 2 {
			var e6 error
			if b6, e6 = strconv.Atoi(args[1]); e6 != nil || b6 < 1 || b6 > 128 {
				return fmt.Errorf("steer-prefix: IPv6 prefix length must be 1 to 128, not %q", args[1])
			}
		}
		s.SteerPrefix4, s.SteerPrefix6 = b4, b6
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
			var t dataplane.TapMode
			if t, err = parseOnOff(key, v); err == nil {
				s.NoException = t == dataplane.ExceptionOff
			}
		}
	case "port":
		if len(args) < 2 {
			return errors.New("port needs a device and at least one address/prefix")
		}
		p := dataplane.Port{Device: args[0]}
		for _, a := range args[1:] {
			if k, v, ok := strings.Cut(a, "="); ok {
				if perr := setPortOption(&p, k, v); perr != nil {
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

// setPortOption applies one KEY=VALUE option of a port line.
func setPortOption(p *dataplane.Port, k, v string) error {
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

func parseOnOff(key, v string) (dataplane.TapMode, error) {
	switch v {
	case "on":
		return dataplane.ExceptionOn, nil
	case "off":
		return dataplane.ExceptionOff, nil
	}
	return dataplane.ExceptionDefault, fmt.Errorf("%s must be on or off, not %q", key, v)
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

// loadSettings reads the settings file: the default one may be missing, an explicit one not.
func loadSettings(path string, explicit bool) (*Settings, error) {
	s := &Settings{Store: DefaultStore, AdminGroup: "ilbadm",
		Config: dataplane.Config{ConnTable: 1 << 18, HalfOpenTimeout: datapath.DefaultHalfOpenTimeout}}
	err := parseSettings(path, s)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && !explicit) {
		return nil, err
	}
	return s, nil
}
