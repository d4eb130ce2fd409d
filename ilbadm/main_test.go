package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/rules"
)

// daemon runs ilbd's control plane in-process on a temporary socket, so the CLI is tested
// end to end through the real protocol without DPDK.
func daemon(t *testing.T) string {
	t.Helper()
	return newDaemon(t, true).sock
}

// testDaemon is an in-process ilbd control plane.
type testDaemon struct {
	sock  string
	store string // the configuration file; "" for a daemon without one
	mgr   *rules.Manager
}

// newDaemon starts an in-process daemon; withStore=false keeps the configuration in
// memory only (no fsync per change), for the fuzz target. with sets the service's data-plane
// sources (Tables, Health) for the tests of the show commands that read them.
func newDaemon(t testing.TB, withStore bool, with ...func(*api.Service)) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	d := &testDaemon{sock: filepath.Join(dir, "ilb.sock")}
	var store *rules.Store
	if withStore {
		d.store = filepath.Join(dir, "config.json")
		store = &rules.Store{Path: d.store}
	}
	mgr, err := rules.NewManager(store)
	if err != nil {
		t.Fatal(err)
	}
	d.mgr = mgr
	l, err := api.Listen(d.sock)
	if err != nil {
		t.Fatal(err)
	}
	svc := &api.Service{Mgr: mgr}
	for _, f := range with {
		f(svc)
	}
	go api.Serve(l, svc.Handle)
	t.Cleanup(func() { l.Close() })
	return d
}

// ilbadm runs one command line and returns stdout, stderr and the exit status.
func ilbadm(sock string, line string) (string, string, int) {
	return ilbadmIn(sock, line, "")
}

// ilbadmIn is ilbadm with stdin.
func ilbadmIn(sock, line, stdin string) (string, string, int) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin), prog: "ilbadm", socket: sock}
	status := e.main(strings.Fields(line))
	return out.String(), errb.String(), status
}

type step struct {
	line           string
	stdout, stderr string
	status         int
}

func runSteps(t *testing.T, sock string, steps []step) {
	t.Helper()
	for _, s := range steps {
		out, errs, status := ilbadm(sock, s.line)
		if out != s.stdout || errs != s.stderr || status != s.status {
			t.Errorf("ilbadm %s\n got stdout %q\n     stderr %q\n     exit %d\nwant stdout %q\n     stderr %q\n     exit %d",
				s.line, out, errs, status, s.stdout, s.stderr, s.status)
		}
	}
}

// HALF-NAT fills TYPE's 8 columns, so libofmt prints it followed by one blank and takes
// that column back from PROTOCOL's padding ("TCP " instead of "TCP  ").
const showRuleAfterSetup = `RULENAME            STATUS LBALG       TYPE    PROTOCOL VIP         PORT
webtcp              E      roundrobin  HALF-NAT TCP 203.0.113.10    80
webudp              D      roundrobin  HALF-NAT UDP 203.0.113.10    80
`

func TestFoundationCommands(t *testing.T) {
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "show-rule"},
		{line: "create-servergroup -s server=192.0.2.11,192.0.2.12 websg"},
		{line: "add-server -s server=192.0.2.13 websg"},
		{line: "show-servergroup", stdout: `SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS
websg          _websg.0            --      --      192.0.2.11
websg          _websg.1            --      --      192.0.2.12
websg          _websg.2            --      --      192.0.2.13
`},
		{line: "create-rule -e -i vip=203.0.113.10,port=80,protocol=tcp -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp"},
		{line: "create-rule -i vip=203.0.113.10,port=80,protocol=udp -m lbalg=roundrobin,type=h -o sg=websg webudp"},
		{line: "show-rule", stdout: showRuleAfterSetup},
		{line: "show-rl -e", stdout: "RULENAME            STATUS LBALG       TYPE    PROTOCOL VIP         PORT\nwebtcp              E      roundrobin  HALF-NAT TCP 203.0.113.10    80\n"},
		{line: "show-rule -p -o rulename,vip,port webudp", stdout: "webudp:203.0.113.10:80\n"},
		{line: "show-rule -f webtcp", stdout: `       RULENAME: webtcp
         STATUS: E
           PORT: 80
       PROTOCOL: TCP
          LBALG: roundrobin
           TYPE: HALF-NAT
      PROXY-SRC: --
          PMASK: --
        HC-NAME: --
        HC-PORT: --
     CONN-DRAIN: 0
    NAT-TIMEOUT: 120
PERSIST-TIMEOUT: 0
    SERVERGROUP: websg
            VIP: 203.0.113.10
        SERVERS: _websg.0,_websg.1,_websg.2
`},
		{line: "enable-rule webudp"},
		{line: "disable-rule webtcp"},
		{line: "show-rule -d -o rulename,status", stdout: "RULENAME            STATUS\nwebtcp              D\n"},
		{line: "disable-rule"},
		{line: "show-rule -e"},
		{line: "enable-rl"},
		{line: "enable-rule nosuch", stderr: "ilbadm: specified rule does not exist\n", status: 1},
		{line: "show-rule nosuch", stderr: "ilbadm: no such/no more element(s)\n", status: 1},
		{line: "delete-servergroup websg", stderr: "ilbadm: cannot remove server group - its in use with other active rules\n", status: 1},
		{line: "delete-rule webudp"},
		{line: "delete-rule webudp", stderr: "ilbadm: specified rule does not exist\n", status: 1},
		{line: "delete-rule", stderr: "ilbadm: usage: delete-rule -a | name\n", status: 1},
		{line: "delete-rule -a webtcp", stderr: "ilbadm: invalid/incompatible keywords - refer to ilbadm(1M)\n", status: 1},
		{line: "delete-rule -a"},
		{line: "show-rule"},
		{line: "delete-servergroup", stderr: "ilbadm: usage:ilbadm delete-servergroup groupname\n", status: 1},
		{line: "delete-sg websg"},
		{line: "delete-sg websg", stderr: "ilbadm: cannot find specified server group\n", status: 1},
		{line: "show-sg"},
	})
}

