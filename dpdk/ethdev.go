package dpdk

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Port is an ethdev port id.
type Port uint16

// MaxPorts is RTE_MAX_ETHPORTS, the bound of port ids.
const MaxPorts = 32

var (
	_ [MaxPorts - C.RTE_MAX_ETHPORTS]struct{}
	_ [C.RTE_MAX_ETHPORTS - MaxPorts]struct{}
)

// PortByName returns the port of a device name, such as "net_null0",
// "net_af_packet0" or a PCI address.
func PortByName(name string) (Port, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if rc := C.lb_port_by_name(cname, &id); rc < 0 {
		return 0, wrap(Errno(-rc), "port %q", name)
	}
	return Port(id), nil
}

// CountPorts returns the number of usable ports.
func CountPorts() int { return int(C.lb_port_count()) }

// Ports returns the usable ports in id order.
func Ports() []Port {
	var buf [MaxPorts]C.uint16_t
	n := min(int(C.lb_port_list(&buf[0], C.int(len(buf)))), len(buf))
	ps := make([]Port, n)
	for i := range ps {
		ps[i] = Port(buf[i])
	}
	return ps
}

// PortConf is the configuration applied by Port.Setup.
type PortConf struct {
	RxQueues, TxQueues uint16 // queue counts; af_packet needs them to equal its qpairs devarg
	RxDesc, TxDesc     uint16 // ring sizes; 0 means 1024; clamped to what the device allows
	MTU                uint16 // 0 keeps the device default
	Promisc            bool   // enable promiscuous mode (ignored where unsupported)
	RSSHf              uint64 // RTE_ETH_RSS_* for RxQueues > 1; 0 means IP|TCP|UDP; masked by device support
	RSSKey             []byte // optional RSS key (at most 64 bytes)
}

// stageNames names the steps of lb_port_setup for error messages.
var stageNames = map[C.int]string{
	C.LB_STAGE_INFO:      "dev info",
	C.LB_STAGE_CONFIGURE: "configure",
	C.LB_STAGE_DESC:      "adjust descriptors",
	C.LB_STAGE_RXQ:       "rx queue setup",
	C.LB_STAGE_TXQ:       "tx queue setup",
	C.LB_STAGE_PROMISC:   "promiscuous enable",
	C.LB_STAGE_START:     "start",
}

// Setup configures the port, sets up its queues (rx queues take mbufs from
// pool) and starts it, in one C call.
func (p Port) Setup(conf PortConf, pool *Mempool) error {
	if conf.RxQueues == 0 || conf.TxQueues == 0 {
		return fmt.Errorf("dpdk: port %d setup: need at least one rx and one tx queue", p)
	}
	if pool == nil || pool.c == nil {
		return fmt.Errorf("dpdk: port %d setup: no mempool", p)
	}
	var c C.struct_lb_port_conf
	c.nrxq, c.ntxq = C.uint16_t(conf.RxQueues), C.uint16_t(conf.TxQueues)
	c.nrxd, c.ntxd = C.uint16_t(orDefault(conf.RxDesc, 1024)), C.uint16_t(orDefault(conf.TxDesc, 1024))
	c.mtu = C.uint16_t(conf.MTU)
	if conf.Promisc {
		c.promisc = 1
	}
	c.rss_hf = C.uint64_t(conf.RSSHf)
	if len(conf.RSSKey) > len(c.rss_key) {
		return fmt.Errorf("dpdk: port %d setup: RSS key longer than %d bytes", p, len(c.rss_key))
	}
	for i, b := range conf.RSSKey {
		c.rss_key[i] = C.uint8_t(b)
	}
	c.rss_key_len = C.uint8_t(len(conf.RSSKey))
	var stage C.int
	if rc := C.lb_port_setup(C.uint16_t(p), &c, pool.c, &stage); rc < 0 {
		return wrap(Errno(-rc), "port %d setup: %s", p, stageNames[stage])
	}
	return nil
}

func orDefault(v, def uint16) uint16 {
	if v == 0 {
		return def
	}
	return v
}

// Stop stops the port (rte_eth_dev_stop).
func (p Port) Stop() error { return wrap(errno(C.lb_port_stop(C.uint16_t(p))), "port %d stop", p) }

// Close releases the port (rte_eth_dev_close); a vdev port id becomes free.
func (p Port) Close() error { return wrap(errno(C.lb_port_close(C.uint16_t(p))), "port %d close", p) }

// SetPromisc turns promiscuous mode on or off.
func (p Port) SetPromisc(on bool) error {
	v := C.int(0)
	if on {
		v = 1
	}
	return wrap(errno(C.lb_port_promisc(C.uint16_t(p), v)), "port %d promiscuous", p)
}

