package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// specExampleSetup builds the configuration of the spec's §4.1 export example; the
// external probe lives in dir instead of /opt/ilb.
func specExampleSetup(t *testing.T, sock, probe string) {
	t.Helper()
	runSteps(t, sock, []step{
		{line: "create-servergroup -s server=10.0.0.12:http,10.0.0.11:80 websg"},
		{line: "create-servergroup v6sg"},
		{line: "add-server -s server=[2001:db8::11] v6sg"},
		{line: "create-healthcheck -h hc-test=tcp hc1"},
		{line: "create-healthcheck -n -h hc-test=" + probe + ",hc-timeout=3,hc-count=2,hc-interval=10 hc2"},
		{line: "create-rule -e -i vip=192.0.2.10,port=80 -m lbalg=rr,type=NAT,proxy-src=10.0.0.1-10.0.0.2 -h hc-name=hc1 -o servergroup=websg web"},
		{line: "create-rule -e -p -i vip=[2001:db8::10],port=80 -m lbalg=hip,type=dsr -o sg=v6sg web6"},
	})
}

// specExampleExport is the spec's §4.1 example, with the probe's path as a placeholder.
const specExampleExport = `create-servergroup websg
add-server -s server=10.0.0.11:80 websg
add-server -s server=10.0.0.12:80 websg
create-servergroup v6sg
add-server -s server=[2001:db8::11] v6sg
create-healthcheck -h hc-test=tcp,hc-timeout=5,hc-count=3,hc-interval=30 hc1
create-healthcheck -n -h hc-test=PROBE,hc-timeout=3,hc-count=2,hc-interval=10 hc2
create-rule -e -i vip=192.0.2.10,port=80,protocol=tcp -m lbalg=roundrobin,type=NAT,proxy-src=10.0.0.1-10.0.0.2 -h hc-name=hc1,hc-port=ANY -t nat-timeout=120 -o servergroup=websg web
create-rule -e -p -i vip=2001:db8::10,port=80,protocol=tcp -m lbalg=hash-ip,type=DSR,pmask=/128 -t persist-timeout=60 -o servergroup=v6sg web6
`

func TestExportConfig(t *testing.T) {
	sock := daemon(t)
	dir := t.TempDir()
	probe := writeProbe(t, dir)
	want := strings.ReplaceAll(specExampleExport, "PROBE", probe)
	runSteps(t, sock, []step{{line: "export-config"}}) // empty configuration: nothing
	specExampleSetup(t, sock, probe)
	runSteps(t, sock, []step{
		{line: "export-config", stdout: want},
		{line: "EXPORT-CF", stdout: want},
	})

	// Into a file: replaced atomically, nothing else left in the directory.
	out := filepath.Join(dir, "ilb.conf")
	if err := os.WriteFile(out, []byte("old contents\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runSteps(t, sock, []step{{line: "export-config " + out + " ignored-extra-argument"}})
	if got, err := os.ReadFile(out); err != nil || string(got) != want {
		t.Errorf("exported file: %q %v", got, err)
	}
	assertDirHolds(t, dir, "ilb.conf", "probe.sh")

	// The file cannot replace a directory: Solaris' message, the working file removed.
	sub := filepath.Join(dir, "subdir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	runSteps(t, sock, []step{
		{line: "export-config " + sub, status: 1, stderr: "ilbadm: cannot create " + sub + ": Is a directory\n"},
		{line: "export-config " + filepath.Join(dir, "no", "such", "dir"), status: 1, stderr: "ilbadm: cannot create working file\n"},
	})
	assertDirHolds(t, dir, "ilb.conf", "probe.sh", "subdir")

	// Without ilbd: nothing is written, the old file stays.
	dead := filepath.Join(t.TempDir(), "none.sock")
	runSteps(t, dead, []step{
		{line: "export-config " + out, status: 1, stderr: "ilbadm: socket() failed\n"},
		{line: "export-config", status: 1, stderr: "ilbadm: socket() failed\n"},
	})
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Errorf("failed export changed the file: %q", got)
	}
	assertDirHolds(t, dir, "ilb.conf", "probe.sh", "subdir")
}

