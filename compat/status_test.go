package compat

import (
	"bytes"
	"testing"
)

func TestStatusStrings(t *testing.T) {
	// Spec §3.2, in wire order 0..39.
	want := []string{
		"no error",
		"error internal to the library",
		"invalid argument(s) - see man page",
		"not enough memory for operation",
		"no such/no more element(s)",
		"socket() failed",
		"read() failed",
		"fflush() or send() failed",
		"health check timer create/setup error",
		"object is in use, cannot destroy",
		"object already exists",
		"no scf permit",
		"scf callback error",
		"unknown error",
		"operation is progress",
		"send() failed",
		"unknown error",
		"missing healthcheck info",
		"invalid  health check test type",
		"invalid command",
		"specified rule name already exists",
		"specified rule does not exist",
		"address family mismatch with servergroup",
		"address family mismatch with previous hosts in servergroup or with rule",
		"cannot find specified server group",
		"cannot remove server group - its in use with other active rules",
		"servergroup already exists",
		"servergroup is full - cannot add any more servers to this servergroup",
		"servergroup does not contain any servers",
		"servergroup name can only contain a maximum of 14 characters",
		"user is not authorized to execute command",
		"a failure occurred while trying to update persistent config. Panic?",
		"the rule's port range does not match that of the servers' in associated servergroup",
		"server cannot be added to the servergroup, as the servergroup is associated to rule(s) with port/port range that is incompatiblewith the server's port",
		"server cannot be enabled because it's not associated with any rule",
		"the rule's port value does not match that of the servers' in associated servergroup",
		"cannot find specified server",
		"rule does not have health check enabled",
		"protocol used in rule and health check does not match",
		"handle is being closed",
	}
	for i, w := range want {
		s := Status(i)
		if s.String() != w || s.Error() != w {
			t.Errorf("Status(%d) = %q, want %q", i, s.String(), w)
		}
	}
	if StatusHandleClosing != 39 || StatusSGEmpty != 28 || StatusBadPort != 35 {
		t.Errorf("status numbering is off")
	}
	for _, s := range []Status{-1, 40, 1000} {
		if s.String() != "unknown error" {
			t.Errorf("Status(%d) = %q", int(s), s.String())
		}
	}
}

func TestAdmStatusStrings(t *testing.T) {
	tests := []struct {
		s    AdmStatus
		want string
	}{
		{AdmOK, "no error"},
		{AdmFail, "processing of command failed"},
		{AdmENOMEM, "memory allocation failure"},
		{AdmEINVAL, "invalid value  - refer to ilbadm(1M)"},
		{AdmHCPrint, "failed to print healthcheck values"},
		{AdmInvalAF, "address family is invalid"},
		{AdmInvalPort, "port value is invalid"},
		{AdmInvalSrvID, "server ID is invalid"},
		{AdmInvalAddr, "address is invalid"},
		{AdmInvalArgs, "invalid/incompatible keywords - refer to ilbadm(1M)"},
		{AdmENOSGName, "servergroup name missing"},
		{AdmENORule, "rule name missing or specified rule not found"},
		{AdmENOServer, "server name missing or specified server not found"},
		{AdmInvalAlg, "LB algorithm is invalid"},
		{AdmENOProto, "protocol does not exist in protocol database"},
		{AdmENOService, "servicename does not exist in nameservices"},
		{AdmInvalOper, "operation type is invalid"},
		{AdmInvalKeyword, "keyword is invalid - please refer to ilbadm(1M)"},
		{AdmAssignReq, "assignment '=' missing"},
		{AdmNoRecursive, "recursive import not allowed"},
		{AdmInvalCommand, "subcommand is invalid - please refer to ilbadm(1M)"},
		{AdmENOProxy, "proxy-src is missing"},
		{AdmInvalProxy, "proxy-src not allowed"},
		{AdmENOOption, "mandatory argument(s) missing - refer to ilbadm(1M)"},
		{AdmTooManyIPAddr, "address range contains more than 255 IP addresses"},
		{AdmExportFail, "could not export servergroup because of lack of space"},
		{AdmInvalSyntax, "syntax failure - refer to ilbadm(1M)"},
		{AdmNoKeywordVal, "missing value"},
		{AdmLibErr, "library error"},
		{AdmStatus(99), "unknown error"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("AdmStatus(%d) = %q, want %q", int(tt.s), got, tt.want)
		}
	}
}

func TestManSection(t *testing.T) {
	defer func(s string) { ManSection = s }(ManSection)
	ManSection = "8"
	if got, want := AdmEINVAL.String(), "invalid value  - refer to ilbadm(8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := ErrCreateSGUsage().Error(), "missing mandatory arguments - please refer to 'create-servergroup' subcommand  description in ilbadm(8)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCLIErrorWriteTo(t *testing.T) {
	e := &CLIError{Lines: []string{"invalid port value 70000 specified", "port: library error"}}
	var b bytes.Buffer
	e.WriteTo(&b)
	if got, want := b.String(), "ilbadm: invalid port value 70000 specified\nilbadm: port: library error\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := e.Error(), "invalid port value 70000 specified\nport: library error"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Errorf("bad keyword %s", "foo").Lines; len(got) != 1 || got[0] != "bad keyword foo" {
		t.Errorf("Errorf = %q", got)
	}
	var nilErr *CLIError
	if nilErr.Error() != "" {
		t.Errorf("nil CLIError")
	}
}
