// Command ilbadm administers the Integrated Load Balancer with Oracle Solaris' syntax,
// output and messages, talking to ilbd over its control socket.
package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ilbgo/ilb/api"
	"github.com/ilbgo/ilb/compat"
	"github.com/ilbgo/ilb/rules"
)

// usageText is Solaris' usage message, verbatim (trailing blanks and the unbalanced ']'
// included), followed by the line of show-worker, an extension; each line's leading
// "ilbadm" is replaced by the program's base name.
//
//go:embed usage.txt
var usageText string

// env is what a subcommand runs with; tests give it buffers instead of the process' files.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	prog           string
	socket         string
	importing      bool // running a line of import-config
}

// errSilent reports failure whose messages were already printed.
var errSilent = errors.New("failed")

// fail prints each line of a CLI error with Solaris' prefix and returns errSilent.
func (e *env) fail(err error) error {
	if err == nil {
		return nil
	}
	var ce *compat.CLIError
	switch {
	case errors.As(err, &ce):
		for _, l := range ce.Lines {
			fmt.Fprintf(e.stderr, "ilbadm: %s\n", l)
		}
	case errors.Is(err, errSilent):
	default:
		fmt.Fprintf(e.stderr, "ilbadm: %s\n", err)
	}
	return errSilent
}

// failf prints one formatted message.
func (e *env) failf(format string, a ...any) error {
	return e.fail(compat.Errorf(format, a...))
}

// dial connects to ilbd; its failure prints "socket() failed" as on Solaris.
func (e *env) dial() (*api.Client, error) {
	c, err := api.Dial(e.socket)
	if err != nil {
		return nil, e.fail(err)
	}
	return c, nil
}

// config fetches ilbd's whole configuration for a show command (one connection).
func (e *env) config() (*rules.Config, error) {
	c, err := e.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cfg, err := c.Config()
	if err != nil {
		return nil, e.fail(err)
	}
	return cfg, nil
}

// lazyTable is an ofmt table opened at its first row, as Solaris' show commands do: the
// first row printed chooses the template (its address family sets the column widths), and
// a bad -o list is only reported when there is a row to print.
type lazyTable struct {
	e        *env
	fields   string // the -o list; "" for the defaults
	defaults string
	flags    compat.OfmtFlags
	out      *compat.Ofmt
}

// row prints one row, opening the table with template tmpl if this is the first.
func (t *lazyTable) row(tmpl []compat.Field, value func(field string) (string, bool)) error {
	if t.out == nil {
		out, cerr := compat.NewOfmt(t.e.stdout, tmpl, t.fields, t.defaults, t.flags, t.e.termRows())
		if cerr != nil {
			return t.e.fail(cerr)
		}
		t.out = out
	}
	t.out.Row(value)
	return nil
}

