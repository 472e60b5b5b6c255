package testutil

import (
	"os"
	"path/filepath"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// VhostDeviceVsock returns the path of the real vhost-device-vsock: the
// environment's FASTPATH_VHOST_DEVICE_VSOCK, or bin/vhost-device-vsock of
// the repository as hack/setup.sh builds it (make test runs it). A missing
// binary fails the test (tb: a *testing.T, or GinkgoT()): a skipped test would be counted as passing.
func VhostDeviceVsock(tb interface {
	Helper()
	Fatalf(format string, args ...any)
}) string {
	tb.Helper()
	p := os.Getenv("FASTPATH_VHOST_DEVICE_VSOCK")
	if p == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			tb.Fatalf("vhost-device-vsock: %v", err)
		}
		p = filepath.Join(root, "bin", "vhost-device-vsock")
	}
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("vhost-device-vsock not built (run hack/setup.sh, which make test runs, or set FASTPATH_VHOST_DEVICE_VSOCK): %v", err)
	}
	return p
}
