package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/rules"
)

// clientSteps is the distinct sequence of changes client i makes: its own group, health
// check and rules, with servers added, removed and disabled, rules enabled and disabled,
// objects created and deleted again, and refused changes (status 1).
func clientSteps(i int) []step {
	g, hc, r, s := fmt.Sprintf("g%d", i), fmt.Sprintf("hc%d", i), fmt.Sprintf("r%d", i), fmt.Sprintf("s%d", i)
	steps := []step{
		{line: fmt.Sprintf("create-servergroup -s server=10.%d.0.1-10.%d.0.4:80 %s", i, i, g)},
		{line: fmt.Sprintf("create-healthcheck -h hc-test=tcp,hc-timeout=1,hc-count=1,hc-interval=5 %s", hc)},
		{line: fmt.Sprintf("create-rule -e -i vip=192.0.%d.1,port=80 -m lbalg=rr,type=h -h hc-name=%s -o servergroup=%s %s", i, hc, g, r)},
		{line: fmt.Sprintf("add-server -s server=10.%d.1.1:80 %s", i, g)},
		{line: fmt.Sprintf("remove-server -s server=_%s.0 %s", g, g)},
		{line: fmt.Sprintf("disable-server _%s.%d", g, 1+i%3)},
		{line: fmt.Sprintf("create-rule -p -i vip=192.0.%d.2,port=443 -m lbalg=hash-ip,type=h,pmask=%d -o sg=%s %s", i, 8+i, g, s)},
		{line: "enable-rule " + s},
		{line: "disable-rule " + r},
		{line: fmt.Sprintf("create-servergroup tmp%d", i)},
		{line: fmt.Sprintf("delete-servergroup tmp%d", i)},
		{line: fmt.Sprintf("create-healthcheck -h hc-test=udp x%d", i)},
		{line: fmt.Sprintf("delete-healthcheck x%d", i)},
		// Refused: the rule exists, its VIP and port are taken, the check is in use.
		{line: fmt.Sprintf("create-rule -i vip=192.0.%d.9,port=80 -m type=h -o sg=%s %s", i, g, r),
			stderr: "ilbadm: specified rule name already exists\n", status: 1},
		{line: fmt.Sprintf("create-rule -i vip=192.0.%d.1,port=80 -m type=h -o sg=%s other%d", i, g, i),
			stderr: "ilbadm: object already exists\n", status: 1},
		{line: "delete-healthcheck " + hc, stderr: "ilbadm: object is in use, cannot destroy\n", status: 1},
	}
	if i%2 == 0 {
		steps = append(steps, step{line: "delete-rule " + s})
	}
	return steps
}

// TestConcurrentClients runs 20 clients in parallel against one daemon. Afterwards the
// configuration must be exactly the union of their confirmed changes (the same as
// running them one after the other: no lost or torn update), every configuration read
// meanwhile must be consistent, and a restarted daemon (a new Manager on the same store
// file) must have exactly the same configuration.
func TestConcurrentClients(t *testing.T) {
	const clients = 20
	d := newDaemon(t, true)

	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			c, err := api.Dial(d.sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cfg, err := c.Config()
				if err != nil {
					t.Error(err)
					return
				}
				if err := consistent(cfg); err != nil {
					t.Errorf("inconsistent configuration read: %v", err)
					return
				}
			}
		}()
	}

	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runSteps(t, d.sock, clientSteps(i))
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	// The same changes one client after the other.
	seq := daemon(t)
	for i := range clients {
		runSteps(t, seq, clientSteps(i))
	}
	// Creation order differs between the runs, so the listings are compared as sets of
	// lines (server IDs and states included, which the export does not carry).
	for _, show := range []string{"export-config", "show-server -p -o serverid,address,port,rulename,status,servergroup",
		"show-rule -p -o rulename,status,port,lbalg,type,pmask,hc-name,vip,servers", "show-hc"} {
		got, _, _ := ilbadm(d.sock, show)
		want, _, _ := ilbadm(seq, show)
		if g, w := sortedLines(got), sortedLines(want); !slices.Equal(g, w) {
			t.Errorf("%s after concurrent changes:\n%s\nwant (in any order):\n%s", show, got, want)
		}
	}
	if n := len(d.mgr.Config().Rules); n != clients+clients/2 {
		t.Errorf("%d rules, want %d", n, clients+clients/2)
	}

	// Restart: a new manager loads the store file written by the running one.
	restarted, err := rules.NewManager(&rules.Store{Path: d.store})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := restarted.Config(), d.mgr.Config(); !reflect.DeepEqual(got, want) {
		t.Errorf("configuration after restart differs:\n%+v\nwant\n%+v", got, want)
	}
}

// consistent checks the invariants that a torn update would break.
func consistent(c *rules.Config) error {
	for _, r := range c.Rules {
		if c.Group(r.ServerGroup) == nil {
			return fmt.Errorf("rule %s uses missing group %s", r.Name, r.ServerGroup)
		}
		if r.HCName != "" && c.HealthCheck(r.HCName) == nil {
			return fmt.Errorf("rule %s uses missing health check %s", r.Name, r.HCName)
		}
	}
	for _, g := range c.Groups {
		if !slices.IsSortedFunc(g.Servers, func(a, b rules.Server) int { return a.Addr.Compare(b.Addr) }) {
			return fmt.Errorf("group %s not sorted", g.Name)
		}
	}
	return nil
}

// sortedLines returns the lines of s in sorted order.
func sortedLines(s string) []string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(l)
	return l
}
