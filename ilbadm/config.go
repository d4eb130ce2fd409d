package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// exportConfig: ilbadm export-config [filename] — the configuration as ilbadm command
// lines, on stdout or into filename. A file is replaced atomically: the lines go to a
// temporary file beside it (mkstemp "<filename>XXXXXX" on Solaris) that is renamed over
// it once complete, and removed on any failure. Arguments after the first are ignored,
// as on Solaris.
func exportConfig(e *env, args []string) error {
	if e.importing {
		return e.failf("export from import file not allowed")
	}
	if len(args) < 2 {
		cfg, err := e.config()
		if err != nil {
			return err
		}
		if _, err := io.WriteString(e.stdout, exportText(cfg)); err != nil {
			return e.fail(compat.StatusWrite)
		}
		return nil
	}

	name := args[1]
	// As on Solaris the working file comes first, then ilbd is asked.
	tmp, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+"*")
	if err != nil {
		return e.failf("cannot create working file")
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	cfg, err := e.config()
	if err != nil {
		return err
	}
	// The data is synced before the rename so that a crash leaves the old file or the
	// whole new one.
	if _, err := io.WriteString(tmp, exportText(cfg)); err != nil {
		return e.fail(compat.StatusWrite)
	}
	if err := tmp.Sync(); err != nil {
		return e.fail(compat.StatusWrite)
	}
	if err := tmp.Close(); err != nil {
		return e.fail(compat.StatusWrite)
	}
	// rename(2) itself, not os.Rename, which refuses a directory target with its own
	// EEXIST before the system can say "Is a directory".
	if err := syscall.Rename(tmp.Name(), name); err != nil {
		return e.failf("cannot create %s: %s", name, strerror(err))
	}
	renamed = true
	return nil
}

// strerror renders a system error as strerror(3C) does ("Is a directory"); Go's texts
// are the same but start in lower case.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	s := errno.Error()
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// exportText is the export format (spec §4.1): server groups with their servers, then
// health checks, then rules, each in creation order, one command per line without the
// leading "ilbadm".
func exportText(cfg *rules.Config) string {
	var b strings.Builder
	for i := range cfg.Groups {
		exportGroup(&b, &cfg.Groups[i])
	}
	for i := range cfg.HealthChecks {
		exportHealthCheck(&b, &cfg.HealthChecks[i])
	}
	for i := range cfg.Rules {
		exportRule(&b, &cfg.Rules[i])
	}
	return b.String()
}

// exportGroup prints a group and its servers (A/ilbadm_sg.c ilbadm_export_sg): servers
// in the group's (ascending address) order, IPv6 in brackets, ports numeric.
func exportGroup(b *strings.Builder, g *rules.ServerGroup) {
	fmt.Fprintf(b, "create-servergroup %s\n", g.Name)
	for _, s := range g.Servers {
		addr := compat.FormatAddr(s.Addr)
		if s.Addr.Is6() {
			addr = "[" + addr + "]"
		}
		switch {
		case s.MinPort == 0:
		case s.MaxPort <= s.MinPort:
			addr += fmt.Sprintf(":%d", s.MinPort)
		default:
			addr += fmt.Sprintf(":%d-%d", s.MinPort, s.MaxPort)
		}
		fmt.Fprintf(b, "add-server -s server=%s %s\n", addr, g.Name)
	}
}

// exportHealthCheck prints a health check (A/ilbadm_hc.c ilbadm_export_hcinfo). "-n "
// is printed when the default ping is off, except for PING, which implies it.
// Solaris leaves out a zero hc-timeout or hc-count, which the import then replaces by
// the default (5 and 3) and so changes or refuses the check; they are always printed
// here (a listed fix). hc-interval cannot be zero.
func exportHealthCheck(b *strings.Builder, hc *rules.HealthCheck) {
	b.WriteString("create-healthcheck ")
	if !hc.DefPing && !strings.EqualFold(hc.Test, "PING") {
		b.WriteString("-n ")
	}
	fmt.Fprintf(b, "-h hc-test=%s,hc-timeout=%d,hc-count=%d", hc.Test, hc.Timeout, hc.Count)
	if hc.Interval != 0 {
		fmt.Fprintf(b, ",hc-interval=%d", hc.Interval)
	}
	fmt.Fprintf(b, " %s\n", hc.Name)
}

