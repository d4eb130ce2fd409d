package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The bash completion script, sourced by bash: subcommands, option keys, and the names of
// rules, server groups and health checks asked of a running daemon through the real ilbadm.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	bin := filepath.Join(t.TempDir(), "ilbadm")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go") // make test may run go by its path
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building ilbadm: %v\n%s", err, out)
	}
	sock := daemon(t)
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=192.0.2.11 websg"},
		{line: "create-healthcheck -h hc-test=tcp hc1"},
		{line: "create-rule -e -i vip=203.0.113.10,port=80 -m lbalg=rr,type=HALF-NAT -o servergroup=websg webtcp"},
	})
	script, err := filepath.Abs("../dist/ilbadm.bash-completion")
	if err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "\n_ilbadm\necho \"${COMPREPLY[*]}\"\n"
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Env = append(os.Environ(), "ILB_SOCKET="+sock, "_ilbadm_cmd="+bin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"ilbadm", "show-r"}, "show-rule show-rl"},
		{[]string{"ilbadm", "create-rule", "-i", "v"}, "vip="},
		{[]string{"ilbadm", "create-rule", "-m", "lbalg=rr,t"}, "lbalg=rr,type="},
		{[]string{"ilbadm", "show-rule", "w"}, "webtcp"},
		{[]string{"ilbadm", "show-rule", "-"}, "-e -d -f -p -o"},
		{[]string{"ilbadm", "delete-sg", ""}, "websg"},
		{[]string{"ilbadm", "add-server", "-s", "s"}, "server="},
		{[]string{"ilbadm", "show-hc", "h"}, "hc1"},
		{[]string{"ilbadm", "show-stats", "-r", "w"}, "webtcp"},
		{[]string{"ilbadm", "help", "show-w"}, "show-worker"},
	} {
		if got := complete(c.words...); got != c.want {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
}
