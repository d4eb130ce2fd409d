package rules

import "strconv"

// Code is a failure of a configuration change. Its values are libilb's wire status codes
// (compat.Status), so the daemon can pass them to ilbadm unchanged; rules cannot import
// compat (compat imports rules), and api checks that the two lists agree.
type Code int

// The status codes that configuration changes produce (spec §3.2).
const (
	CodeInternal       Code = 1
	CodeEINVAL         Code = 2
	CodeENOENT         Code = 4
	CodeInUse          Code = 9
	CodeEEXIST         Code = 10
	CodeENOHCInfo      Code = 17
	CodeDupRule        Code = 20
	CodeENORule        Code = 21
	CodeMismatchSG     Code = 22
	CodeMismatchH      Code = 23
	CodeSGUnavail      Code = 24
	CodeSGInUse        Code = 25
	CodeSGExists       Code = 26
	CodeSGFull         Code = 27
	CodeSGEmpty        Code = 28
	CodeNameTooLong    Code = 29
	CodeCfgUpdate      Code = 31
	CodeBadSG          Code = 32
	CodeInvalSrvr      Code = 33
	CodeInvalEnbSrvr   Code = 34
	CodeBadPort        Code = 35
	CodeSrvUnavail     Code = 36
	CodeRuleNoHC       Code = 37
	CodeRuleHCMismatch Code = 38
)

// Error is a rejected configuration change.
type Error struct {
	Code Code
}

func (e *Error) Error() string { return "ilb status " + strconv.Itoa(int(e.Code)) }

func fail(c Code) error { return &Error{Code: c} }
