package api

import (
	"errors"
	"io/fs"
	"log"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// Service answers requests against a configuration manager: ilbd's control plane.
type Service struct {
	Mgr        *rules.Manager
	AdminGroup string        // members may change the configuration; root always may
	Log        *log.Logger   // records every change request and its outcome; may be nil
	Tables     Tables        // the data plane's counters and tables; nil without a data plane
	Health     HealthChecker // health-check results; nil: none
	// adminGroup, once set by SetAdminGroup, replaces AdminGroup.
	adminGroup atomic.Pointer[string]
}

// SetAdminGroup replaces the admin group while the service runs (SIGHUP); safe to call
// while connections are served.
func (c *Service) SetAdminGroup(g string) { c.adminGroup.Store(&g) }

// authorized reports whether the peer may change the configuration: root, or a member of
// the admin group (primary or supplementary). Reading needs no authorization.
func (c *Service) authorized(p Peer) bool {
	if p.UID == 0 {
		return true
	}
	group := c.AdminGroup
	if g := c.adminGroup.Load(); g != nil {
		group = *g
	}
	if group == "" {
		return false
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return false
	}
	if strconv.FormatUint(uint64(p.GID), 10) == g.Gid {
		return true
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10))
	if err != nil {
		return false
	}
	gids, err := u.GroupIds()
	return err == nil && slices.Contains(gids, g.Gid)
}

// Handle answers one request; it is the Handler that ilbd passes to Serve.
func (c *Service) Handle(peer Peer, req *Request) *Response {
	if req.Op.Mutates() && !c.authorized(peer) {
		return &Response{Status: compat.StatusCfgAuth}
	}
	resp := &Response{}
	var err error
	switch req.Op {
	case OpGetConfig:
		cfg := c.Mgr.Config()
		resp.Config = &cfg
	case OpCreateServerGroup:
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.CreateServerGroup(req.Name) })
	case OpDeleteServerGroup:
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.DeleteServerGroup(req.Name) })
	case OpAddServer:
		if req.Server == nil {
			return &Response{Status: compat.StatusEINVAL}
		}
		err = c.Mgr.Change(func(cfg *rules.Config) error {
			id, err := cfg.AddServer(req.Group, *req.Server)
			resp.ID = id
			return err
		})
	case OpRemoveServer:
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.RemoveServer(req.Group, req.Name) })
	case OpEnableServer, OpDisableServer:
		on := req.Op == OpEnableServer
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.SetServerEnabled(req.Name, on) })
	case OpCreateRule:
		if req.Rule == nil {
			return &Response{Status: compat.StatusEINVAL}
		}
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.CreateRule(*req.Rule) })
	case OpDeleteRule:
		err = c.Mgr.Change(func(cfg *rules.Config) error {
			if req.Name != "" {
				return cfg.DeleteRule(req.Name)
			}
			cfg.Rules = nil
			return nil
		})
	case OpEnableRule, OpDisableRule:
		on := req.Op == OpEnableRule
		err = c.Mgr.Change(func(cfg *rules.Config) error {
			if req.Name != "" {
				return cfg.SetRuleEnabled(req.Name, on)
			}
			for i := range cfg.Rules {
				cfg.Rules[i].Enabled = on
			}
			return nil
		})
	case OpCreateHealthCheck:
		if req.HC == nil {
			return &Response{Status: compat.StatusEINVAL}
		}
		// The probe is looked at before taking the configuration lock (it touches the
		// file system), but its verdict only counts after the name check, which ilbd
		// makes first (D/ilbd_hc.c ilbd_create_hc).
		probeErr := checkProbe(req.HC.Test)
		err = c.Mgr.Change(func(cfg *rules.Config) error {
			if cfg.HealthCheck(req.HC.Name) != nil {
				return &rules.Error{Code: rules.CodeEEXIST}
			}
			if probeErr != nil {
				return probeErr
			}
			return cfg.CreateHealthCheck(*req.HC)
		})
	case OpDeleteHealthCheck:
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.DeleteHealthCheck(req.Name) })
	case OpShowHCResult:
		return c.handleHealth(req)
	default:
		return c.handleTables(req)
	}
	resp.Status = StatusOf(err)
	if req.Op.Mutates() && c.Log != nil {
		c.Log.Printf("uid %d pid %d: %s %s: %s", peer.UID, peer.PID, req.Op, req.subject(), resp.Status)
	}
	return resp
}

// checkProbe is ilbd's check of a health check's test: the built-in PING, TCP and UDP,
// or the absolute path of an executable file. A missing file is ENOENT ("no such/no more
// element(s)"), anything else unusable EINVAL ("invalid argument(s) - see man page").
// The check is the daemon's because the probe runs on the daemon's host.
func checkProbe(test string) error {
	switch strings.ToUpper(test) {
	case "PING", "TCP", "UDP":
		return nil
	}
	if !strings.HasPrefix(test, "/") {
		return &rules.Error{Code: rules.CodeEINVAL}
	}
	st, err := os.Stat(test)
	if errors.Is(err, fs.ErrNotExist) {
		return &rules.Error{Code: rules.CodeENOENT}
	}
	// Solaris asks access(X_OK), which also passes directories; a directory cannot be run.
	if err != nil || !st.Mode().IsRegular() || unix.Access(test, unix.X_OK) != nil {
		return &rules.Error{Code: rules.CodeEINVAL}
	}
	return nil
}

// subject names what a request is about, for the log.
func (req *Request) subject() string {
	switch {
	case req.Rule != nil:
		return req.Rule.Name
	case req.HC != nil:
		return req.HC.Name
	case req.Server != nil:
		return req.Server.Addr.String() + " to " + req.Group
	case req.Group != "":
		return req.Name + " in " + req.Group
	}
	return req.Name
}
