package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The manual pages render without a groff warning, and document what the programs accept:
// every ilbadm subcommand, every ilbd option, every key of the example settings.
func TestManPages(t *testing.T) {
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff is not installed")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	pages := map[string]string{}
	for _, p := range []string{"ilbadm.8", "ilbd.8", "ilbd.conf.5"} {
		src := filepath.Join("..", "docs", "man", p+".md")
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		pages[p] = string(b)
		out := filepath.Join(t.TempDir(), p)
		if o, err := exec.Command(goBin, "tool", "go-md2man", "-in", src, "-out", out).CombinedOutput(); err != nil {
			t.Fatalf("go-md2man %s: %v\n%s", p, err, o)
		}
		if o, err := exec.Command(groff, "-man", "-ww", "-z", "-Tutf8", out).CombinedOutput(); err != nil || len(o) != 0 {
			t.Errorf("groff warns on %s: %v\n%s", p, err, o)
		}
	}
	usage, err := os.ReadFile(filepath.Join("..", "ilbadm", "usage.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^ilbadm ([a-z-]+)\|([a-z-]+)`).FindAllStringSubmatch(string(usage), -1) {
		for _, name := range m[1:] {
			if !strings.Contains(pages["ilbadm.8"], "**"+name+"**") {
				t.Errorf("ilbadm(8) does not document %s", name)
			}
		}
	}
	needBinaries(t)
	help, _ := exec.Command(bin(t, "ilbd"), "-h").CombinedOutput()
	for _, m := range regexp.MustCompile(`(?m)^  -([a-zA-Z-]+)`).FindAllStringSubmatch(string(help), -1) {
		if !strings.Contains(pages["ilbd.8"], "-"+m[1]+"**") { // -name or --name
			t.Errorf("ilbd(8) does not document -%s", m[1])
		}
	}
	example, err := os.ReadFile(filepath.Join("..", "dist", "ilbd.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^([a-z-]+)\s`).FindAllStringSubmatch(string(example), -1) {
		if !strings.Contains(pages["ilbd.conf.5"], "**"+m[1]+"**") {
			t.Errorf("ilbd.conf(5) does not document %s", m[1])
		}
	}
}
