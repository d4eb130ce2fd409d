package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install lays out a complete tree under DESTDIR and PREFIX, and make deb packages the
// same tree with a control file dpkg accepts.
func TestInstallAndDeb(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if out, err := exec.Command(mk, "-C", root, "install", "DESTDIR="+dest, "PREFIX=/opt/ilb").CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for path, mode := range map[string]os.FileMode{
		"opt/ilb/sbin/ilbd": 0o755, "opt/ilb/sbin/ilbadm": 0o755,
		"opt/ilb/lib/systemd/system/ilbd.service": 0o644, "opt/ilb/lib/systemd/system/ilbd.socket": 0o644,
		"opt/ilb/share/man/man8/ilbadm.8": 0o644, "opt/ilb/share/man/man8/ilbd.8": 0o644, "opt/ilb/share/man/man5/ilbd.conf.5": 0o644,
		"opt/ilb/share/bash-completion/completions/ilbadm": 0o644,
		"opt/ilb/lib/sysusers.d/ilb.conf":                  0o644, "opt/ilb/lib/tmpfiles.d/ilb.conf": 0o644,
		"opt/ilb/share/doc/ilb/README.md": 0o644, "etc/ilb/ilbd.conf.example": 0o644,
	} {
		st, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("missing %s: %v", path, err)
			continue
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), mode)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "opt/ilb/lib/systemd/system/ilbd.service"))
	if !strings.Contains(string(unit), "ExecStart=/opt/ilb/sbin/ilbd ") {
		t.Errorf("the installed unit does not start the installed ilbd:\n%s", unit)
	}
	sysusers, _ := os.ReadFile(filepath.Join(dest, "opt/ilb/lib/sysusers.d/ilb.conf"))
	if !strings.Contains(string(sysusers), "\ng ilbadm -\n") {
		t.Errorf("sysusers.d does not create the ilbadm group:\n%s", sysusers)
	}

	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed")
	}
	work := t.TempDir()
	if out, err := exec.Command(mk, "-C", root, "deb", "DEB_DIR="+filepath.Join(work, "tree"), "DEB_OUT="+work).CombinedOutput(); err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(work, "ilb_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb built %v", debs)
	}
	list, err := exec.Command("dpkg-deb", "-c", debs[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, list)
	}
	for _, want := range []string{"./usr/sbin/ilbd", "./usr/sbin/ilbadm", "./usr/lib/systemd/system/ilbd.service",
		"./usr/share/man/man8/ilbadm.8", "./usr/share/bash-completion/completions/ilbadm", "./usr/lib/sysusers.d/ilb.conf"} {
		if !strings.Contains(string(list), want+"\n") {
			t.Errorf("the package lacks %s:\n%s", want, list)
		}
	}
	if f, err := exec.Command("dpkg-deb", "-f", debs[0], "Package", "Depends").CombinedOutput(); err != nil ||
		string(f) != "Package: ilb\nDepends: dpdk\n" {
		t.Errorf("control: %v %q", err, f)
	}
}