func TestCreateRuleBadInputChangesNothing(t *testing.T) {
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11,192.0.2.12,192.0.2.13 websg"},
		{line: "create-rule -e -i vip=203.0.113.10,port=80,protocol=tcp -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp"},
	})
	before, _, _ := ilbadm(sock, "show-rule -f")
	bad := []step{
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr -o servergroup=websg bad1",
			stderr: "ilbadm: lbalg or type is unspecified\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT,foo=1 -o servergroup=websg bad2",
			stderr: "ilbadm: bad keyword foo\n", status: 1},
		{line: "create-rule -e -i vip=not-an-ip,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg bad3",
			stderr: "ilbadm: vip: address is invalid\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg",
			stderr: "ilbadm: missing mandatory arguments - please refer to 'ilbadm create-rule' subcommand description in ilbadm(1M)\n", status: 1},
		{line: "create-rule -e -i port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg bad4",
			stderr: "ilbadm: address family is invalid\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT bad5",
			stderr: "ilbadm: servergroup name missing\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=NAT -o servergroup=websg bad6",
			stderr: "ilbadm: proxy-src is either missing or its address family does not match that of the VIP address\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT,proxy-src=192.0.2.100 -o servergroup=websg bad7",
			stderr: "ilbadm: proxy-src: proxy-src not allowed\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=websg abcdefghijklmnopqrst",
			stderr: "ilbadm: rule name abcdefghijklmnopqrst is too long - must not exceed 19 chars\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT,pmask=24 -o servergroup=websg bad8",
			stderr: "ilbadm: use of stickymask requires -p option\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.20,port=81 -m lbalg=rr,type=HALF-NAT -o servergroup=nosuch bad9",
			stderr: "ilbadm: cannot find specified server group\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.10,port=80 -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp",
			stderr: "ilbadm: specified rule name already exists\n", status: 1},
		{line: "create-rule -e -i vip=203.0.113.10,port=80 -m lbalg=rr,type=HALF-NAT -o servergroup=websg other",
			stderr: "ilbadm: object already exists\n", status: 1},
		{line: "create-rule -x bad10", stderr: "ilbadm: bad or misplaced option -x\n", status: 1},
	}
	runSteps(t, sock, bad)
	if after, _, _ := ilbadm(sock, "show-rule -f"); after != before {
		t.Fatalf("bad input changed the configuration:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestGlobalBehaviour(t *testing.T) {
	dead := filepath.Join(t.TempDir(), "none.sock")
	out, errs, status := ilbadm(dead, "show-rule")
	if out != "" || errs != "ilbadm: socket() failed\n" || status != 1 {
		t.Errorf("no ilbd: %q %q %d", out, errs, status)
	}
	_, errs, status = ilbadm(dead, "frobnicate")
	if errs != "ilbadm: subcommand is invalid - please refer to ilbadm(1M)\n" || status != 1 {
		t.Errorf("unknown subcommand: %q %d", errs, status)
	}
	_, errs, status = ilbadm(dead, "")
	if !strings.HasPrefix(errs, "ilbadm: the command line is incomplete (more arguments expected)\nUsage:\nilbadm create-rule|create-rl [-e] [-p] -i vip=value,port=value[,protocol=value] \n\t-m lbalg") || status != 1 {
		t.Errorf("no subcommand: %q %d", errs, status)
	}
	// Solaris' usage ends with show-persist; show-worker, an extension, follows it.
	if !strings.HasSuffix(errs, "ilbadm show-persist|show-pt [count]\nilbadm show-worker|show-worker [[-p] -o field[,...]]\n") {
		t.Errorf("usage does not end with show-persist and show-worker: %q", errs)
	}
	out, _, status = ilbadm(dead, "-V x")
	if out != "ilbadm 1.0\nCopyright 2009 Sun Microsystems, Inc.  All rights reserved.\nUse is subject to license terms.\n" || status != 0 {
		t.Errorf("-V: %q %d", out, status)
	}
	// Subcommands and aliases are matched case-insensitively.
	sock := daemon(t)
	runSteps(t, sock, []step{{line: "CREATE-SG sg1"}, {line: "Show-SG", stdout: "SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\nsg1            --                  --      --      --\n"}})
}

// The socket path comes from ILB_SOCKET; check that api resolves it.
func TestSocketFromEnvironment(t *testing.T) {
	t.Setenv(api.SocketEnv, "/tmp/x.sock")
	if api.SocketPath() != "/tmp/x.sock" {
		t.Fatal(api.SocketPath())
	}
}

// Behaviours read from Solaris' ilbadm: an unknown global option prints only the usage; a
// server-group name over 14 characters is refused by remove-server and delete-servergroup
// before any lookup (here, with no daemon to ask); show-server of an unknown rule reports the
// end of the walk.
func TestSolarisEdgeBehaviours(t *testing.T) {
	dead := filepath.Join(t.TempDir(), "none.sock")
	out, errs, status := ilbadm(dead, "-x")
	if out != "" || !strings.HasPrefix(errs, "Usage:\nilbadm create-rule|create-rl ") || strings.Contains(errs, "misplaced") || status != 1 {
		t.Errorf("-x: %q %q %d", out, errs, status)
	}
	long := "abcdefghijklmno" // 15 characters
	const tooLong = "ilbadm: servergroup name can only contain a maximum of 14 characters\n"
	for _, line := range []string{"remove-server -s server=_" + long + ".0 " + long, "delete-servergroup " + long, "delete-sg " + long} {
		if _, errs, status := ilbadm(dead, line); errs != tooLong || status != 1 {
			t.Errorf("%s: %q %d", line, errs, status)
		}
	}
	if _, errs, _ := ilbadm(dead, "delete-servergroup "+long[:14]); errs != "ilbadm: socket() failed\n" {
		t.Errorf("a 14-character name is asked of the daemon: %q", errs)
	}
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11 websg"},
		{line: "create-rule -e -i vip=203.0.113.10,port=80 -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp"},
		{line: "show-server -o rulename,address nosuch", stderr: "ilbadm: no such/no more element(s)\n", status: 1},
		{line: "show-server -o rulename,address webtcp nosuch", stdout: "RULENAME            ADDRESS\nwebtcp              192.0.2.11\n",
			stderr: "ilbadm: no such/no more element(s)\n", status: 1},
	})
}

