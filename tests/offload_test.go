package tests

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/tests/lab"
)

// linkFeatures reads the ethtool features of dev in the lab namespace ns.
func linkFeatures(t *testing.T, l *lab.Lab, ns, dev string) map[string]bool {
	t.Helper()
	var got map[string]bool
	err := l.InNamespace(ns, func() error {
		e, err := ethtool.NewEthtool() // its socket belongs to the namespace
		if err != nil {
			return err
		}
		defer e.Close()
		got, err = e.Features(dev)
		return err
	})
	if err != nil {
		t.Fatalf("features of %s/%s: %v", ns, dev, err)
	}
	return got
}

// checkStockOffloads asserts that dev keeps a veth's default offloads: tx checksum
// offload, TSO and GSO on (the lab changes no offload; only ilbd does, while it runs).
func checkStockOffloads(t *testing.T, l *lab.Lab, ns, dev string) {
	t.Helper()
	f := linkFeatures(t, l, ns, dev)
	for _, name := range []string{"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation"} {
		if !f[name] {
			t.Errorf("%s/%s: %s is off; a veth has it on by default and the lab must not change it", ns, dev, name)
		}
	}
}

// checkFeaturesOff asserts that every feature in f that sel selects is off (and that
// the must-have ones exist).
func checkFeaturesOff(t *testing.T, what string, f map[string]bool, sel func(string) bool, must ...string) {
	t.Helper()
	for name, on := range f {
		if sel(name) && on {
			t.Errorf("%s: %s is on while ilbd runs", what, name)
		}
	}
	for _, name := range must {
		if _, ok := f[name]; !ok {
			t.Errorf("%s: has no feature %s", what, name)
		}
	}
}

func isTSO(f string) bool {
	return strings.HasPrefix(f, "tx-tcp") && strings.HasSuffix(f, "-segmentation")
}

// ilbdOwnOff: what ilbd turns off on its own interfaces (GRO, LRO, TSO, GSO; as
// dataplane/offload.go's ownOffload).
func ilbdOwnOff(f string) bool {
	switch f {
	case "rx-gro", "rx-lro", "rx-gro-hw", "rx-gro-list", "rx-udp-gro-forwarding",
		"tx-generic-segmentation", "tx-udp-segmentation", "tx-gso-list":
		return true
	}
	return isTSO(f)
}

// ilbdPeerOff: what ilbd turns off on the veth peers of its interfaces (tx checksum
// offload, TSO, GSO; as dataplane/offload.go's peerOffload).
func ilbdPeerOff(f string) bool {
	switch f {
	case "tx-generic-segmentation", "tx-udp-segmentation", "tx-gso-list":
		return true
	}
	return strings.HasPrefix(f, "tx-checksum-") || isTSO(f)
}

