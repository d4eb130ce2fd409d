package main

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// update rewrites golden files from the current output (review them before committing).
var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestMigrationScript runs a Solaris administrator's script unchanged, line by line, as
// the shell would (comments and blank lines skipped, ${PROBE} and ${TMP} expanded, the
// leading "ilbadm" being argv[0]), and compares every line's stdout, stderr and exit
// status with the transcript golden file.
func TestMigrationScript(t *testing.T) {
	sock := daemon(t)
	tmp := t.TempDir()
	probe := writeProbe(t, tmp)
	script, err := os.ReadFile(filepath.Join("testdata", "migration", "script.ilb"))
	if err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("${PROBE}", probe, "${TMP}", tmp)
	// Output names the temporary paths; the transcript shows the script's variables.
	// The probe's path only appears last on a line or inside an exported command, so
	// putting the variable back changes no column alignment.
	unexpand := strings.NewReplacer(probe, "${PROBE}", tmp, "${TMP}")

	var got bytes.Buffer
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		argv := strings.Fields(expand.Replace(line))
		if argv[0] != "ilbadm" {
			t.Fatalf("not an ilbadm command: %s", line)
		}
		n++
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), prog: "ilbadm", socket: sock}
		status := e.main(argv[1:])
		got.WriteString("$ " + line + "\n")
		got.WriteString(unexpand.Replace(out.String()))
		if errb.Len() > 0 {
			got.WriteString("[stderr]\n" + unexpand.Replace(errb.String()))
		}
		if status != 0 {
			got.WriteString("[exit " + strconv.Itoa(status) + "]\n")
		}
	}
	if n < 40 {
		t.Fatalf("the script has only %d ilbadm lines", n)
	}
	compareGolden(t, filepath.Join("testdata", "migration", "transcript.golden"), got.String())
}

// compareGolden compares text with a golden file, or rewrites it with -update.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got %q\nwant %q\n(run with -update to rewrite, then review)", path, i+1, g, w)
		}
	}
}
