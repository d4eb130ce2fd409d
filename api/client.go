package api

import (
	"bufio"
	"encoding/json"
	"net"
	"time"

	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// Client is a connection to ilbd. It is not safe for concurrent use.
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	enc  *json.Encoder
}

// Dial connects to ilbd at path. When ilbd is not running it fails with
// compat.StatusSocket, which ilbadm prints as Solaris does: "socket() failed".
func Dial(path string) (*Client, error) {
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, compat.StatusSocket
	}
	return &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), enc: json.NewEncoder(conn)}, nil
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends one request and waits for its response. A transport failure is reported with the
// libilb status for it; a refusal by ilbd is the response's status.
func (c *Client) Do(req *Request) (*Response, error) {
	if err := c.enc.Encode(req); err != nil {
		return nil, compat.StatusSend
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, compat.StatusRead
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, compat.StatusRead
	}
	if resp.Status != compat.StatusOK {
		return &resp, resp.Status
	}
	return &resp, nil
}

func (c *Client) simple(req Request) error {
	_, err := c.Do(&req)
	return err
}

// Config returns ilbd's whole configuration.
func (c *Client) Config() (*rules.Config, error) {
	resp, err := c.Do(&Request{Op: OpGetConfig})
	if err != nil {
		return nil, err
	}
	if resp.Config == nil {
		return &rules.Config{}, nil
	}
	return resp.Config, nil
}

// CreateServerGroup creates an empty server group.
func (c *Client) CreateServerGroup(name string) error {
	return c.simple(Request{Op: OpCreateServerGroup, Name: name})
}

// DeleteServerGroup deletes a server group that no rule uses.
func (c *Client) DeleteServerGroup(name string) error {
	return c.simple(Request{Op: OpDeleteServerGroup, Name: name})
}

// AddServer adds one server to a group and returns its ID.
func (c *Client) AddServer(group string, s rules.ServerSpec) (string, error) {
	resp, err := c.Do(&Request{Op: OpAddServer, Group: group, Server: &s})
	if err != nil {
		return "", err
	}
	return resp.ID, nil
}

// RemoveServer removes a server, given by ID, from a group.
func (c *Client) RemoveServer(group, id string) error {
	return c.simple(Request{Op: OpRemoveServer, Group: group, Name: id})
}

// EnableServer enables a server, given by ID, in every rule that uses its group.
func (c *Client) EnableServer(id string) error {
	return c.simple(Request{Op: OpEnableServer, Name: id})
}

// DisableServer disables a server, given by ID, in every rule that uses its group.
func (c *Client) DisableServer(id string) error {
	return c.simple(Request{Op: OpDisableServer, Name: id})
}

// CreateRule creates a rule.
func (c *Client) CreateRule(r rules.Rule) error {
	return c.simple(Request{Op: OpCreateRule, Rule: &r})
}

// DeleteRule deletes the named rule, or every rule when name is empty.
func (c *Client) DeleteRule(name string) error {
	return c.simple(Request{Op: OpDeleteRule, Name: name})
}

// EnableRule enables the named rule, or every rule when name is empty.
func (c *Client) EnableRule(name string) error {
	return c.simple(Request{Op: OpEnableRule, Name: name})
}

// DisableRule disables the named rule, or every rule when name is empty.
func (c *Client) DisableRule(name string) error {
	return c.simple(Request{Op: OpDisableRule, Name: name})
}

// CreateHealthCheck creates a health check.
func (c *Client) CreateHealthCheck(h rules.HealthCheck) error {
	return c.simple(Request{Op: OpCreateHealthCheck, HC: &h})
}

// DeleteHealthCheck deletes a health check that no rule uses.
func (c *Client) DeleteHealthCheck(name string) error {
	return c.simple(Request{Op: OpDeleteHealthCheck, Name: name})
}
