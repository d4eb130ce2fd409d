package dpdk

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// Mbuf is a DPDK packet buffer (struct rte_mbuf) in C memory. It is opaque:
// fields are reached through offsets computed by the C compiler, never
// through cgo's rendering of the struct. Only single-segment packets are
// supported by the accessors; check Segs and drop the others.
type Mbuf struct{ _ [0]byte }

// Offsets of struct rte_mbuf fields (offsetof in shim.h).
const (
	offBufAddr    = uintptr(C.LB_OFF_BUF_ADDR)
	offDataOff    = uintptr(C.LB_OFF_DATA_OFF)
	offNbSegs     = uintptr(C.LB_OFF_NB_SEGS)
	offPort       = uintptr(C.LB_OFF_PORT)
	offOlFlags    = uintptr(C.LB_OFF_OL_FLAGS)
	offPacketType = uintptr(C.LB_OFF_PACKET_TYPE)
	offPktLen     = uintptr(C.LB_OFF_PKT_LEN)
	offDataLen    = uintptr(C.LB_OFF_DATA_LEN)
	offVlanTCI    = uintptr(C.LB_OFF_VLAN_TCI)
	offRSS        = uintptr(C.LB_OFF_RSS)
	offBufLen     = uintptr(C.LB_OFF_BUF_LEN)
)

func (m *Mbuf) at(off uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(m), off) }
func (m *Mbuf) u16(off uintptr) *uint16       { return (*uint16)(m.at(off)) }
func (m *Mbuf) u32(off uintptr) *uint32       { return (*uint32)(m.at(off)) }
func (m *Mbuf) buf() unsafe.Pointer           { return *(*unsafe.Pointer)(m.at(offBufAddr)) }

// Data returns the packet bytes (data_off .. data_off+data_len). The slice
// aliases the buffer: valid until the mbuf is sent or freed.
func (m *Mbuf) Data() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(m.buf(), *m.u16(offDataOff))), *m.u16(offDataLen))
}

// Room returns the packet bytes with the tailroom as spare capacity
// (len = data_len, cap = data_len + tailroom), so a frame can grow in place
// with SetLen. Same validity as Data.
func (m *Mbuf) Room() []byte {
	frame, _ := m.Frame()
	return frame
}

// Frame returns Room and Segs together, reading each mbuf field once: what a worker needs of a
// received mbuf. The frame is meaningful only when segs is 1.
func (m *Mbuf) Frame() (frame []byte, segs int) {
	off, dl, bl := int(*m.u16(offDataOff)), int(*m.u16(offDataLen)), int(*m.u16(offBufLen))
	return (*mbufBuffer)(m.buf())[off : off+dl : bl], int(*m.u16(offNbSegs))
}

// mbufBuffer types an mbuf's buffer for slicing: buf_len is a uint16, so every buffer fits, and
// slicing it checks data_off+data_len <= buf_len once, where unsafe.Slice would check more.
type mbufBuffer [1 << 16]byte

// Len returns the data length of the (first) segment.
func (m *Mbuf) Len() int { return int(*m.u16(offDataLen)) }

// SetLen sets data_len and pkt_len to n; n must not exceed cap(Room()).
func (m *Mbuf) SetLen(n int) {
	if uint(n) > uint(*m.u16(offBufLen)-*m.u16(offDataOff)) {
		panic("dpdk: Mbuf.SetLen beyond the buffer")
	}
	*m.u16(offDataLen) = uint16(n)
	*m.u32(offPktLen) = uint32(n)
}

// Headroom returns the free space before the data.
func (m *Mbuf) Headroom() int { return int(*m.u16(offDataOff)) }

// Tailroom returns the free space after the data.
func (m *Mbuf) Tailroom() int {
	return int(*m.u16(offBufLen)) - int(*m.u16(offDataOff)) - int(*m.u16(offDataLen))
}

// Prepend grows the packet by n bytes at the front (for encapsulation) and
// returns the new Data, or nil if the headroom is too small.
func (m *Mbuf) Prepend(n int) []byte {
	off := m.u16(offDataOff)
	if uint(n) > uint(*off) {
		return nil
	}
	*off -= uint16(n)
	*m.u16(offDataLen) += uint16(n)
	*m.u32(offPktLen) += uint32(n)
	return m.Data()
}

// Adj removes n bytes from the front (for decapsulation) and returns the
// new Data, or nil if the packet is shorter than n.
func (m *Mbuf) Adj(n int) []byte {
	dl := m.u16(offDataLen)
	if uint(n) > uint(*dl) {
		return nil
	}
	*m.u16(offDataOff) += uint16(n)
	*dl -= uint16(n)
	*m.u32(offPktLen) -= uint32(n)
	return m.Data()
}

// Segs returns the number of segments (nb_segs); the accessors only cover
// the first, so callers drop packets with Segs() > 1.
func (m *Mbuf) Segs() int { return int(*m.u16(offNbSegs)) }

// PktLen returns the total packet length over all segments.
func (m *Mbuf) PktLen() int { return int(*m.u32(offPktLen)) }

// InPort returns the port the packet was received on.
func (m *Mbuf) InPort() Port { return Port(*m.u16(offPort)) }

// SetInPort records p as the port the mbuf came in on: for a copy made of a received frame.
func (m *Mbuf) SetInPort(p Port) { *m.u16(offPort) = uint16(p) }

// RSSHash returns the RSS hash the NIC computed (valid when OlFlags has
// RTE_MBUF_F_RX_RSS_HASH).
func (m *Mbuf) RSSHash() uint32 { return *m.u32(offRSS) }

// PacketType returns the RTE_PTYPE_* classification set by the driver.
func (m *Mbuf) PacketType() uint32 { return *m.u32(offPacketType) }

// VlanTCI returns the stripped VLAN tag (valid with RTE_MBUF_F_RX_VLAN).
func (m *Mbuf) VlanTCI() uint16 { return *m.u16(offVlanTCI) }

// OlFlags returns the offload flags (RTE_MBUF_F_*).
func (m *Mbuf) OlFlags() uint64 { return *(*uint64)(m.at(offOlFlags)) }

// Free returns the mbuf to its pool. It costs a cgo call: on the data path
// use IO.Drop or FreeMbufs instead.
func (m *Mbuf) Free() { C.lb_free_one((*C.struct_rte_mbuf)(unsafe.Pointer(m))) }