// assertDirHolds checks that dir contains exactly the named entries (no working files).
func assertDirHolds(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// A configuration with every feature the export format carries.
var roundTripSetup = []string{
	"create-servergroup -s server=192.0.2.11-192.0.2.13:8080-8089 v4range",
	"create-servergroup -s server=192.0.2.21:80,192.0.2.22:80 v4single",
	"create-servergroup -s server=[2001:db8::21]-[2001:db8::23],[2001:db8::1:5]:443 v6sg",
	"create-servergroup -s server=198.51.100.5,198.51.100.6 noports",
	"create-servergroup empty",
	"create-healthcheck -h hc-test=tcp,hc-timeout=2,hc-count=1,hc-interval=10 hctcp",
	"create-healthcheck -h hc-test=UDP hcudp",
	"create-healthcheck -h hc-test=PING,hc-timeout=0,hc-count=0,hc-interval=1 hcping",
	"create-healthcheck -n -h hc-test=PROBE,hc-timeout=3,hc-count=2,hc-interval=10 hcext",
	"create-rule -e -i vip=203.0.113.1,port=5000-5009,protocol=tcp -m lbalg=hash-ip-port,type=NAT,proxy-src=10.1.0.1-10.1.0.10 -h hc-name=hctcp,hc-port=8085 -t conn-drain=180,nat-timeout=300 -o servergroup=v4range natrange",
	"create-rule -p -i vip=203.0.113.1,port=5000-5009,protocol=udp -m lbalg=hash-ip-vip,type=HALF-NAT,pmask=24 -h hc-name=hcudp -o servergroup=v4range stickyudp",
	"create-rule -e -i vip=203.0.113.2,port=80 -m lbalg=hip,type=DSR -h hc-name=HCPING -t persist-timeout=30 -o servergroup=v4single dsr",
	"create-rule -e -p -i vip=2001:db8::100,port=443 -m lbalg=rr,type=NAT,proxy-src=[2001:db8::f0]-[2001:db8::f3],pmask=/64 -h hc-name=hcext -t nat-timeout=10 -o sg=v6sg nat6",
	"create-rule -i vip=2001:db8::101,port=443,protocol=UDP -m lbalg=hash-ip,type=DSR -o sg=v6sg dsr6",
	"create-rule -e -i vip=203.0.113.3 -m type=h -o servergroup=noports allports",
	"create-rule -e -p -i vip=203.0.113.4,port=40000-40010 -m lbalg=hipv,type=h -o servergroup=noports highports",
	"disable-rule dsr",
}

// export -> import into an empty daemon -> export is byte-identical.
func TestExportImportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	probe := writeProbe(t, dir)
	src := daemon(t)
	for _, l := range roundTripSetup {
		runSteps(t, src, []step{{line: strings.ReplaceAll(l, "PROBE", probe)}})
	}
	first, errs, status := ilbadm(src, "export-config")
	if errs != "" || status != 0 {
		t.Fatalf("export: %q %d", errs, status)
	}
	// The export as Solaris writes it (review of the format: kernel-default timers added
	// to NAT/HALF-NAT and sticky rules, ports numeric, IPv6 servers bracketed, VIPs
	// not), except for the rule without a port, which has no "port=0". The DSR rule's
	// persist-timeout=30 stays although the rule is not sticky: ilbd reports what was
	// configured, and only substitutes defaults for zero.
	want := strings.ReplaceAll(`create-servergroup v4range
add-server -s server=192.0.2.11:8080-8089 v4range
add-server -s server=192.0.2.12:8080-8089 v4range
add-server -s server=192.0.2.13:8080-8089 v4range
create-servergroup v4single
add-server -s server=192.0.2.21:80 v4single
add-server -s server=192.0.2.22:80 v4single
create-servergroup v6sg
add-server -s server=[2001:db8::21] v6sg
add-server -s server=[2001:db8::22] v6sg
add-server -s server=[2001:db8::23] v6sg
add-server -s server=[2001:db8::1:5]:443 v6sg
create-servergroup noports
add-server -s server=198.51.100.5 noports
add-server -s server=198.51.100.6 noports
create-servergroup empty
create-healthcheck -h hc-test=tcp,hc-timeout=2,hc-count=1,hc-interval=10 hctcp
create-healthcheck -h hc-test=UDP,hc-timeout=5,hc-count=3,hc-interval=30 hcudp
create-healthcheck -h hc-test=PING,hc-timeout=0,hc-count=0,hc-interval=1 hcping
create-healthcheck -n -h hc-test=PROBE,hc-timeout=3,hc-count=2,hc-interval=10 hcext
create-rule -e -i vip=203.0.113.1,port=5000-5009,protocol=tcp -m lbalg=hash-ip-port,type=NAT,proxy-src=10.1.0.1-10.1.0.10 -h hc-name=hctcp,hc-port=8085 -t conn-drain=180,nat-timeout=300 -o servergroup=v4range natrange
create-rule -p -i vip=203.0.113.1,port=5000-5009,protocol=udp -m lbalg=hash-ip-vip,type=HALF-NAT,pmask=/24 -h hc-name=hcudp,hc-port=ANY -t nat-timeout=60,persist-timeout=60 -o servergroup=v4range stickyudp
create-rule -i vip=203.0.113.2,port=80,protocol=tcp -m lbalg=hash-ip,type=DSR -h hc-name=HCPING,hc-port=ANY -t persist-timeout=30 -o servergroup=v4single dsr
create-rule -e -p -i vip=2001:db8::100,port=443,protocol=tcp -m lbalg=roundrobin,type=NAT,proxy-src=2001:db8::f0-2001:db8::f3,pmask=/64 -h hc-name=hcext,hc-port=ANY -t nat-timeout=10,persist-timeout=60 -o servergroup=v6sg nat6
create-rule -i vip=2001:db8::101,port=443,protocol=udp -m lbalg=hash-ip,type=DSR -o servergroup=v6sg dsr6
create-rule -e -i vip=203.0.113.3,protocol=tcp -m lbalg=roundrobin,type=HALF-NAT -t nat-timeout=120 -o servergroup=noports allports
create-rule -e -p -i vip=203.0.113.4,port=40000-40010,protocol=tcp -m lbalg=hash-ip-vip,type=HALF-NAT,pmask=/32 -t nat-timeout=120,persist-timeout=60 -o servergroup=noports highports
`, "PROBE", probe)
	if first != want {
		t.Errorf("export:\n%s\nwant:\n%s", first, want)
	}
	file := filepath.Join(dir, "exported")
	runSteps(t, src, []step{{line: "export-config " + file}})
	dst := daemon(t)
	runSteps(t, dst, []step{{line: "import-config " + file}})
	second, _, _ := ilbadm(dst, "export-config")
	if second != first {
		t.Errorf("export after import differs:\n%s\nfirst:\n%s", second, first)
	}
	// The listings agree too (server IDs are given in address order by both).
	for _, show := range []string{"show-rule -f", "show-servergroup", "show-server", "show-hc"} {
		a, _, _ := ilbadm(src, show)
		b, _, _ := ilbadm(dst, show)
		if a != b {
			t.Errorf("%s after import:\n%s\nbefore:\n%s", show, b, a)
		}
	}
}

