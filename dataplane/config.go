package dataplane

// The data plane's configuration: what ilbd's settings file says about ports, EAL and the
// connection tables (ilbd parses the file; this package only reads the result).

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Config configures a data plane.
type Config struct {
	EAL      []string     // EAL arguments: the main lcore serves the control plane, every other one runs a worker
	Ports    []Port       // data-plane ports, in the order of the engine's port numbers
	Gateways []netip.Addr // default gateways, at most one IPv4 and one IPv6
	// ConnTable is the number of connection entries per data-plane worker.
	ConnTable int
	// HalfOpenTimeout is how long a connection entry may stay half-open (no completed
	// handshake, or no UDP reply) and how long one lingers after a RST.
	HalfOpenTimeout time.Duration
	// ConnFullDrop refuses new connections when the table is full ("conn-full drop")
	// instead of evicting the least recently active half-open entry ("conn-full evict").
	ConnFullDrop bool
	// SteerPrefix4 and SteerPrefix6 ("steer-prefix BITS4 BITS6"): with several workers,
	// the prefix of a client address that decides the worker owning its flows; set them to
	// the shortest persistence mask in use so that persistence holds across workers.
	SteerPrefix4, SteerPrefix6 int
	// NoException turns the exception path (a TAP per port to the host's kernel) off
	// for every port that does not turn it on itself ("exception off").
	NoException bool
}

// Port is one data-plane port: a DPDK device and the addresses ilbd owns on it.
type Port struct {
	// Device is a vdev ("net_af_packet0,iface=lb0") or a PCI address ("0000:03:00.0").
	Device string
	Addrs  []netip.Prefix
	// Tap names the kernel interface of the port's exception path ("tap=NAME" on the
	// port line); empty means the default, DefaultTapPrefix + the port's index.
	Tap string
	// Exception is the port's own "exception=on|off" option; ExceptionDefault means
	// the global "exception" setting decides.
	Exception TapMode
}

// TapMode is a port's exception=on|off option, which may be left to the global setting.
type TapMode uint8

// Exception path options of a port.
const (
	ExceptionDefault TapMode = iota
	ExceptionOn
	ExceptionOff
)

// DefaultTapPrefix names the kernel interfaces of the exception path: ilb0 for the
// first port, ilb1 for the second, and so on.
const DefaultTapPrefix = "ilb"

// IsVdev reports whether the device is a virtual device (given to EAL with --vdev) rather
// than a PCI device (given with -a).
func (p Port) IsVdev() bool { return strings.HasPrefix(p.Device, "net_") }

// Name is the name DPDK registers the port under: the vdev name without its arguments, or
// the PCI address.
func (p Port) Name() string {
	name, _, _ := strings.Cut(p.Device, ",")
	return name
}

// TapName returns the kernel interface of port i's exception path and whether the port
// has one at all.
func (s *Config) TapName(i int) (string, bool) {
	p := s.Ports[i]
	if p.Exception == ExceptionOff || (p.Exception == ExceptionDefault && s.NoException) {
		return "", false
	}
	if p.Tap != "" {
		return p.Tap, true
	}
	return fmt.Sprintf("%s%d", DefaultTapPrefix, i), true
}

// CheckTaps fails if two ports would use the same exception interface, or one a kernel
// interface that a port's device works on (its iface= argument).
func (s *Config) CheckTaps() error {
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
