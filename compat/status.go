// Package compat is the Oracle Solaris ILB surface as a pure library: the exact
// status and error texts, the key=value option grammar of ilbadm, address, port
// and range parsing, the create-rule / server option parsers, and a
// libofmt-compatible table engine. Nothing here talks to ilbd.
package compat

import (
	"fmt"
	"io"
	"strings"
)

// ManSection is the man-page section printed in messages as "ilbadm(<ManSection>)".
// Solaris 11.0-11.3 print 1M; current illumos prints 8.
var ManSection = "1M"

// manRef returns "ilbadm(1M)" (or the configured section).
func manRef() string { return "ilbadm(" + ManSection + ")" }

// Status is a libilb/ilbd status code (spec §3.2); values are the wire codes 0..39.
type Status int

// libilb status codes (L/libilb.h ilb_status_t), in wire order.
const (
	StatusOK Status = iota
	StatusInternal
	StatusEINVAL
	StatusENOMEM
	StatusENOENT
	StatusSocket
	StatusRead
	StatusWrite
	StatusTimer
	StatusInUse
	StatusEEXIST
	StatusPermit
	StatusCallback
	StatusEWouldBlock
	StatusInProgress
	StatusSend
	StatusGeneric
	StatusENOHCInfo
	StatusInvalHCTestType
	StatusInvalCmd
	StatusDupRule
	StatusENORule
	StatusMismatchSG
	StatusMismatchH
	StatusSGUnavail
	StatusSGInUse
	StatusSGExists
	StatusSGFull
	StatusSGEmpty
	StatusNameTooLong
	StatusCfgAuth
	StatusCfgUpdate
	StatusBadSG
	StatusInvalSrvr
	StatusInvalEnbSrvr
	StatusBadPort
	StatusSrvUnavail
	StatusRuleNoHC
	StatusRuleHCMismatch
	StatusHandleClosing
)

// statusText holds ilb_errstr's texts (L/ilb_subr.c), typos and double spaces included.
var statusText = [...]string{
	StatusOK:              "no error",
	StatusInternal:        "error internal to the library",
	StatusEINVAL:          "invalid argument(s) - see man page",
	StatusENOMEM:          "not enough memory for operation",
	StatusENOENT:          "no such/no more element(s)",
	StatusSocket:          "socket() failed",
	StatusRead:            "read() failed",
	StatusWrite:           "fflush() or send() failed",
	StatusTimer:           "health check timer create/setup error",
	StatusInUse:           "object is in use, cannot destroy",
	StatusEEXIST:          "object already exists",
	StatusPermit:          "no scf permit",
	StatusCallback:        "scf callback error",
	StatusEWouldBlock:     "unknown error", // ilb_errstr has no case for it
	StatusInProgress:      "operation is progress",
	StatusSend:            "send() failed",
	StatusGeneric:         "unknown error", // callers print their own text first
	StatusENOHCInfo:       "missing healthcheck info",
	StatusInvalHCTestType: "invalid  health check test type",
	StatusInvalCmd:        "invalid command",
	StatusDupRule:         "specified rule name already exists",
	StatusENORule:         "specified rule does not exist",
	StatusMismatchSG:      "address family mismatch with servergroup",
	StatusMismatchH:       "address family mismatch with previous hosts in servergroup or with rule",
	StatusSGUnavail:       "cannot find specified server group",
	StatusSGInUse:         "cannot remove server group - its in use with other active rules",
	StatusSGExists:        "servergroup already exists",
	StatusSGFull:          "servergroup is full - cannot add any more servers to this servergroup",
	StatusSGEmpty:         "servergroup does not contain any servers",
	StatusNameTooLong:     "servergroup name can only contain a maximum of 14 characters",
	StatusCfgAuth:         "user is not authorized to execute command",
	StatusCfgUpdate:       "a failure occurred while trying to update persistent config. Panic?",
	StatusBadSG:           "the rule's port range does not match that of the servers' in associated servergroup",
	StatusInvalSrvr:       "server cannot be added to the servergroup, as the servergroup is associated to rule(s) with port/port range that is incompatiblewith the server's port",
	StatusInvalEnbSrvr:    "server cannot be enabled because it's not associated with any rule",
	StatusBadPort:         "the rule's port value does not match that of the servers' in associated servergroup",
	StatusSrvUnavail:      "cannot find specified server",
	StatusRuleNoHC:        "rule does not have health check enabled",
	StatusRuleHCMismatch:  "protocol used in rule and health check does not match",
	StatusHandleClosing:   "handle is being closed",
}

// String returns the exact ilb_errstr text; unknown codes read "unknown error".
func (s Status) String() string {
	if s < 0 || int(s) >= len(statusText) {
		return "unknown error"
	}
	return statusText[s]
}

// Error returns the same text as String, so a Status can travel as an error.
func (s Status) Error() string { return s.String() }

// AdmStatus is an ilbadm-internal status (A/ilbadm.h ilbadm_status_t, spec §3.1).
type AdmStatus int

// ilbadm status codes, in the order of ilbadm_status_t.
const (
	AdmOK AdmStatus = iota
	AdmAssignReq
	AdmEINVAL
	AdmENOMEM
	AdmENOOption
	AdmENOProto
	AdmENOProxy
	AdmENOService
	AdmENOSGName
	AdmENORule
	AdmENOServer
	AdmExportFail
	AdmFail
	AdmHCPrint
	AdmInvalAddr
	AdmInvalAF
	AdmInvalAlg
	AdmInvalArgs
	AdmInvalCommand
	AdmInvalKeyword
	AdmInvalOper
	AdmInvalPort
	AdmInvalProxy
	AdmInvalSyntax
	AdmInvalSrvID
	AdmLibErr
	AdmNoRecursive
	AdmTooManyIPAddr
	AdmNoKeywordVal
)