// writeFile writes an import file into dir.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// usageOut is the usage text as ilbadm prints it.
func usageOut() string {
	var b strings.Builder
	(&env{stderr: &b, prog: "ilbadm"}).usage()
	return b.String()
}

func TestImportConfig(t *testing.T) {
	sock := daemon(t)
	dir := t.TempDir()
	probe := writeProbe(t, dir)
	exported := strings.ReplaceAll(specExampleExport, "PROBE", probe)
	file := writeFile(t, dir, "exported", exported)
	old := []step{
		{line: "create-servergroup -s server=198.51.100.1 oldsg"},
		{line: "create-hc -h hc-test=udp oldhc"},
		{line: "create-rule -e -i vip=198.51.100.100,port=53,protocol=udp -m type=DSR -h hc-name=oldhc -o sg=oldsg oldrule"},
	}
	oldExport := `create-servergroup oldsg
add-server -s server=198.51.100.1 oldsg
create-healthcheck -h hc-test=udp,hc-timeout=5,hc-count=3,hc-interval=30 oldhc
create-rule -e -i vip=198.51.100.100,port=53,protocol=udp -m lbalg=roundrobin,type=DSR -h hc-name=oldhc,hc-port=ANY -o servergroup=oldsg oldrule
`
	// Without -p the old configuration goes first (rules, groups, health checks).
	runSteps(t, sock, old)
	runSteps(t, sock, []step{
		{line: "import-config " + file},
		{line: "export-config", stdout: exported},
	})
	// With -p it stays and the file is added to it; the alias works too.
	runSteps(t, sock, []step{{line: "import-config " + file}}) // idempotent: reset first
	runSteps(t, sock, []step{{line: "delete-rule -a"}, {line: "delete-sg websg"}, {line: "delete-sg v6sg"},
		{line: "delete-hc hc1 hc2"}})
	runSteps(t, sock, old)
	runSteps(t, sock, []step{
		{line: "IMPORT-CF -p " + file},
		{line: "export-config", stdout: strings.Join(interleave(oldExport, exported), "")},
	})
	// -p is an option only as the very first argument: here the file is imported
	// without it (and the "-p" after it is ignored).
	runSteps(t, sock, []step{
		{line: "import-config " + file + " -p"},
		{line: "export-config", stdout: exported},
	})
	// stdin without a file name, with and without -p.
	runSteps(t, sock, []step{{line: "delete-rule -a"}, {line: "delete-sg websg"}, {line: "delete-sg v6sg"}})
	if out, errs, st := ilbadmIn(sock, "import-config -p", "create-servergroup fromstdin\n"); out != "" || errs != "" || st != 0 {
		t.Errorf("import -p from stdin: %q %q %d", out, errs, st)
	}
	if out, _, _ := ilbadm(sock, "export-config"); out != "create-servergroup fromstdin\n"+
		strings.Join(strings.SplitAfter(exported, "\n")[5:7], "") {
		t.Errorf("after import -p from stdin:\n%s", out)
	}
	if out, errs, st := ilbadmIn(sock, "import-config", exported); out != "" || errs != "" || st != 0 {
		t.Errorf("import from stdin: %q %q %d", out, errs, st)
	}
	runSteps(t, sock, []step{{line: "export-config", stdout: exported}})
}

