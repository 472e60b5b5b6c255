package runstate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
)

// RunRoot is where every run's sockets, pid files and runtime directories
// live (RunDir).
const RunRoot = "/run/fastpath"

// MaxSocketPath is the longest path a UNIX socket may have: sun_path holds
// 108 bytes with the terminating NUL (Linux include/uapi/linux/un.h).
const MaxSocketPath = 107

// RunDir returns the short per-run directory of a run whose files live in
// workDir: RunRoot/<kind>-<the first 8 hex digits of sha256 of workDir's
// absolute path>, e.g. /run/fastpath/e2e-1f3a9c20 (27 bytes).
//
// UNIX sockets (libvirtd's, QEMU's, the vsock transport's, containerd's, the
// kubelet's) never live under workDir: a clone may sit at any depth, and a
// socket path over MaxSocketPath bytes cannot be bound. The hash keeps two
// clones apart and gives one clone the same directory on every run, so that
// a run finds what a killed one left. RunDir creates nothing; an error only
// when workDir cannot be made absolute.
func RunDir(kind, workDir string) (string, error) {
	abs, err := filepath.Abs(workDir)
	if err != nil {
		return "", fmt.Errorf("failed to resolve %s: %w", workDir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(RunRoot, kind+"-"+hex.EncodeToString(sum[:4])), nil
}

// CheckSocketPath fails, naming the socket and its length, when path is too
// long to bind: an error no retry can mend, to report at once.
func CheckSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("the UNIX socket path %s is %d bytes, over the %d that sun_path holds: use a shorter directory", path, len(path), MaxSocketPath)
	}
	return nil
}