// TestOffloadLab runs ilbd in labs whose hosts keep the kernel's stock offloads. ilbd turns
// off GRO/TSO/GSO on its own interfaces lbc and lbs and tx checksum offload, TSO and GSO on
// their veth peers, and nothing else; with that, every frame reaches DPDK with complete
// checksums and 300/300 TCP and 300/300 UDP requests through half-NAT are answered; a clean
// stop restores every feature, and ilbd logs one "offloads off" line per port.
//
//	default: lbc's peer is the client's own cl0 (another namespace), lbs's is the bridge
//	         port lbs-br (ilbd's namespace); the servers' srv0 keep theirs.
//	bridged-client (ReturnRouter lab): lbc's peer is the bridge port lbc-br; the client's
//	         cl0, behind the bridge, keeps its stock offloads too.
func TestOffloadLab(t *testing.T) {
	for _, c := range []struct {
		name string
		opts lab.Options
		// lbc's veth peer: its namespace (a lab field) and name
		lbcPeerNS func(*lab.Lab) string
		lbcPeer   string
	}{
		{"default", lab.Options{}, func(l *lab.Lab) string { return l.ClientNS }, "cl0"},
		{"bridged-client", lab.Options{ReturnRouter: true}, func(l *lab.Lab) string { return l.LBNS }, "lbc-br"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, c.opts)
			type dev struct{ ns, name string }
			lbcPeer := dev{c.lbcPeerNS(l), c.lbcPeer}
			lbsPeer := dev{l.LBNS, "lbs-br"}
			cl0, srv0 := dev{l.ClientNS, "cl0"}, dev{l.Servers[0].NS, "srv0"}
			lbc, lbs := dev{l.LBNS, "lbc"}, dev{l.LBNS, "lbs"}
			all := []dev{lbc, lbs, lbcPeer, lbsPeer, srv0}
			if lbcPeer != cl0 {
				all = append(all, cl0)
			}

			// Before ilbd: the kernel's defaults everywhere.
			orig := map[dev]map[string]bool{}
			for _, d := range all {
				orig[d] = linkFeatures(t, l, d.ns, d.name)
				checkStockOffloads(t, l, d.ns, d.name)
			}
			if t.Failed() {
				t.FailNow()
			}

			startIlbd(t, l)
			configureWeb(t, l)

			// While ilbd runs.
			for _, d := range []dev{lbc, lbs} {
				checkFeaturesOff(t, d.ns+"/"+d.name+" (ilbd's)", linkFeatures(t, l, d.ns, d.name), ilbdOwnOff,
					"rx-gro", "tx-tcp-segmentation", "tx-generic-segmentation")
			}
			for _, d := range []dev{lbcPeer, lbsPeer} {
				f := linkFeatures(t, l, d.ns, d.name)
				checkFeaturesOff(t, d.ns+"/"+d.name+" (veth peer)", f, ilbdPeerOff,
					"tx-checksum-ip-generic", "tx-tcp-segmentation", "tx-generic-segmentation")
				for name, on := range orig[d] {
					if !ilbdPeerOff(name) && f[name] != on {
						t.Errorf("%s/%s: ilbd changed %s (to %v), which it has no business with", d.ns, d.name, name, f[name])
					}
				}
			}
			checkStockOffloads(t, l, srv0.ns, srv0.name)
			if lbcPeer != cl0 {
				checkStockOffloads(t, l, cl0.ns, cl0.name)
			}

			// What DPDK reads on lbc: the client's frames with complete checksums.
			capt, err := l.StartCapture(l.LBNS, "lbc")
			if err != nil {
				t.Fatal(err)
			}
			vip := lab.VIPAddr()
			if _, err := l.UDPRequest(vip, udpTimeout); err != nil {
				t.Errorf("first UDP request to %s: %v", vip, err)
			}
			f, err := capt.Next(2*time.Second, func(f []byte) bool {
				_, dst, proto, ok := lab.IPHeader(f)
				return ok && proto == 17 && dst.Equal(net.ParseIP(lab.VIP))
			})
			capt.Close()
			if err != nil {
				t.Errorf("no UDP frame from the client on lbc: %v", err)
			} else if ok, why := l4ChecksumComplete(f); !ok {
				t.Errorf("the client's UDP frame on lbc while ilbd runs: %s", why)
			}

			// Traffic: 300/300 TCP and 300/300 UDP through the half-NAT rules.
			perTCP, err := l.TCPRequests(vip, 300, tcpTimeout)
			if err != nil {
				t.Errorf("TCP: %v", err)
			}
			perUDP, err := l.UDPRequests(vip, 300, udpTimeout)
			if err != nil {
				t.Errorf("UDP: %v", err)
			}
			if n := total(perTCP); n != 300 {
				t.Errorf("TCP: %d/300 answered (%s)", n, sortedCounts(perTCP))
			}
			if n := total(perUDP); n != 300 {
				t.Errorf("UDP: %d/300 answered (%s)", n, sortedCounts(perUDP))
			}
			t.Logf("tcp %s; udp %s", sortedCounts(perTCP), sortedCounts(perUDP))

			// A clean stop restores every feature ilbd changed, and only those.
			if err := l.Ilbd().Stop(); err != nil {
				t.Fatalf("stopping ilbd: %v", err)
			}
			for _, d := range all {
				got := linkFeatures(t, l, d.ns, d.name)
				for name, on := range orig[d] {
					if got[name] != on {
						t.Errorf("%s/%s after ilbd stopped: %s is %v, was %v", d.ns, d.name, name, got[name], on)
					}
				}
			}

			// One "offloads off" line per port, naming the peer, and no warning.
			log := l.IlbdLog()
			for _, p := range []struct{ port, want string }{
				{"net_af_packet0,iface=lbc", "offloads off on lbc ("},
				{"net_af_packet1,iface=lbs", "offloads off on lbs ("},
			} {
				var lines []string
				for _, line := range strings.Split(log, "\n") {
					if strings.Contains(line, "port "+p.port+":") && strings.Contains(line, "offloads") {
						lines = append(lines, line)
					}
				}
				if len(lines) != 1 {
					t.Errorf("port %s: %d offload lines in ilbd's log, want 1: %q", p.port, len(lines), lines)
					continue
				}
				peer := lbsPeer
				if strings.Contains(p.port, "lbc") {
					peer = lbcPeer
				}
				wantPeer := "and on its veth peer " + peer.name + " ("
				if peer.ns != l.LBNS {
					wantPeer = "and on its veth peer " + peer.name + " in namespace " + peer.ns + " ("
				}
				for _, want := range []string{p.want, wantPeer, "tx-checksum-ip-generic", "restored at stop"} {
					if !strings.Contains(lines[0], want) {
						t.Errorf("port %s: log line lacks %q: %s", p.port, want, lines[0])
					}
				}
				if strings.Contains(lines[0], "warning") {
					t.Errorf("port %s: %s", p.port, lines[0])
				}
			}
			if strings.Count(log, "offloads restored on") != 2 {
				t.Errorf("want two \"offloads restored on\" lines in ilbd's log:\n%s", log)
			}
		})
	}
}