// interleave returns the export of two configurations merged: groups, then health
// checks, then rules of a followed by those of b.
func interleave(a, b string) []string {
	var groups, hcs, rls []string
	for _, text := range []string{a, b} {
		for _, l := range strings.SplitAfter(text, "\n") {
			switch {
			case strings.HasPrefix(l, "create-servergroup"), strings.HasPrefix(l, "add-server"):
				groups = append(groups, l)
			case strings.HasPrefix(l, "create-healthcheck"):
				hcs = append(hcs, l)
			case strings.HasPrefix(l, "create-rule"):
				rls = append(rls, l)
			}
		}
	}
	return append(append(groups, hcs...), rls...)
}

func TestImportConfigErrors(t *testing.T) {
	sock := daemon(t)
	dir := t.TempDir()
	usage := usageOut()
	missing := filepath.Join(dir, "missing")
	runSteps(t, sock, []step{
		{line: "create-servergroup keep"},
		{line: "import-config " + missing, status: 1,
			stderr: "ilbadm: file " + missing + " cannot be opened for reading\n" + usage},
		// A directory opens on Solaris but cannot be read.
		{line: "import-config -p " + dir, status: 1,
			stderr: "ilbadm: file " + dir + " cannot be opened for reading\n" + usage},
		// Any other first argument is the file name.
		{line: "import-config -x " + missing, status: 1,
			stderr: "ilbadm: file -x cannot be opened for reading\n" + usage},
		// None of these touched the configuration.
		{line: "show-sg", stdout: "SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\nkeep           --                  --      --      --\n"},
	})

	// The first failing line stops the import with the same message as on the command
	// line; earlier lines stay applied (no rollback), later ones are not run.
	for _, tc := range []struct {
		name, text, stdout, stderr, export string
	}{
		{"bad server", "create-sg sg1\nshow-sg\nadd-server -s server=2001:db8::1 sg1\ncreate-sg sg2\n",
			"SGNAME         SERVERID            MINPORT MAXPORT IP_ADDRESS\nsg1            --                  --      --      --\n",
			"ilbadm: server: syntax failure - refer to ilbadm(1M)\n", "create-servergroup sg1\n"},
		{"daemon refusal", "create-sg sg1\ncreate-sg sg1\ncreate-sg sg2\n", "",
			"ilbadm: servergroup already exists\n", "create-servergroup sg1\n"},
		{"unknown subcommand", "create-sg sg1\nfrobnicate x\ncreate-sg sg2\n", "",
			"ilbadm: subcommand is invalid - please refer to ilbadm(1M)\n", "create-servergroup sg1\n"},
		{"global option", "-V x\ncreate-sg sg2\n", "",
			"ilbadm: subcommand is invalid - please refer to ilbadm(1M)\n", ""},
		{"export inside", "create-sg sg1\nexport-config\ncreate-sg sg2\n", "",
			"ilbadm: export from import file not allowed\n", "create-servergroup sg1\n"},
		{"export alias inside", "EXPORT-CF " + filepath.Join(dir, "x") + "\ncreate-sg sg2\n", "",
			"ilbadm: export from import file not allowed\n", ""},
		{"import inside", "create-sg sg1\nimport-config -p /dev/null\ncreate-sg sg2\n", "",
			"ilbadm: recursive import not allowed\n", "create-servergroup sg1\n"},
		{"import alias inside", "import-cf\ncreate-sg sg2\n", "",
			"ilbadm: recursive import not allowed\n", ""},
		{"bad option", "create-sg sg1\ncreate-sg -x sg2\n", "",
			"ilbadm: bad or misplaced option -x\n", "create-servergroup sg1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeFile(t, dir, "bad", tc.text)
			runSteps(t, sock, []step{
				{line: "import-config " + f, stdout: tc.stdout, stderr: tc.stderr, status: 1},
				{line: "export-config", stdout: tc.export},
			})
		})
	}

	runSteps(t, filepath.Join(dir, "none.sock"), []step{
		{line: "import-config /dev/null", status: 1, stderr: "ilbadm: socket() failed\n"},
		{line: "import-config -p " + writeFile(t, dir, "one", "create-sg sg1\n"), status: 1, stderr: "ilbadm: socket() failed\n"},
		// The file is opened before ilbd is asked for anything.
		{line: "import-config " + missing, status: 1,
			stderr: "ilbadm: file " + missing + " cannot be opened for reading\n" + usage},
	})
}