// String returns ilbadm_errstr's exact text (A/ilbadm.c), with the configured man section.
func (s AdmStatus) String() string {
	switch s {
	case AdmOK:
		return "no error"
	case AdmFail:
		return "processing of command failed"
	case AdmENOMEM:
		return "memory allocation failure"
	case AdmEINVAL:
		return "invalid value  - refer to " + manRef()
	case AdmHCPrint:
		return "failed to print healthcheck values"
	case AdmInvalAF:
		return "address family is invalid"
	case AdmInvalPort:
		return "port value is invalid"
	case AdmInvalSrvID:
		return "server ID is invalid"
	case AdmInvalAddr:
		return "address is invalid"
	case AdmInvalArgs:
		return "invalid/incompatible keywords - refer to " + manRef()
	case AdmENOSGName:
		return "servergroup name missing"
	case AdmENORule:
		return "rule name missing or specified rule not found"
	case AdmENOServer:
		return "server name missing or specified server not found"
	case AdmInvalAlg:
		return "LB algorithm is invalid"
	case AdmENOProto:
		return "protocol does not exist in protocol database"
	case AdmENOService:
		return "servicename does not exist in nameservices"
	case AdmInvalOper:
		return "operation type is invalid"
	case AdmInvalKeyword:
		return "keyword is invalid - please refer to " + manRef()
	case AdmAssignReq:
		return "assignment '=' missing"
	case AdmNoRecursive:
		return "recursive import not allowed"
	case AdmInvalCommand:
		return "subcommand is invalid - please refer to " + manRef()
	case AdmENOProxy:
		return "proxy-src is missing"
	case AdmInvalProxy:
		return "proxy-src not allowed"
	case AdmENOOption:
		return "mandatory argument(s) missing - refer to " + manRef()
	case AdmTooManyIPAddr:
		return "address range contains more than 255 IP addresses"
	case AdmExportFail:
		return "could not export servergroup because of lack of space"
	case AdmInvalSyntax:
		return "syntax failure - refer to " + manRef()
	case AdmNoKeywordVal:
		return "missing value"
	case AdmLibErr:
		return "library error"
	}
	return "unknown error"
}

// Error returns the same text as String.
func (s AdmStatus) Error() string { return s.String() }

// CLIError is a failure the command prints: each line is printed as
// "ilbadm: " + line + "\n" on stderr, and the command exits with status 1.
type CLIError struct {
	Lines []string
}

// Error joins the lines with newlines (without the "ilbadm: " prefix).
func (e *CLIError) Error() string {
	if e == nil {
		return ""
	}
	return strings.Join(e.Lines, "\n")
}

// WriteTo prints every line as ilbadm_err does: "ilbadm: <line>\n".
func (e *CLIError) WriteTo(w io.Writer) (int64, error) {
	if e == nil {
		return 0, nil
	}
	var b strings.Builder
	for _, l := range e.Lines {
		b.WriteString("ilbadm: ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Errorf returns a one-line CLIError.
func Errorf(format string, a ...any) *CLIError {
	return &CLIError{Lines: []string{fmt.Sprintf(format, a...)}}
}

// lines returns a CLIError with the given lines.
func lines(l ...string) *CLIError { return &CLIError{Lines: l} }

// AdmError returns the one-line error "<text of s>", as ilbadm prints a bare ilbadm status.
func AdmError(s AdmStatus) *CLIError { return lines(s.String()) }

// StatusError returns the one-line error "<text of s>", as ilbadm prints a failed daemon request.
func StatusError(s Status) *CLIError { return lines(s.String()) }

// Messages of §3.3 that several subcommands share; the lead's ilbadm and this package both use them.

// ErrBadOption is "bad or misplaced option <arg>" (A/ilbadm.c unknown_opt).
func ErrBadOption(arg string) *CLIError { return Errorf("bad or misplaced option %s", arg) }

// ErrMissingOptArg is create-rule/create-sg/add-server/remove-server's "missing option-argument for <c>".
func ErrMissingOptArg(c byte) *CLIError { return Errorf("missing option-argument for %c", c) }

// ErrMissingOptArgShow is show-rule/show-server/show-servergroup's "missing option argument for <c>" (no hyphen).
func ErrMissingOptArgShow(c byte) *CLIError { return Errorf("missing option argument for %c", c) }

// ErrRuleNameTooLong is create-rule's name length error.
func ErrRuleNameTooLong(name string) *CLIError {
	return Errorf("rule name %s is too long - must not exceed %d chars", name, maxRuleName)
}

// ErrSGNameTooLong is create-servergroup's name length error.
func ErrSGNameTooLong(name string) *CLIError {
	return Errorf("servergroup name %s is too long - must not exceed %d chars", name, maxGroupName)
}

// ErrHCNameTooLong is create-healthcheck's name length error.
func ErrHCNameTooLong(name string) *CLIError {
	return Errorf("health check object name %s is too long - must not exceed %d chars", name, maxHCName)
}

// ErrCreateSGUsage is create-servergroup's missing-name message (two spaces before "description").
func ErrCreateSGUsage() *CLIError {
	return Errorf("missing mandatory arguments - please refer to 'create-servergroup' subcommand  description in %s", manRef())
}

// ErrAddServerUsage is add-server's missing-group message.
func ErrAddServerUsage() *CLIError {
	return Errorf("missing mandatory arguments - please refer to 'add-server' subcommand description in %s", manRef())
}

// ErrCreateRuleUsage is create-rule's missing-name message.
func ErrCreateRuleUsage() *CLIError {
	return Errorf("missing mandatory arguments - please refer to 'ilbadm create-rule' subcommand description in %s", manRef())
}
