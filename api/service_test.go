package api

import (
	"bytes"
	"net"
	"net/netip"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

func newService(t *testing.T, adminGroup string) *Service {
	t.Helper()
	mgr, err := rules.NewManager(&rules.Store{Path: filepath.Join(t.TempDir(), "c.json")})
	if err != nil {
		t.Fatal(err)
	}
	return &Service{Mgr: mgr, AdminGroup: adminGroup}
}

func TestAuthorization(t *testing.T) {
	svc := newService(t, "")
	root, nobody := Peer{UID: 0}, Peer{UID: 65534, GID: 65534}
	if r := svc.Handle(nobody, &Request{Op: OpCreateServerGroup, Name: "sg"}); r.Status != compat.StatusCfgAuth {
		t.Fatalf("non-root change: status %v", r.Status)
	}
	if len(svc.Mgr.Config().Groups) != 0 {
		t.Fatal("refused change was applied")
	}
	if r := svc.Handle(root, &Request{Op: OpCreateServerGroup, Name: "sg"}); r.Status != compat.StatusOK {
		t.Fatalf("root change: status %v", r.Status)
	}
	if r := svc.Handle(nobody, &Request{Op: OpGetConfig}); r.Status != compat.StatusOK || len(r.Config.Groups) != 1 {
		t.Fatalf("non-root read: %+v", r)
	}
	for _, op := range []Op{OpDeleteServerGroup, OpAddServer, OpRemoveServer, OpEnableServer, OpDisableServer,
		OpCreateRule, OpDeleteRule, OpEnableRule, OpDisableRule, OpCreateHealthCheck, OpDeleteHealthCheck} {
		if r := svc.Handle(nobody, &Request{Op: op, Name: "sg"}); r.Status != compat.StatusCfgAuth {
			t.Errorf("%s by non-root: status %v", op, r.Status)
		}
	}
	// Members of the admin group may change the configuration (primary group here).
	if g, err := user.LookupGroupId("65534"); err == nil {
		svc.AdminGroup = g.Name
		if r := svc.Handle(nobody, &Request{Op: OpCreateServerGroup, Name: "sg2"}); r.Status != compat.StatusOK {
			t.Fatalf("admin-group member: status %v", r.Status)
		}
	}
}

// The codes rules returns must be the libilb codes compat prints.
func TestRuleCodesMatchStatuses(t *testing.T) {
	pairs := map[rules.Code]compat.Status{
		rules.CodeInternal: compat.StatusInternal, rules.CodeEINVAL: compat.StatusEINVAL,
		rules.CodeENOENT: compat.StatusENOENT, rules.CodeInUse: compat.StatusInUse,
		rules.CodeEEXIST: compat.StatusEEXIST, rules.CodeENOHCInfo: compat.StatusENOHCInfo,
		rules.CodeDupRule: compat.StatusDupRule, rules.CodeENORule: compat.StatusENORule,
		rules.CodeMismatchSG: compat.StatusMismatchSG, rules.CodeMismatchH: compat.StatusMismatchH,
		rules.CodeSGUnavail: compat.StatusSGUnavail, rules.CodeSGInUse: compat.StatusSGInUse,
		rules.CodeSGExists: compat.StatusSGExists, rules.CodeSGFull: compat.StatusSGFull,
		rules.CodeSGEmpty: compat.StatusSGEmpty, rules.CodeNameTooLong: compat.StatusNameTooLong,
		rules.CodeCfgUpdate: compat.StatusCfgUpdate, rules.CodeBadSG: compat.StatusBadSG,
		rules.CodeInvalSrvr: compat.StatusInvalSrvr, rules.CodeInvalEnbSrvr: compat.StatusInvalEnbSrvr,
		rules.CodeBadPort: compat.StatusBadPort, rules.CodeSrvUnavail: compat.StatusSrvUnavail,
		rules.CodeRuleNoHC: compat.StatusRuleNoHC, rules.CodeRuleHCMismatch: compat.StatusRuleHCMismatch,
	}
	for c, s := range pairs {
		if got := StatusOf(&rules.Error{Code: c}); got != s {
			t.Errorf("code %d maps to %v, want %v", c, got, s)
		}
	}
}

func TestClientOverSocket(t *testing.T) {
	svc := newService(t, "")
	sock := filepath.Join(t.TempDir(), "s")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go Serve(l, svc.Handle)
	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateServerGroup("sg"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateServerGroup("sg"); err != compat.StatusSGExists {
		t.Fatalf("second create: %v", err)
	}
	id, err := c.AddServer("sg", rules.ServerSpec{Addr: netipMust("192.0.2.11")})
	if err != nil || id != "_sg.0" {
		t.Fatalf("add-server: %q %v", id, err)
	}
	cfg, err := c.Config()
	if err != nil || len(cfg.Groups) != 1 || len(cfg.Groups[0].Servers) != 1 {
		t.Fatalf("config: %+v %v", cfg, err)
	}
	if _, err := Dial(filepath.Join(t.TempDir(), "none")); err != compat.StatusSocket {
		t.Fatalf("dial without ilbd: %v", err)
	}
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

// A request line beyond the limit ends the connection instead of growing a buffer.
func TestOversizedRequestIsRefused(t *testing.T) {
	svc := newService(t, "")
	sock := filepath.Join(t.TempDir(), "s")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go Serve(l, svc.Handle)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := append([]byte(`{"op":"create-servergroup","name":"`), bytes.Repeat([]byte("x"), maxRequest+1)...)
	go conn.Write(append(big, "\"}\n"...))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("an oversized request got an answer (%d bytes)", n)
	}
	if len(svc.Mgr.Config().Groups) != 0 {
		t.Fatal("the oversized request was applied")
	}
}

// SetAdminGroup replaces the configured group for the requests that follow (SIGHUP).
func TestSetAdminGroup(t *testing.T) {
	svc := &Service{AdminGroup: "ilb-no-such-group-xyz"}
	peer := Peer{UID: 54321, GID: 0} // not root, primary group root (gid 0)
	if svc.authorized(peer) {
		t.Fatal("authorized by a group that does not exist")
	}
	svc.SetAdminGroup("root")
	if !svc.authorized(peer) {
		t.Fatal("not authorized by the new admin group")
	}
	svc.SetAdminGroup("")
	if svc.authorized(peer) {
		t.Fatal("authorized with no admin group")
	}
}