// The fixes of spec policy 3: blank lines do not end the import, '#' comments may be
// indented, a lone '\' continues a command on the next line, lines may be long.
func TestImportConfigLineHandling(t *testing.T) {
	sock := daemon(t)
	dir := t.TempDir()
	var many []string
	for i := 1; i <= 200; i++ {
		many = append(many, "10.9.0."+strconv.Itoa(i))
	}
	long := "create-servergroup -s server=" + strings.Join(many, ",") + " big\n"
	if len(long) < 2048 {
		t.Fatalf("long line is only %d bytes", len(long))
	}
	text := "# a migration file\n" +
		"create-servergroup sg1\n" +
		"\n" +
		"   \t\n" +
		"   # indented comment\n" +
		"\t#tab-indented comment\n" +
		"add-server -s server=192.0.2.1:80 \\\n" +
		"   sg1\n" +
		"create-rule -e -i vip=203.0.113.1,port=80 \\\n" +
		"# a comment inside a continued command is skipped\n" +
		"    -m lbalg=rr,type=HALF-NAT \\\n" +
		"    -o servergroup=sg1 r1\n" +
		"create-servergroup \\\n" +
		"\n" + // a blank line ends a continued command: this one lacks its name
		"create-servergroup after\n"
	f := writeFile(t, dir, "in", text)
	runSteps(t, sock, []step{{line: "import-config " + f, status: 1,
		stderr: "ilbadm: missing mandatory arguments - please refer to 'create-servergroup' subcommand  description in ilbadm(1M)\n"}})
	runSteps(t, sock, []step{{line: "export-config", stdout: `create-servergroup sg1
add-server -s server=192.0.2.1:80 sg1
create-rule -e -i vip=203.0.113.1,port=80,protocol=tcp -m lbalg=roundrobin,type=HALF-NAT -t nat-timeout=120 -o servergroup=sg1 r1
`}})

	// A long line, a last line without newline and a continuation at the end of file.
	f = writeFile(t, dir, "in2", long+"create-servergroup nonl\ncreate-servergroup \\\n  eof \\")
	runSteps(t, sock, []step{{line: "import-config " + f}})
	out, _, _ := ilbadm(sock, "export-config")
	lines := strings.Split(out, "\n")
	if len(lines) != 204 || lines[0] != "create-servergroup big" || lines[200] != "add-server -s server=10.9.0.200 big" ||
		lines[201] != "create-servergroup nonl" || lines[202] != "create-servergroup eof" {
		t.Errorf("after long import: %d lines, %q", len(lines), lines[len(lines)-4:])
	}
	// A file of comments and blank lines only: an empty configuration.
	runSteps(t, sock, []step{{line: "import-config " + writeFile(t, dir, "in3", "\n# nothing\n\n")}, {line: "export-config"}})
}
