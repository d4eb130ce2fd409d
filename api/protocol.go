// Package api is the wire protocol between ilbadm (or any Go program) and ilbd, and a
// client for it: the role libilb plays on Solaris.
//
// The transport is a Unix stream socket carrying one JSON object per line: a Request from
// the client, then exactly one Response from ilbd. Failures travel as libilb status codes
// (compat.Status), so every client prints Solaris' exact message.
package api

import (
	"os"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// DefaultSocket is where ilbd listens unless told otherwise (Solaris used
// /var/run/daemon/ilb_sock; a listed deviation).
const DefaultSocket = "/run/ilb/ilb_sock"

// SocketEnv names the environment variable that overrides DefaultSocket for ilbd and
// ilbadm alike, so several instances can run side by side.
const SocketEnv = "ILB_SOCKET"

// SocketPath returns the socket path from the environment, or DefaultSocket.
func SocketPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	return DefaultSocket
}

// Op names a request.
type Op string

// The requests ilbd serves.
const (
	OpGetConfig         Op = "get-config"
	OpCreateServerGroup Op = "create-servergroup"
	OpDeleteServerGroup Op = "delete-servergroup"
	OpAddServer         Op = "add-server"
	OpRemoveServer      Op = "remove-server"
	OpEnableServer      Op = "enable-server"
	OpDisableServer     Op = "disable-server"
	OpCreateRule        Op = "create-rule"
	OpDeleteRule        Op = "delete-rule"
	OpEnableRule        Op = "enable-rule"
	OpDisableRule       Op = "disable-rule"
	OpCreateHealthCheck Op = "create-healthcheck"
	OpDeleteHealthCheck Op = "delete-healthcheck"
)

// Mutates reports whether the request changes the configuration (and so needs authorization).
func (o Op) Mutates() bool {
	switch o {
	case OpGetConfig, OpStatistics, OpShowNAT, OpShowPersist, OpShowWorker, OpShowHCResult:
		return false
	}
	return true
}

// Request is one call to ilbd.
type Request struct {
	Op Op `json:"op"`
	// Name is the object the request is about: a rule, group, health check or server ID.
	// For delete-rule, enable-rule and disable-rule an empty Name means every rule.
	Name   string             `json:"name,omitempty"`
	Group  string             `json:"group,omitempty"`
	Server *rules.ServerSpec  `json:"server,omitempty"`
	Rule   *rules.Rule        `json:"rule,omitempty"`
	HC     *rules.HealthCheck `json:"hc,omitempty"`
	// Max limits how many entries show-nat and show-persist return (0: all).
	Max int `json:"max,omitempty"`
}

// Response is ilbd's answer to one Request.
type Response struct {
	Status compat.Status `json:"status"`
	// ID is the server ID that add-server allocated.
	ID     string        `json:"id,omitempty"`
	Config *rules.Config `json:"config,omitempty"`

	Statistics *Statistics        `json:"statistics,omitempty"`
	NAT        []NATEntry         `json:"nat,omitempty"`
	Persist    []PersistEntry     `json:"persist,omitempty"`
	HCResults  []HCResult         `json:"hc_results,omitempty"`
	Workers    []WorkerStatistics `json:"workers,omitempty"`
}

// StatusOf converts a configuration error into the status sent to the client.
func StatusOf(err error) compat.Status {
	if err == nil {
		return compat.StatusOK
	}
	if e, ok := err.(*rules.Error); ok {
		return compat.Status(e.Code)
	}
	if s, ok := err.(compat.Status); ok {
		return s
	}
	return compat.StatusInternal
}