// `ilbadm --help` and `ilbadm help [subcommand]` (extensions) print the usage on stdout and
// succeed; -? keeps Solaris' usage on stderr and status 1.
func TestHelp(t *testing.T) {
	dead := filepath.Join(t.TempDir(), "none.sock")
	full, errs, status := ilbadm(dead, "--help")
	if !strings.HasPrefix(full, "Usage:\nilbadm create-rule|create-rl ") || errs != "" || status != 0 {
		t.Fatalf("--help: %q %q %d", full, errs, status)
	}
	if out, _, status := ilbadm(dead, "help"); out != full || status != 0 {
		t.Errorf("help: %q %d", out, status)
	}
	if out, _, status := ilbadm(dead, "help show-srv"); out != "Usage:\nilbadm show-server|show-srv [[-p] -o field[,field...]] [rulename ... ]\n" || status != 0 {
		t.Errorf("help show-srv: %q %d", out, status)
	}
	if out, _, _ := ilbadm(dead, "help create-rule"); !strings.HasSuffix(out, "\t-o servergroup=value name\n") || strings.Contains(out, "delete-rule") {
		t.Errorf("help create-rule: %q", out)
	}
	if _, errs, status := ilbadm(dead, "help frob"); errs != "ilbadm: subcommand is invalid - please refer to ilbadm(1M)\n" || status != 1 {
		t.Errorf("help frob: %q %d", errs, status)
	}
	if out, errs, status := ilbadm(dead, "-?"); out != "" || errs != full || status != 1 {
		t.Errorf("-?: %q %q %d", out, errs, status)
	}
}
