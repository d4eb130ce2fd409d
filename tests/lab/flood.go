package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FloodKind is the kind of TCP segment a flood sends.
type FloodKind int

const (
	// FloodSYN sends SYNs, each opening a new flow (a new spoofed source address and port).
	FloodSYN FloodKind = iota
	// FloodACK sends bare ACKs (ACK flag only, random sequence and acknowledgment numbers)
	// of flows that were never opened.
	FloodACK
)

func (k FloodKind) String() string {
	switch k {
	case FloodSYN:
		return "SYN"
	case FloodACK:
		return "bare-ACK"
	}
	return fmt.Sprintf("FloodKind(%d)", int(k))
}

// Spoofed flood sources: FloodSources addresses from FloodFirstSource on, all on the client's
// subnet and never the client itself (198.51.100.2), each with FloodPorts source ports from
// FloodFirstPort on, so FloodSources*FloodPorts distinct flows before one repeats.
const (
	FloodFirstSource = "198.51.100.100"
	FloodSources     = 150 // 198.51.100.100 .. 198.51.100.249
	FloodFirstPort   = 1024
	FloodPorts       = 65536 - FloodFirstPort
)

// Hard limits of any flood, whatever its configuration asks for.
const (
	FloodMaxPackets  = 20_000_000
	FloodMaxDuration = 60 * time.Second
)

// FloodConfig describes a flood. It stops at the first of Packets packets sent, Duration
// elapsed or its context done; both bounds are required.
type FloodConfig struct {
	Kind     FloodKind
	Dst      string        // destination IPv4 address (a documentation address); "" = VIP
	DstPort  int           // destination port; 0 = ServicePort
	Packets  int           // at most this many packets (1..FloodMaxPackets)
	Duration time.Duration // at most this long (up to FloodMaxDuration)
	Rate     int           // target packets per second; 0 = as fast as the socket takes them
	Batch    int           // frames per sendmmsg call; 0 = 64
}

// FloodResult is what a flood did.
type FloodResult struct {
	Kind    FloodKind
	Sent    uint64        // frames the kernel accepted
	Flows   uint64        // distinct (source address, source port) flows among them
	Elapsed time.Duration // from the first send to the last
	Errors  uint64        // frames a sendmmsg call refused (ENOBUFS and the like)
	Stopped string        // what ended it: "count", "duration", "context" or an error
}

// Rate is the achieved rate in packets per second.
func (r FloodResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

func (r FloodResult) String() string {
	return fmt.Sprintf("%s flood: %d packets (%d distinct flows) in %v, %.0f packets/s, %d refused, stopped by %s",
		r.Kind, r.Sent, r.Flows, r.Elapsed.Round(time.Millisecond), r.Rate(), r.Errors, r.Stopped)
}

// Flooder sends spoofed TCP segments from the client namespace: whole Ethernet frames
// written to cl0 with an AF_PACKET socket (created inside the namespace, bypassing the
// qdisc), addressed to ilbd's MAC on its client-side port (read from lbc in the lb
// namespace), from FloodSources spoofed addresses on the client's subnet.
type Flooder struct {
	fd      int
	ifindex int
	srcMAC  [6]byte
	dstMAC  [6]byte
}

// NewFlooder opens the flooder's socket in the client namespace.
func (l *Lab) NewFlooder() (*Flooder, error) {
	if l.ClientNS == "" {
		return nil, errors.New("lab has no client namespace")
	}
	dst, err := l.linkMAC(l.LBNS, "lbc")
	if err != nil {
		return nil, err
	}
	f := &Flooder{fd: -1, dstMAC: dst}
	err = inNS(l.handles[l.ClientNS], func() error {
		ifi, err := net.InterfaceByName("cl0")
		if err != nil {
			return err
		}
		if len(ifi.HardwareAddr) != 6 {
			return fmt.Errorf("cl0 has no Ethernet address (%v)", ifi.HardwareAddr)
		}
		copy(f.srcMAC[:], ifi.HardwareAddr)
		f.ifindex = ifi.Index
		// Protocol 0: a send-only socket, which receives nothing.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f.fd = fd
		_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index})
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flooder in %s: %w", l.ClientNS, err)
	}
	return f, nil
}

