package tests

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/tests/lab"
)

// TestE2EICMP checks ICMP to a VIP (spec §6.8), over IPv4 and IPv6 in one dual-stack lab:
//
//   - echo requests to the VIP are answered by ilbd itself (ping from the client), counted
//     in the rule's ICMP_P, and still answered while the rule is disabled (§7 item 15);
//   - a fragmentation-needed (IPv4) or packet-too-big (IPv6) message sent to the VIP about
//     an answer of an established half-NAT connection is translated and forwarded to the
//     server of that connection, whose kernel then lowers its path MTU towards the client
//     (ICMP2BIG_P); one quoting an unknown flow is dropped (ICMP2BIG_D);
//   - any other ICMP to the VIP (a timestamp request) is dropped (ICMP_D).
func TestE2EICMP(t *testing.T) {
	l := newLab(t, lab.Options{IPv6: true})
	startIlbd(t, l)
	createGroup(t, l, ipv4, "web4")
	createGroup(t, l, ipv6, "web6")
	ilbadmAll(t, l,
		[]string{"create-rule", "-e", "-i", incoming(ipv4.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=web4", "web4"},
		[]string{"create-rule", "-e", "-i", incoming(ipv6.vip, lab.ServicePort, "tcp"), "-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=web6", "web6"},
	)
	for _, f := range []family{ipv4, ipv6} {
		t.Run(f.name, func(t *testing.T) { icmpChecks(t, l, f) })
	}
}

func ruleStat(t *testing.T, l *lab.Lab, rule, field string) string {
	t.Helper()
	return strings.TrimSpace(ilbadmOK(t, l, "show-statistics", "-A", "-r", rule, "-p", "-o", field))
}

func icmpChecks(t *testing.T, l *lab.Lab, f family) {
	rule := "web4"
	if f.v6 {
		rule = "web6"
	}
	ping := func(what string) {
		t.Helper()
		args := []string{"netns", "exec", l.ClientNS, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "5", f.vip}
		if f.v6 {
			args = []string{"netns", "exec", l.ClientNS, "ping", "-6", "-n", "-c", "3", "-i", "0.2", "-W", "5", f.vip}
		}
		out, err := cmd(t, "ip", args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 3 received") {
			t.Errorf("%s: ping %s from the client: %v\n%s", what, f.vip, err, out)
		}
	}

	// Echo.
	ping("echo to the VIP")
	waitStat(t, l, rule, "ICMP_P", "3")
	ilbadmAll(t, l, []string{"disable-rule", rule})
	ping("echo to the VIP of a disabled rule")
	ilbadmAll(t, l, []string{"enable-rule", rule})
	waitStat(t, l, rule, "ICMP_P", "6")

	// Packet too big about an answer of an established connection: to its server.
	c := l.Client()
	vip := lab.Addr(f.vip, lab.ServicePort)
	capt, err := l.StartCapture(l.ClientNS, "cl0")
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	conn, err := c.Dial(vip, tcpTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", vip, err)
	}
	defer conn.Close()
	r, err := conn.Exchange(tcpTimeout)
	if err != nil {
		t.Fatalf("exchange with %s: %v", vip, err)
	}
	srv := l.ServerByName(r.Server)
	_, cportS, _ := net.SplitHostPort(conn.LocalAddr())
	var cport uint16
	fmt.Sscan(cportS, &cport)
	time.Sleep(50 * time.Millisecond)
	// The server's next sequence number, from its segments as the client received them
	// (half-NAT leaves sequence numbers alone); Linux ignores an ICMP error quoting a
	// sequence number outside the window it has in flight.
	_, segs, err := capt.Drain(lab.FromTo(f.vip, f.client))
	if err != nil {
		t.Fatal(err)
	}
	var quoted []byte // IP header + TCP header of the server's last segment to the client
	var next uint32
	for _, fr := range segs {
		ip, tcp, ok := l4Of(fr)
		if !ok || binary.BigEndian.Uint16(tcp[2:4]) != cport {
			continue
		}
		hl := int(tcp[12]>>4) * 4
		seq := binary.BigEndian.Uint32(tcp[4:8])
		n := seq + uint32(len(tcp)-hl)
		if tcp[13]&0x03 != 0 { // SYN or FIN
			n++
		}
		if quoted == nil || int32(n-next) > 0 {
			next = n
			quoted = append(append([]byte(nil), ip...), tcp[:20]...)
		}
	}
	if quoted == nil {
		t.Fatalf("no segment of the connection %s seen on cl0", conn.LocalAddr())
	}
	binary.BigEndian.PutUint32(quoted[len(quoted)-20+4:], next)
	mtu := 1300
	if f.v6 {
		mtu = 1280
	}
	// The quoted packet claims the full size the server sent (1500) though only its
	// headers are quoted, as a router's message does.
	if f.v6 {
		binary.BigEndian.PutUint16(quoted[4:6], 1460)
	} else {
		binary.BigEndian.PutUint16(quoted[2:4], 1500)
		quoted[10], quoted[11] = 0, 0
		binary.BigEndian.PutUint16(quoted[10:12], ^uint16(csum(0, quoted[:20])))
	}
	route := func() string {
		args := []string{"route", "get", f.client}
		if f.v6 {
			args = []string{"-6", "route", "get", f.client}
		}
		return ipIn(t, srv.NS, args...)
	}
	if rt := route(); strings.Contains(rt, fmt.Sprintf("mtu %d", mtu)) {
		t.Fatalf("%s's route to the client already has path MTU %d before the test:\n%s", srv.Name, mtu, rt)
	}
	if err := sendTooBig(c, f, quoted, mtu); err != nil {
		t.Fatal(err)
	}
	var rt string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if rt = route(); strings.Contains(rt, fmt.Sprintf("mtu %d", mtu)) {
			break
		}
	}
	if !strings.Contains(rt, fmt.Sprintf("mtu %d", mtu)) {
		t.Errorf("after a packet-too-big (MTU %d) to the VIP about %s's answer to %s, %s's route to the client has no such path MTU:\n%s",
			mtu, srv.Name, conn.LocalAddr(), srv.Name, rt)
	}
	t.Logf("%s's route to the client after the packet-too-big: %s", srv.Name, strings.TrimSpace(rt))
	waitStat(t, l, rule, "ICMP2BIG_P", "1")
	// The same about a flow ilbd does not know (another client port): dropped.
	binary.BigEndian.PutUint16(quoted[len(quoted)-20+2:], cport+1)
	if err := sendTooBig(c, f, quoted, mtu); err != nil {
		t.Fatal(err)
	}
	waitStat(t, l, rule, "ICMP2BIG_D", "1")

	// Other ICMP to the VIP: dropped.
	if err := sendICMP(c, f, icmpOther(f)); err != nil {
		t.Fatal(err)
	}
	waitStat(t, l, rule, "ICMP_D", "1")
	// The connection still works.
	if _, err := conn.Exchange(tcpTimeout); err != nil {
		t.Errorf("exchange after the ICMP messages: %v", err)
	}
}

func waitStat(t *testing.T, l *lab.Lab, rule, field, want string) {
	t.Helper()
	var got string
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got = ruleStat(t, l, rule, field); got == want {
			return
		}
	}
	t.Errorf("%s of %s: %s, want %s", field, rule, got, want)
}