// exportRule prints a rule (A/ilbadm_rules.c ilbadm_export_rl). The timers are those
// ilbd reports, kernel defaults included, as Solaris exports them.
func exportRule(b *strings.Builder, r *rules.Rule) {
	b.WriteString("create-rule ")
	if r.Enabled {
		b.WriteString("-e ")
	}
	if r.Sticky {
		b.WriteString("-p ")
	}
	fmt.Fprintf(b, "-i vip=%s,", compat.FormatAddr(r.VIP))
	// Solaris prints "port=0," for a rule without port, which the import refuses; leaving
	// the key out means the same rule (a listed fix). Solaris also prints the ports as
	// signed shorts, so ports above 32767 came out negative (fixed as well).
	switch {
	case r.MinPort == 0:
	case r.MaxPort <= r.MinPort:
		fmt.Fprintf(b, "port=%d,", r.MinPort)
	default:
		fmt.Fprintf(b, "port=%d-%d,", r.MinPort, r.MaxPort)
	}
	if p := compat.ProtocolDBName(r.Proto); p != "" {
		fmt.Fprintf(b, "protocol=%s ", p)
	} else {
		fmt.Fprintf(b, "(bad proto %d) ", r.Proto)
	}
	fmt.Fprintf(b, "-m lbalg=%s,type=%s", orBad(compat.AlgoName(r.Algo), "(bad algo)"), orBad(compat.TopoName(r.Topo), "(bad type)"))
	if r.ProxySrcStart.IsValid() {
		if s := compat.FormatAddr(r.ProxySrcStart); s != "" {
			fmt.Fprintf(b, ",proxy-src=%s-%s", s, compat.FormatAddr(r.ProxySrcEnd))
		}
	}
	if r.Sticky {
		fmt.Fprintf(b, ",pmask=/%d", r.PMaskBits)
	}
	b.WriteString(" ")
	if r.HCName != "" {
		fmt.Fprintf(b, "-h hc-name=%s", r.HCName)
		if r.HCPort != 0 {
			fmt.Fprintf(b, ",hc-port=%d", r.HCPort)
		} else {
			b.WriteString(",hc-port=ANY")
		}
		b.WriteString(" ")
	}
	var timers []string
	if r.ConnDrain != 0 {
		timers = append(timers, fmt.Sprintf("conn-drain=%d", r.ConnDrain))
	}
	if t := rules.EffectiveNATTimeout(r) / time.Second; t != 0 {
		timers = append(timers, fmt.Sprintf("nat-timeout=%d", t))
	}
	if t := rules.EffectivePersistTimeout(r) / time.Second; t != 0 {
		timers = append(timers, fmt.Sprintf("persist-timeout=%d", t))
	}
	if len(timers) > 0 {
		fmt.Fprintf(b, "-t %s ", strings.Join(timers, ","))
	}
	fmt.Fprintf(b, "-o servergroup=%s %s\n", r.ServerGroup, r.Name)
}

// orBad returns s, or bad when s is empty.
func orBad(s, bad string) string {
	if s == "" {
		return bad
	}
	return s
}

