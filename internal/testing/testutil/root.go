package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
)

// RequireRoot fails the test (it does not skip it) when the process is not
// root: datapath tests create network namespaces, links and OVS bridges, and a
// skipped datapath test would be counted as passing. Run them with `make test`
// as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatalf("this test needs root (network namespaces, links, Open vSwitch): run `make test` as root")
	}
}

// UniqueName returns prefix followed by 6 random hex digits, e.g. "fpt-3fa9c1".
// Keep prefix at most 8 characters so the result fits a 15-character Linux
// interface name (IFNAMSIZ-1).
func UniqueName(prefix string) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + hex.EncodeToString(b)
}
