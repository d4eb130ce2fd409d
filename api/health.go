package api

import (
	"strings"

	"github.com/ilbgo/ilb/compat"
)

// OpShowHCResult asks for the health-check results (show-hc-result): of the rule named in
// Request.Name, or of every rule with a health check when Name is empty. A named rule that
// does not exist or has no health check fails with compat.StatusRuleNoHC, as in ilbd.
const OpShowHCResult Op = "show-hc-result"

// HCResult is the health-check state of one server of one rule (Solaris' ilb_hc_srv_t).
type HCResult struct {
	Rule     string `json:"rule"`
	HCName   string `json:"hc_name"`
	ServerID string `json:"server_id"`
	// Status is un-init, unreach, alive, dead or disabled.
	Status string `json:"status"`
	Fail   uint32 `json:"fail"`
	// Last and Next are Unix times in seconds: when the last cycle was scheduled and when
	// the next one starts (0 while disabled).
	Last int64 `json:"last"`
	Next int64 `json:"next,omitempty"`
	// RTT is the smoothed round-trip time in microseconds, 0 if unknown.
	RTT uint32 `json:"rtt"`
}

// HealthChecker is ilbd's health checker as the control service sees it.
type HealthChecker interface {
	// HealthResults returns every (rule, server) pair with a health check, rules in
	// configuration order and servers in group order.
	HealthResults() []HCResult
}

// handleHealth answers show-hc-result. Without a checker there are no results.
func (c *Service) handleHealth(req *Request) *Response {
	var rule string
	if req.Name != "" {
		cfg := c.Mgr.Config()
		r := cfg.Rule(req.Name)
		if r == nil || r.HCName == "" {
			return &Response{Status: compat.StatusRuleNoHC}
		}
		rule = r.Name
	}
	resp := &Response{}
	if c.Health == nil {
		return resp
	}
	for _, r := range c.Health.HealthResults() {
		if rule == "" || strings.EqualFold(r.Rule, rule) {
			resp.HCResults = append(resp.HCResults, r)
		}
	}
	return resp
}

// HCResults returns the health-check results of the named rule, or of every rule with a
// health check when rule is empty.
func (c *Client) HCResults(rule string) ([]HCResult, error) {
	resp, err := c.Do(&Request{Op: OpShowHCResult, Name: rule})
	if err != nil {
		return nil, err
	}
	return resp.HCResults, nil
}