func total(per map[string]int) int {
	n := 0
	for _, v := range per {
		n += v
	}
	return n
}

// l4ChecksumComplete checks the IPv4 header checksum and the TCP/UDP checksum of an
// Ethernet frame carrying IPv4.
func l4ChecksumComplete(f []byte) (bool, string) {
	if len(f) < 34 || f[12] != 0x08 || f[13] != 0x00 {
		return false, "not an IPv4 frame"
	}
	if len(f) > 1514 {
		return false, "larger than the MTU (GSO/GRO left on?)"
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if sum := csum(0, ip[:ihl]); sum != 0xffff {
		return false, "bad IPv4 header checksum"
	}
	total := int(ip[2])<<8 | int(ip[3])
	l4 := ip[ihl:total]
	proto := ip[9]
	pseudo := []byte{ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19], 0, proto, byte(len(l4) >> 8), byte(len(l4))}
	if sum := csum(csum(0, pseudo), l4); sum != 0xffff {
		return false, "incomplete or bad L4 checksum (tx checksum offload left on on the sender's path?)"
	}
	return true, ""
}

// TestStockOffloadsEveryTopology: with the kernel's stock offloads (tx checksum offload, TSO,
// GSO) on every host ilbd does not own — the client, the servers, the return router — 300 TCP
// and 300 UDP requests through half-NAT, full-NAT and DSR, over IPv4 and IPv6, are all
// answered, and the engine's checksum samples find no wrong checksum on any port. (The
// ReturnRouter lab puts a bridge between the client and ilbd, so the client's cl0 is not
// ilbd's veth peer and keeps its offloads while ilbd runs.)
func TestStockOffloadsEveryTopology(t *testing.T) {
	l := newLab(t, lab.Options{IPv6: true, ReturnRouter: true})
	hosts := [][2]string{{l.ClientNS, "cl0"}, {l.RouterNS, "rt0"}, {l.RouterNS, "rt1"}}
	for _, s := range l.Servers {
		hosts = append(hosts, [2]string{s.NS, "srv0"})
	}
	startIlbd(t, l)
	for _, h := range hosts {
		checkStockOffloads(t, l, h[0], h[1]) // while ilbd runs
	}
	if t.Failed() {
		t.FailNow()
	}
	const n = 300
	c := l.Client()
	for _, f := range []family{ipv4, ipv6} {
		sg := "sg" + strings.ToLower(f.name)
		createGroup(t, l, f, sg)
		vip := lab.Addr(f.vip, lab.ServicePort)
		for _, topo := range []struct{ name, tcp, udp string }{
			{"half-NAT", "lbalg=rr,type=HALF-NAT", "lbalg=rr,type=HALF-NAT"},
			{"full-NAT", "lbalg=rr,type=NAT,proxy-src=" + f.proxyRange, "lbalg=rr,type=NAT,proxy-src=" + f.proxyRange},
			// DSR TCP needs a hash (round robin balances every packet); UDP takes round robin.
			{"DSR", "lbalg=hash-ip-port,type=DSR", "lbalg=rr,type=DSR"},
		} {
			dsr := topo.name == "DSR"
			if dsr {
				if err := l.SetServerVIP(f.vip, true); err != nil {
					t.Fatal(err)
				}
				if err := l.SetReturnRoute(true); err != nil {
					t.Fatal(err)
				}
			}
			ilbadmAll(t, l,
				[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "tcp"), "-m", topo.tcp, "-o", "servergroup=" + sg, "rtcp"},
				[]string{"create-rule", "-e", "-i", incoming(f.vip, lab.ServicePort, "udp"), "-m", topo.udp, "-o", "servergroup=" + sg, "rudp"})
			what := topo.name + " " + f.name
			rsT := replies(t, c, "tcp", vip, n)
			rsU := replies(t, c, "udp", vip, n)
			if len(rsT) != n || len(rsU) != n {
				t.Errorf("%s with stock offloads: %d/%d TCP and %d/%d UDP requests answered", what, len(rsT), n, len(rsU), n)
			}
			if !dsr { // round robin per connection / datagram
				balanced(t, what+" TCP", perServerOf(rsT), n/3, 1)
			}
			balanced(t, what+" UDP", perServerOf(rsU), n/3, 1)
			ilbadmAll(t, l, []string{"delete-rule", "rtcp", "rudp"})
			if dsr {
				if err := l.SetReturnRoute(false); err != nil {
					t.Fatal(err)
				}
				if err := l.SetServerVIP(f.vip, false); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	st := statistics(t, l)
	for _, p := range st.Ports {
		t.Logf("port %s: %d checksums sampled, %d wrong", p.Name, p.ChecksumSampled, p.ChecksumBad)
		if p.ChecksumSampled == 0 || p.ChecksumBad != 0 {
			t.Errorf("port %s: %d of %d sampled checksums wrong; want some samples, none wrong", p.Name, p.ChecksumBad, p.ChecksumSampled)
		}
	}
	if len(st.Ports) != 2 {
		t.Fatalf("statistics list %d ports, want 2", len(st.Ports))
	}

	// Undo ilbd's work behind its back: tx checksum offload on again on lbc's peer. The
	// client's datagrams now reach ilbd with partial checksums, go unanswered, and the
	// samples show it on that port.
	ilbadmAll(t, l, []string{"create-rule", "-e", "-i", incoming(ipv4.vip, lab.ServicePort, "udp"),
		"-m", "lbalg=rr,type=HALF-NAT", "-o", "servergroup=sgipv4", "rudp"})
	if err := l.InNamespace(l.LBNS, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		return e.Change("lbc-br", map[string]bool{"tx-checksum-ip-generic": true})
	}); err != nil {
		t.Fatalf("tx checksum offload on lbc-br: %v", err)
	}
	answered := 0
	for range 3 * 64 {
		if _, err := c.UDPRequest(lab.Addr(ipv4.vip, lab.ServicePort), 10*time.Millisecond); err == nil {
			answered++
		}
	}
	after := statistics(t, l)
	bad := after.Ports[0].ChecksumBad - st.Ports[0].ChecksumBad
	t.Logf("offload back on lbc-br: %d of %d UDP requests answered; port %s: %d more wrong checksums sampled",
		answered, 3*64, after.Ports[0].Name, bad)
	if bad < 2 || answered > 3*64/10 {
		t.Errorf("with tx checksum offload on lbc-br: %d requests answered, %d wrong checksums sampled; want (almost) none answered and at least 2 samples wrong", answered, bad)
	}
}

// statistics asks the lab's ilbd for its statistics over the control socket.
func statistics(t *testing.T, l *lab.Lab) *api.Statistics {
	t.Helper()
	c, err := api.Dial(l.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Do(&api.Request{Op: api.OpStatistics})
	if err != nil || resp.Statistics == nil {
		t.Fatalf("statistics: %v %+v", err, resp)
	}
	return resp.Statistics
}
