package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// FuzzImport feeds arbitrary files to import-config against an in-process daemon (kept
// in memory, so it is fast). Nothing may panic, the resulting configuration must
// export, and whenever that export imports again into a second daemon it must export
// byte-identically there: the export format says everything the import needs.
//
// Host names in the input must not reach a name server (slow, and not hermetic):
// lookups use /etc/hosts only while fuzzing.
func FuzzImport(f *testing.F) {
	saved := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no name service while fuzzing")
	}}
	f.Cleanup(func() { net.DefaultResolver = saved })

	// The seed corpus is testdata/fuzz/FuzzImport: small files, so that the fuzzer's
	// minimisation of what it derives from them stays quick.
	a, b := newDaemon(f, false), newDaemon(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		ilbadmIn(a.sock, "import-config", string(data))
		first, errs, status := ilbadm(a.sock, "export-config")
		if status != 0 {
			t.Fatalf("export after import: %q %d", errs, status)
		}
		// A name that is a lone '\' at the end of an exported line reads as a
		// continuation mark on import (the listed import fix); such exports are
		// ambiguous by construction and skipped.
		for _, l := range strings.Split(first, "\n") {
			if strings.HasSuffix(l, ` \`) {
				return
			}
		}
		if _, _, status := ilbadmIn(b.sock, "import-config", first); status != 0 {
			return // e.g. a rule whose group was emptied later: Solaris cannot re-import it either
		}
		if second, _, _ := ilbadm(b.sock, "export-config"); second != first {
			t.Fatalf("re-imported export differs:\n%s\nfirst export:\n%s", second, first)
		}
	})
}
