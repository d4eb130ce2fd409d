package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
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
}

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
	Gateway    netip.Addr
	AdminGroup string
	// ConnTable is the number of connection entries per data-plane worker.
	ConnTable int
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
		var v string
		if v, err = one(); err == nil {
			s.Gateway, err = netip.ParseAddr(v)
		}
	case "conn-table":
		var v string
		if v, err = one(); err == nil {
			s.ConnTable, err = strconv.Atoi(v)
			if err == nil && s.ConnTable < 1024 {
				err = errors.New("conn-table must be at least 1024")
			}
		}
	case "port":
		if len(args) < 2 {
			return errors.New("port needs a device and at least one address/prefix")
		}
		p := PortSetting{Device: args[0]}
		for _, a := range args[1:] {
			pfx, perr := netip.ParsePrefix(a)
			if perr != nil {
				return fmt.Errorf("port %s: %w", args[0], perr)
			}
			p.Addrs = append(p.Addrs, pfx)
		}
		s.Ports = append(s.Ports, p)
	default:
		return fmt.Errorf("unknown setting %q", key)
	}
	return err
}

// loadSettings reads the settings file: the default one may be missing, an explicit one not.
func loadSettings(path string, explicit bool) (*Settings, error) {
	s := &Settings{Store: DefaultStore, AdminGroup: "ilbadm", ConnTable: 1 << 18}
	err := parseSettings(path, s)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && !explicit) {
		return nil, err
	}
	return s, nil
}
