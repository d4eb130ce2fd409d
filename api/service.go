package api

import (
	"log"
	"os/user"
	"slices"
	"strconv"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// Service answers requests against a configuration manager: ilbd's control plane.
type Service struct {
	Mgr        *rules.Manager
	AdminGroup string      // members may change the configuration; root always may
	Log        *log.Logger // records every change request and its outcome; may be nil
}

// authorized reports whether the peer may change the configuration: root, or a member of
// the admin group (primary or supplementary). Reading needs no authorization.
func (c *Service) authorized(p Peer) bool {
	if p.UID == 0 {
		return true
	}
	if c.AdminGroup == "" {
		return false
	}
	g, err := user.LookupGroup(c.AdminGroup)
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
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.CreateHealthCheck(*req.HC) })
	case OpDeleteHealthCheck:
		err = c.Mgr.Change(func(cfg *rules.Config) error { return cfg.DeleteHealthCheck(req.Name) })
	default:
		return &Response{Status: compat.StatusInvalCmd}
	}
	resp.Status = StatusOf(err)
	if req.Op.Mutates() && c.Log != nil {
		c.Log.Printf("uid %d pid %d: %s %s: %s", peer.UID, peer.PID, req.Op, req.subject(), resp.Status)
	}
	return resp
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