// l4Of returns the IP header and the TCP segment of an Ethernet frame carrying TCP.
func l4Of(fr []byte) (ip, tcp []byte, ok bool) {
	if len(fr) < 14 {
		return nil, nil, false
	}
	p := fr[14:]
	switch binary.BigEndian.Uint16(fr[12:14]) {
	case 0x0800:
		if len(p) < 20 || p[9] != 6 {
			return nil, nil, false
		}
		hl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if total > len(p) || hl+20 > total {
			return nil, nil, false
		}
		return p[:hl], p[hl:total], true
	case 0x86dd:
		if len(p) < 60 || p[6] != 6 {
			return nil, nil, false
		}
		total := 40 + int(binary.BigEndian.Uint16(p[4:6]))
		if total > len(p) {
			return nil, nil, false
		}
		return p[:40], p[40:total], true
	}
	return nil, nil, false
}

// sendTooBig sends, from the client, an IPv4 fragmentation-needed or IPv6 packet-too-big
// message to the VIP quoting the given packet headers.
func sendTooBig(c *lab.Client, f family, quoted []byte, mtu int) error {
	m := make([]byte, 8, 8+len(quoted))
	if f.v6 {
		m[0] = 2 // packet too big
		binary.BigEndian.PutUint32(m[4:8], uint32(mtu))
	} else {
		m[0], m[1] = 3, 4 // destination unreachable, fragmentation needed
		binary.BigEndian.PutUint16(m[6:8], uint16(mtu))
	}
	return sendICMP(c, f, append(m, quoted...))
}

// icmpOther is an ICMP message ILB does not handle: a timestamp request (IPv4) or a node
// information query (IPv6, type 139).
func icmpOther(f family) []byte {
	if f.v6 {
		return []byte{139, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	}
	return []byte{13, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
}

// sendICMP sends an ICMP(v6) message (checksum filled in here for IPv4, by the kernel for
// IPv6) from the client to the family's VIP through a raw socket.
func sendICMP(c *lab.Client, f family, msg []byte) error {
	return c.Run(func() error {
		if f.v6 {
			fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var to unix.SockaddrInet6
			copy(to.Addr[:], net.ParseIP(f.vip).To16())
			return unix.Sendto(fd, msg, 0, &to)
		}
		msg[2], msg[3] = 0, 0
		binary.BigEndian.PutUint16(msg[2:4], ^uint16(csum(0, msg)))
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var to unix.SockaddrInet4
		copy(to.Addr[:], net.ParseIP(f.vip).To4())
		return unix.Sendto(fd, msg, 0, &to)
	})
}
