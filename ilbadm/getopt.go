package main

import "strings"

// getopt is POSIX getopt(3) as Solaris' ilbadm uses it: an optstring starting with ':'
// reports a missing argument as ':' and an unknown option as '?', parsing stops at the
// first operand or "--", and options may be clustered ("-ep").
type getopt struct {
	args   []string
	spec   string
	optind int // index of the next argument to look at
	pos    int // position inside a cluster, 0 when at the start of an argument
	optopt byte
	optarg string
}

// newGetopt parses args, where args[0] is the subcommand (like argv[0] for getopt(3)).
func newGetopt(args []string, spec string) *getopt {
	return &getopt{args: args, spec: strings.TrimPrefix(spec, ":"), optind: 1}
}

// next returns the next option character, ':' for a missing argument, '?' for an unknown
// option, or 0 at the end of the options.
func (g *getopt) next() byte {
	if g.pos == 0 {
		if g.optind >= len(g.args) {
			return 0
		}
		a := g.args[g.optind]
		if a == "--" {
			g.optind++
			return 0
		}
		if len(a) < 2 || a[0] != '-' {
			return 0
		}
		g.pos = 1
	}
	a := g.args[g.optind]
	c := a[g.pos]
	g.pos++
	g.optopt = c
	i := strings.IndexByte(g.spec, c)
	if c == ':' || i < 0 {
		g.advanceIfDone(a)
		return '?'
	}
	if i+1 < len(g.spec) && g.spec[i+1] == ':' {
		if g.pos < len(a) {
			g.optarg = a[g.pos:]
		} else if g.optind+1 < len(g.args) {
			g.optind++
			g.optarg = g.args[g.optind]
		} else {
			g.optind++
			g.pos = 0
			return ':'
		}
		g.optind++
		g.pos = 0
		return c
	}
	g.advanceIfDone(a)
	return c
}

func (g *getopt) advanceIfDone(a string) {
	if g.pos >= len(a) {
		g.optind++
		g.pos = 0
	}
}

// lastArg is argv[optind-1], which Solaris prints in "bad or misplaced option" messages
// (inside a cluster that is the previous argument: a quirk kept for byte compatibility).
func (g *getopt) lastArg() string {
	return g.args[g.optind-1]
}

// rest returns the operands after the options.
func (g *getopt) rest() []string { return g.args[g.optind:] }
