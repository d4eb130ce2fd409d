package datapath

import "reflect"

// MergeStats sums the counters of several engines (the workers of one data plane) into one
// Stats, as the control plane reports them: global counters and gauges added, ports added by
// index, rules added by ID with their servers added by ID and address. A rule is draining only
// if it is draining on every engine that lists it. It allocates; it is for the control plane.
func MergeStats(all ...Stats) Stats {
	if len(all) == 1 {
		return all[0]
	}
	var out Stats
	byRule := map[uint64]int{}
	for k, st := range all {
		addGlobal(&out.Global, &st.Global)
		for i, p := range st.Ports {
			if i >= len(out.Ports) {
				out.Ports = append(out.Ports, PortStats{})
			}
			o := &out.Ports[i]
			o.ChecksumSampled += p.ChecksumSampled
			o.ChecksumBad += p.ChecksumBad
			o.VLANDropped += p.VLANDropped
		}
		if k == 0 {
			out.NumRules = st.NumRules
		}
		for _, r := range st.Rules {
			i, ok := byRule[r.ID]
			if !ok {
				byRule[r.ID] = len(out.Rules)
				r.Servers = append([]ServerStats(nil), r.Servers...)
				out.Rules = append(out.Rules, r)
				continue
			}
			o := &out.Rules[i]
			o.Draining = o.Draining && r.Draining
			addRule(&o.RuleCounters, &r.RuleCounters)
			o.PktProcessed += r.PktProcessed
			o.BytesProcessed += r.BytesProcessed
			for _, s := range r.Servers {
				found := false
				for j := range o.Servers {
					if os := &o.Servers[j]; os.ID == s.ID && os.Addr == s.Addr {
						os.PktProcessed += s.PktProcessed
						os.BytesProcessed += s.BytesProcessed
						os.Removed = os.Removed && s.Removed
						found = true
						break
					}
				}
				if !found {
					o.Servers = append(o.Servers, s)
				}
			}
		}
	}
	return out
}

// addGlobal adds every counter of b to a.
func addGlobal(a, b *GlobalCounters) {
	addUint64Fields(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
}

// addRule adds every counter of b to a.
func addRule(a, b *RuleCounters) {
	addUint64Fields(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
}

func addUint64Fields(a, b reflect.Value) {
	for i := 0; i < a.NumField(); i++ {
		if f := a.Field(i); f.Kind() == reflect.Uint64 {
			f.SetUint(f.Uint() + b.Field(i).Uint())
		}
	}
}