// eachNamed runs fn on every item of all when names is empty, else on each named item in
// the order given; an unknown name stops there with notFound, after the earlier items were
// printed, as Solaris' walks do.
func eachNamed[T any](e *env, all []T, names []string, find func(string) *T, notFound error, fn func(*T) error) error {
	if len(names) == 0 {
		for i := range all {
			if err := fn(&all[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		item := find(n)
		if item == nil {
			return e.fail(notFound)
		}
		if err := fn(item); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) usage() { e.printUsage(e.stderr) }

// printUsage writes Solaris' usage message to w.
func (e *env) printUsage(w io.Writer) {
	fmt.Fprint(w, strings.ReplaceAll("\n"+usageText, "\nilbadm ", "\n"+e.prog+" ")[1:])
}

// subcommandUsage returns the usage lines of one subcommand (its line and continuation lines
// of the usage message), with the program's name.
func (e *env) subcommandUsage(cmd *command) string {
	var out strings.Builder
	in := false
	for _, l := range strings.Split(usageText, "\n") {
		if strings.HasPrefix(l, "ilbadm ") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "ilbadm "), "|")
			in = name == cmd.name
			if in {
				l = e.prog + strings.TrimPrefix(l, "ilbadm")
			}
		} else if !strings.HasPrefix(l, "\t") {
			in = false
		}
		if in {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// help answers `ilbadm --help` and `ilbadm help [SUBCOMMAND]` (extensions: Solaris has only
// `-?`, which prints the usage on stderr and fails): the usage on stdout, status 0.
func (e *env) help(args []string) int {
	if len(args) == 0 {
		e.printUsage(e.stdout)
		return 0
	}
	cmd := lookup(args[0])
	if cmd == nil {
		e.fail(compat.Errorf("subcommand is invalid - please refer to ilbadm(%s)", compat.ManSection))
		return 1
	}
	fmt.Fprint(e.stdout, "Usage:\n"+e.subcommandUsage(cmd))
	return 0
}

// command is one subcommand: the Solaris name, its short alias and its implementation.
type command struct {
	name, alias string
	run         func(e *env, args []string) error
}

// commands lists the subcommands in Solaris' order. It is filled in init because
// import-config runs its lines through dispatch, which reads the table.
var commands []command

func init() {
	commands = []command{
		{"create-rule", "create-rl", createRule},
		{"delete-rule", "delete-rl", deleteRule},
		{"enable-rule", "enable-rl", enableRule},
		{"disable-rule", "disable-rl", disableRule},
		{"show-rule", "show-rl", showRule},
		{"create-servergroup", "create-sg", createServerGroup},
		{"delete-servergroup", "delete-sg", deleteServerGroup},
		{"show-servergroup", "show-sg", showServerGroup},
		{"add-server", "add-srv", addServer},
		{"remove-server", "remove-srv", removeServer},
		{"disable-server", "disable-srv", disableServer},
		{"enable-server", "enable-srv", enableServer},
		{"show-server", "show-srv", showServer},
		{"show-healthcheck", "show-hc", showHealthCheck},
		{"create-healthcheck", "create-hc", createHealthCheck},
		{"delete-healthcheck", "delete-hc", deleteHealthCheck},
		{"show-hc-result", "show-hc-res", showHCResult},
		{"export-config", "export-cf", exportConfig},
		{"import-config", "import-cf", importConfig},
		{"show-statistics", "show-stats", showStatistics},
		{"show-nat", "show-nat", showNAT},
		{"show-persist", "show-pt", showPersist},
		{"show-worker", "show-worker", showWorker}, // an extension: Solaris had no workers
	}
}

// lookup matches a subcommand name or alias case-insensitively, as Solaris does.
func lookup(name string) *command {
	for i := range commands {
		if strings.EqualFold(name, commands[i].name) || strings.EqualFold(name, commands[i].alias) {
			return &commands[i]
		}
	}
	return nil
}

func main() {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin,
		prog: filepath.Base(os.Args[0]), socket: api.SocketPath()}
	os.Exit(e.main(os.Args[1:]))
}

// main runs one ilbadm command line and returns the exit status.
func (e *env) main(args []string) int {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "help") {
		return e.help(args[1:])
	}
	// Global options first, as getopt(":V:?") does in Solaris' main.
	g := compat.NewGetopt(append([]string{e.prog}, args...), ":V:?")
	for c, ok := g.Next(); ok; c, ok = g.Next() {
		switch c {
		case 'V':
			e.version()
			return 0
		case ':':
			if g.Optopt == 'V' {
				// Bare -V: Solaris reports a misplaced option here; printing the version is a
				// listed fix (spec policy 3).
				e.version()
				return 0
			}
			fallthrough
		default:
			// Solaris' main prints only the usage for -? and for any unknown option.
			e.usage()
			return 1
		}
	}
	rest := g.Operands()
	if len(rest) == 0 {
		fmt.Fprintln(e.stderr, "ilbadm: the command line is incomplete (more arguments expected)")
		e.usage()
		return 1
	}
	if e.dispatch(rest) != nil {
		return 1
	}
	return 0
}

func (e *env) version() {
	fmt.Fprintf(e.stdout, "%s 1.0\nCopyright 2009 Sun Microsystems, Inc.  All rights reserved.\nUse is subject to license terms.\n", e.prog)
}

// dispatch runs a subcommand line (argv[0] is the subcommand) through the urfave/cli
// command table. Flag parsing is left to each command: Solaris' getopt grammar (clustered
// options, "-o" lists, operands) is not urfave's.
func (e *env) dispatch(argv []string) error {
	cmd := lookup(argv[0])
	if cmd == nil {
		return e.fail(compat.Errorf("subcommand is invalid - please refer to ilbadm(%s)", compat.ManSection))
	}
	app := &cli.App{
		Name:            e.prog,
		HideHelp:        true,
		HideVersion:     true,
		Writer:          e.stdout,
		ErrWriter:       e.stderr,
		ExitErrHandler:  func(*cli.Context, error) {},
		CommandNotFound: func(*cli.Context, string) {},
	}
	for i := range commands {
		c := &commands[i]
		var aliases []string
		if c.alias != c.name { // show-nat's "alias" is its own name
			aliases = []string{c.alias}
		}
		app.Commands = append(app.Commands, &cli.Command{
			Name:            c.name,
			Aliases:         aliases,
			SkipFlagParsing: true,
			HideHelp:        true,
			Action: func(ctx *cli.Context) error {
				// argv[0] stays as typed: Solaris names it in some messages.
				return c.run(e, append([]string{argv[0]}, ctx.Args().Slice()...))
			},
		})
	}
	return app.Run(append([]string{e.prog, cmd.name}, argv[1:]...))
}