// Name returns the device name, or "" for an unknown port.
func (p Port) Name() string {
	var buf [C.RTE_ETH_NAME_MAX_LEN]C.char
	if C.lb_port_name(C.uint16_t(p), &buf[0], C.size_t(len(buf))) < 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// MAC returns the port's Ethernet address.
func (p Port) MAC() ([6]byte, error) {
	var mac [6]byte
	rc := C.lb_port_mac(C.uint16_t(p), (*C.uint8_t)(unsafe.Pointer(&mac[0])))
	return mac, wrap(errno(rc), "port %d mac", p)
}

// SetMAC sets the port's default Ethernet address
// (rte_eth_dev_default_mac_addr_set). For a net_tap port this is also the
// address of its kernel interface. mac must be a unicast, non-zero address.
func (p Port) SetMAC(mac [6]byte) error {
	if mac == ([6]byte{}) || mac[0]&1 != 0 {
		return fmt.Errorf("dpdk: port %d set mac: %x is not a unicast address", p, mac)
	}
	rc := C.lb_port_set_mac(C.uint16_t(p), (*C.uint8_t)(unsafe.Pointer(&mac[0])))
	return wrap(errno(rc), "port %d set mac", p)
}

// Link is the link state of a port.
type Link struct {
	Up         bool
	SpeedMbps  uint32
	FullDuplex bool
}

// Link returns the link state without waiting (rte_eth_link_get_nowait).
func (p Port) Link() (Link, error) {
	var l C.struct_lb_link
	if rc := C.lb_port_link(C.uint16_t(p), &l); rc < 0 {
		return Link{}, wrap(Errno(-rc), "port %d link", p)
	}
	return Link{Up: l.up != 0, SpeedMbps: uint32(l.speed), FullDuplex: l.full_duplex != 0}, nil
}

// Stats are the basic counters of a port (struct rte_eth_stats).
type Stats struct {
	IPackets, OPackets, IBytes, OBytes, IMissed, IErrors, OErrors, RxNoMbuf uint64
}

// Stats returns the port's basic counters.
func (p Port) Stats() (Stats, error) {
	var s C.struct_lb_stats
	if rc := C.lb_port_stats(C.uint16_t(p), &s); rc < 0 {
		return Stats{}, wrap(Errno(-rc), "port %d stats", p)
	}
	return Stats{
		IPackets: uint64(s.ipackets), OPackets: uint64(s.opackets),
		IBytes: uint64(s.ibytes), OBytes: uint64(s.obytes),
		IMissed: uint64(s.imissed), IErrors: uint64(s.ierrors), OErrors: uint64(s.oerrors),
		RxNoMbuf: uint64(s.rx_nombuf),
	}, nil
}

// PortInfo describes a port's driver and limits (from rte_eth_dev_info).
type PortInfo struct {
	Driver             string
	IfIndex            uint32 // kernel interface index, 0 if none
	Socket             int    // NUMA socket, -1 if unknown
	MaxRxQueues        uint16
	MaxTxQueues        uint16
	RetaSize           uint16
	HashKeySize        uint8
	FlowTypeRSSOffload uint64 // supported RTE_ETH_RSS_* bits
	MinMTU, MaxMTU     uint16
	MTU                uint16
}

// Info returns the port's driver and limits.
func (p Port) Info() (PortInfo, error) {
	var i C.struct_lb_port_info
	if rc := C.lb_port_info(C.uint16_t(p), &i); rc < 0 {
		return PortInfo{}, wrap(Errno(-rc), "port %d info", p)
	}
	return PortInfo{
		Driver: C.GoString(&i.driver[0]), IfIndex: uint32(i.if_index), Socket: int(i.socket),
		MaxRxQueues: uint16(i.max_rxq), MaxTxQueues: uint16(i.max_txq),
		RetaSize: uint16(i.reta_size), HashKeySize: uint8(i.hash_key_size),
		FlowTypeRSSOffload: uint64(i.rss_offloads),
		MinMTU:             uint16(i.min_mtu), MaxMTU: uint16(i.max_mtu), MTU: uint16(i.mtu),
	}, nil
}

// XStats returns the driver's extended statistics by name. It allocates;
// it is for the control plane.
func (p Port) XStats() (map[string]uint64, error) {
	n := C.rte_eth_xstats_get_names(C.uint16_t(p), nil, 0)
	if n < 0 {
		return nil, wrap(Errno(-n), "port %d xstats", p)
	}
	if n == 0 {
		return map[string]uint64{}, nil
	}
	names := make([]C.struct_rte_eth_xstat_name, n)
	vals := make([]C.struct_rte_eth_xstat, n)
	if m := C.rte_eth_xstats_get_names(C.uint16_t(p), &names[0], C.uint(n)); m != n {
		return nil, errors.Join(fmt.Errorf("dpdk: port %d xstats: names changed (%d != %d)", p, m, n), errno(m))
	}
	if m := C.rte_eth_xstats_get(C.uint16_t(p), &vals[0], C.uint(n)); m != n {
		return nil, errors.Join(fmt.Errorf("dpdk: port %d xstats: values changed (%d != %d)", p, m, n), errno(m))
	}
	out := make(map[string]uint64, n)
	for _, v := range vals {
		if int(v.id) < len(names) {
			out[C.GoString(&names[v.id].name[0])] = uint64(v.value)
		}
	}
	return out, nil
}