// Close closes the socket.
func (f *Flooder) Close() {
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
}

// linkMAC reads the Ethernet address of dev in the lab namespace nsName.
func (l *Lab) linkMAC(nsName, dev string) ([6]byte, error) {
	var mac [6]byte
	h, err := l.netlinkIn(nsName)
	if err != nil {
		return mac, err
	}
	defer h.Close()
	ln, err := h.LinkByName(dev)
	if err != nil {
		return mac, fmt.Errorf("%s/%s: %w", nsName, dev, err)
	}
	if hw := ln.Attrs().HardwareAddr; len(hw) == 6 {
		copy(mac[:], hw)
		return mac, nil
	}
	return mac, fmt.Errorf("%s/%s has no Ethernet address", nsName, dev)
}

// documentation reports whether a is in one of the IPv4 documentation ranges.
func documentation(a netip.Addr) bool {
	for _, p := range []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}
	return false
}

const floodFrameLen = 14 + 20 + 20 // Ethernet, IPv4, TCP without options

// Flood sends cfg's flood until one of its bounds is reached and reports what it sent.
// It runs in the calling goroutine.
func (f *Flooder) Flood(ctx context.Context, cfg FloodConfig) (FloodResult, error) {
	res := FloodResult{Kind: cfg.Kind}
	if f.fd < 0 {
		return res, errors.New("flooder is closed")
	}
	if cfg.Kind != FloodSYN && cfg.Kind != FloodACK {
		return res, fmt.Errorf("unknown flood kind %v", cfg.Kind)
	}
	if cfg.Packets <= 0 || cfg.Duration <= 0 {
		return res, errors.New("a flood needs both a packet count and a duration")
	}
	packets := uint64(min(cfg.Packets, FloodMaxPackets))
	duration := min(cfg.Duration, FloodMaxDuration)
	dstS := cfg.Dst
	if dstS == "" {
		dstS = VIP
	}
	dst, err := netip.ParseAddr(dstS)
	if err != nil || !dst.Is4() || !documentation(dst) {
		return res, fmt.Errorf("flood destination %q: want an IPv4 documentation address", dstS)
	}
	dport := cfg.DstPort
	if dport == 0 {
		dport = ServicePort
	}
	if dport < 1 || dport > 65535 {
		return res, fmt.Errorf("flood destination port %d", dport)
	}
	batch := cfg.Batch
	if batch <= 0 {
		batch = 64
	}
	batch = min(batch, 1024)
	first := netip.MustParseAddr(FloodFirstSource).As4()

	// Frames, their iovecs and message headers, reused for every batch.
	frames := make([][floodFrameLen]byte, batch)
	iov := make([]unix.Iovec, batch)
	msgs := make([]unix.Mmsghdr, batch)
	sa := unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Protocol: htons(unix.ETH_P_IP), Ifindex: int32(f.ifindex), Halen: 6}
	copy(sa.Addr[:], f.dstMAC[:])
	for i := range frames {
		fr := frames[i][:]
		copy(fr[0:6], f.dstMAC[:])
		copy(fr[6:12], f.srcMAC[:])
		binary.BigEndian.PutUint16(fr[12:14], unix.ETH_P_IP)
		ip := fr[14:34]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], 40)
		binary.BigEndian.PutUint16(ip[6:8], 0x4000) // DF
		ip[8] = 64
		ip[9] = unix.IPPROTO_TCP
		d := dst.As4()
		copy(ip[16:20], d[:])
		tcp := fr[34:54]
		binary.BigEndian.PutUint16(tcp[2:4], uint16(dport))
		tcp[12] = 5 << 4
		iov[i].Base = &frames[i][0]
		iov[i].SetLen(floodFrameLen)
		msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&sa))
		msgs[i].Hdr.Namelen = uint32(unsafe.Sizeof(sa))
		msgs[i].Hdr.Iov = &iov[i]
		msgs[i].Hdr.SetIovlen(1)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x9e3779b97f4a7c15))
	const flowSpace = uint64(FloodSources) * FloodPorts
	flow := rng.Uint64N(flowSpace) // where this flood's flow sequence starts
	fill := func(fr []byte) {
		ip, tcp := fr[14:34], fr[34:54]
		src := first
		src[3] += byte(flow % FloodSources)
		sport := uint16(FloodFirstPort + (flow/FloodSources)%FloodPorts)
		flow = (flow + 1) % flowSpace
		r := rng.Uint64()
		copy(ip[12:16], src[:])
		binary.BigEndian.PutUint16(ip[4:6], uint16(r>>48)) // identification
		binary.BigEndian.PutUint16(ip[10:12], 0)
		binary.BigEndian.PutUint16(ip[10:12], ^onesSum(0, ip))
		binary.BigEndian.PutUint16(tcp[0:2], sport)
		binary.BigEndian.PutUint32(tcp[4:8], uint32(r))
		if cfg.Kind == FloodSYN {
			binary.BigEndian.PutUint32(tcp[8:12], 0)
			tcp[13] = 0x02 // SYN
		} else {
			binary.BigEndian.PutUint32(tcp[8:12], uint32(r>>32))
			tcp[13] = 0x10 // ACK
		}
		binary.BigEndian.PutUint16(tcp[14:16], 64240) // window
		binary.BigEndian.PutUint16(tcp[16:18], 0)
		binary.BigEndian.PutUint16(tcp[18:20], 0) // urgent pointer
		// Pseudo-header: source, destination, zero, protocol, TCP length.
		var ph [12]byte
		copy(ph[0:8], ip[12:20])
		ph[9] = unix.IPPROTO_TCP
		binary.BigEndian.PutUint16(ph[10:12], 20)
		binary.BigEndian.PutUint16(tcp[16:18], ^onesSum(uint32(onesSum(0, ph[:])), tcp))
	}

	start := time.Now()
	end := start.Add(duration)
	res.Stopped = "count"
	for res.Sent < packets {
		if err := ctx.Err(); err != nil {
			res.Stopped = "context"
			break
		}
		now := time.Now()
		if !now.Before(end) {
			res.Stopped = "duration"
			break
		}
		if cfg.Rate > 0 { // pace: never ahead of Rate packets per second since start
			due := start.Add(time.Duration(float64(res.Sent) / float64(cfg.Rate) * float64(time.Second)))
			if wait := due.Sub(now); wait > 0 {
				time.Sleep(min(wait, end.Sub(now)))
				continue
			}
		}
		n := int(min(uint64(batch), packets-res.Sent))
		for i := 0; i < n; i++ {
			fill(frames[i][:])
		}
		off := 0
		for off < n {
			r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(f.fd), uintptr(unsafe.Pointer(&msgs[off])), uintptr(n-off), 0, 0, 0)
			if errno == unix.EINTR {
				continue
			}
			if errno == unix.ENOBUFS || errno == unix.EAGAIN {
				res.Errors++ // the first frame of the rest was refused: skip it
				off++
				continue
			}
			if errno != 0 {
				res.Elapsed = time.Since(start)
				res.Stopped = errno.Error()
				runtime.KeepAlive(frames)
				runtime.KeepAlive(iov)
				runtime.KeepAlive(&sa)
				return res, fmt.Errorf("sendmmsg: %w", errno)
			}
			off += int(r)
			res.Sent += uint64(r)
		}
	}
	res.Elapsed = time.Since(start)
	res.Flows = min(res.Sent, flowSpace)
	runtime.KeepAlive(frames)
	runtime.KeepAlive(iov)
	runtime.KeepAlive(&sa)
	return res, nil
}

// onesSum adds b to the one's complement sum s (RFC 1071), folded to 16 bits.
func onesSum(s uint32, b []byte) uint16 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
