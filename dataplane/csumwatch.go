package dataplane

import (
	"fmt"
	"time"
)

// The checksum watch turns the engine's sampled checksum failures (datapath: one TCP/UDP
// packet in 64 per port is verified) into a warning in the log: packets with incomplete
// checksums are forwarded as they came and dropped by the servers, which from the outside
// looks like a service that answers nobody.

const (
	csumWatchEvery  = 10 * time.Second // how often the counters are compared
	csumWarnEvery   = 10 * time.Minute // at most one warning per port this often
	csumWarnMinBad  = 4                // bad samples in one period before warning
	csumWarnPercent = 5                // ... and at least this share of the period's samples
)

// csumWatch remembers one port's counters at the last look and its last warning.
type csumWatch struct {
	sampled, bad uint64
	warned       time.Time
}

// WatchChecksums compares the sampled checksum counters every csumWatchEvery until stop is
// closed, and logs a rate-limited warning for a port whose samples fail.
func (dp *Dataplane) WatchChecksums(stop <-chan struct{}) {
	state := make([]csumWatch, len(dp.ports))
	t := time.NewTicker(csumWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			dp.checkChecksums(state, now)
		}
	}
}

// checkChecksums looks at the counters once; it returns the warnings it logged (for tests).
func (dp *Dataplane) checkChecksums(state []csumWatch, now time.Time) []string {
	var warned []string
	ports := dp.Stats().Ports
	for i := range state {
		if i >= len(ports) {
			break
		}
		p, w := ports[i], &state[i]
		dSampled, dBad := p.ChecksumSampled-w.sampled, p.ChecksumBad-w.bad
		w.sampled, w.bad = p.ChecksumSampled, p.ChecksumBad
		if dBad < csumWarnMinBad || dBad*100 < dSampled*csumWarnPercent {
			continue
		}
		if !w.warned.IsZero() && now.Sub(w.warned) < csumWarnEvery {
			continue
		}
		w.warned = now
		msg := csumWarning(dp.names[i], deviceIface(dp.devices[i]), dBad, dSampled)
		dp.log.Print(msg)
		warned = append(warned, msg)
	}
	return warned
}

// csumWarning names the likely cause of wrong checksums on a port, and the fix.
func csumWarning(port, iface string, bad, sampled uint64) string {
	cause := "a sender on its link leaves TCP/UDP checksums to an offload that never ran " +
		"(under a net_af_packet or net_af_xdp port: tx checksum offload of the interface's peer, e.g. the other end of a veth); " +
		"turn it off there with `ethtool -K PEER tx off tso off gso off`"
	if iface != "" {
		cause = fmt.Sprintf("a sender on %s's link leaves TCP/UDP checksums to an offload that never ran "+
			"(tx checksum offload of %s's peer, e.g. the other end of a veth, which ilbd could not turn off: see the log at start); "+
			"turn it off there with `ethtool -K PEER tx off tso off gso off`", iface, iface)
	}
	return fmt.Sprintf("warning: port %s: %d of %d sampled TCP/UDP checksums received were wrong: %s; "+
		"servers drop such packets (the statistics of the control socket count them per port: checksum_bad)",
		port, bad, sampled, cause)
}