// importConfig: ilbadm import-config [-p] [filename] — runs every command of the file
// (stdin without filename) exactly as if typed after "ilbadm", stopping at the first
// failure; earlier commands stay applied, as on Solaris. Without -p the whole
// configuration is deleted first. -p is only recognised as the very first argument
// (Solaris' main compares argv[2] with "-p"); other options are taken as the file name.
func importConfig(e *env, args []string) error {
	if e.importing {
		return e.fail(compat.AdmError(compat.AdmNoRecursive))
	}
	rest := args[1:]
	preserve := len(rest) > 0 && rest[0] == "-p"
	if preserve {
		rest = rest[1:]
	}
	in := e.stdin
	if len(rest) > 0 {
		f, err := os.Open(rest[0])
		if err == nil {
			// Solaris opens a directory and reads nothing from it, so it "imports" an
			// empty configuration; it cannot be read, so it is refused here.
			if st, serr := f.Stat(); serr != nil || st.IsDir() {
				f.Close()
				err = syscall.EISDIR
			}
		}
		if err != nil {
			e.failf("file %s cannot be opened for reading", rest[0])
			e.usage()
			return errSilent
		}
		defer f.Close()
		in = f
	}

	if !preserve {
		c, err := e.dial()
		if err != nil {
			return err
		}
		err = resetConfig(c)
		c.Close()
		// Solaris ignores a failed reset and imports on top of the old configuration;
		// reporting it keeps "exit status 0" meaning "the file's configuration is in
		// place".
		if err != nil {
			return e.fail(err)
		}
	}

	e.importing = true
	defer func() { e.importing = false }()
	r := bufio.NewReader(in)
	for {
		argv, err := nextImportCommand(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return e.failf("cannot import file for reading")
		}
		if err := e.dispatch(argv); err != nil {
			return errSilent
		}
	}
}

// resetConfig deletes the whole configuration as libilb's ilb_reset_config does: every
// rule, then each group's servers and the group, then every health check. Objects that
// another client removes meanwhile are not an error.
func resetConfig(c *api.Client) error {
	if err := c.DeleteRule(""); err != nil && !errors.Is(err, compat.StatusENORule) {
		return err
	}
	cfg, err := c.Config()
	if err != nil {
		return err
	}
	gone := func(err error) bool {
		return err == nil || errors.Is(err, compat.StatusSGUnavail) ||
			errors.Is(err, compat.StatusSrvUnavail) || errors.Is(err, compat.StatusENOENT)
	}
	for _, g := range cfg.Groups {
		for _, s := range g.Servers {
			if err := c.RemoveServer(g.Name, s.ID); !gone(err) {
				return err
			}
		}
		if err := c.DeleteServerGroup(g.Name); !gone(err) {
			return err
		}
	}
	for _, hc := range cfg.HealthChecks {
		if err := c.DeleteHealthCheck(hc.Name); !gone(err) {
			return err
		}
	}
	return nil
}

// isImportBlank reports the characters that separate words of an import line (the
// strsep delimiters of i_getln_to_argv).
func isImportBlank(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }

// nextImportCommand reads the next command of an import file and returns its words,
// or io.EOF at the end. Words are separated by blanks, with no quoting, as on Solaris.
// Unlike Solaris (spec policy 3; a listed fix): blank lines are skipped instead of
// silently ending the import, a line whose first word starts with '#' is a comment
// even after leading blanks, a line whose last word is a lone '\' continues on the
// next line (which Solaris intended but, keeping the newline, hardly ever did; a
// blank line ends a continued command), and lines may be of any length.
func nextImportCommand(r *bufio.Reader) ([]string, error) {
	var argv []string
	continued := false
	for {
		line, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if line == "" && err != nil {
			if len(argv) > 0 {
				return argv, nil // end of file after a continuation
			}
			return nil, io.EOF
		}
		words := strings.FieldsFunc(line, isImportBlank)
		switch {
		case len(words) == 0 && continued && len(argv) > 0:
			return argv, nil
		case len(words) == 0 || strings.HasPrefix(words[0], "#"):
			if err != nil {
				return finish(argv)
			}
			continue
		}
		continued = words[len(words)-1] == `\`
		if continued {
			words = words[:len(words)-1]
		}
		argv = append(argv, words...)
		if err != nil || (!continued && len(argv) > 0) {
			return finish(argv)
		}
	}
}

// finish returns a command read so far, or io.EOF when there is none.
func finish(argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, io.EOF
	}
	return argv, nil
}
