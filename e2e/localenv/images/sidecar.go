package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubeVirtVersion is the KubeVirt release whose sidecar-shim the domain-hook
// image carries: the Dockerfile's KUBEVIRT_VERSION and hack/tools/kubevirt's pin.
const KubeVirtVersion = "v1.7.0"

// SidecarShimPackage is the sidecar-shim's main package in KubeVirt's module.
const SidecarShimPackage = "kubevirt.io/kubevirt/cmd/sidecars"

// SkipError says why a target cannot be built here; Build reports the target
// as skipped with Reason instead of failing.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

// BuildSidecarShim builds KubeVirt's sidecar-shim (SidecarShimPackage at
// KubeVirtVersion, pinned in the tools module hack/tools/kubevirt) as a static
// binary into cache/bin/sidecar-shim, as KubeVirt's Bazel go_binary does, and
// returns its path. Cold, it downloads KubeVirt's module and its dependencies
// through the Go module proxy and compiles about a minute on two cores. When
// the module or a dependency cannot be fetched or compiled here the error is a
// *SkipError carrying go's last lines.
func BuildSidecarShim(ctx context.Context, b *Builder) (string, error) {
	mod := filepath.Join(b.Root, "hack", "tools", "kubevirt")
	if _, err := os.Stat(filepath.Join(mod, "go.mod")); err != nil {
		return "", &SkipError{Reason: fmt.Sprintf("no tools module %s pinning KubeVirt's sidecar-shim", mod)}
	}
	out := b.cache("bin", "sidecar-shim")
	b.logf("go build -o %s %s@%s (cold: about a minute)", out, SidecarShimPackage, KubeVirtVersion)
	cmd := goCommand(ctx, mod, "build", "-trimpath", "-ldflags", "-s -w", "-o", out, SidecarShimPackage)
	cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &SkipError{Reason: fmt.Sprintf("KubeVirt's sidecar-shim %s did not build here (%v): %s", KubeVirtVersion, err, lastLines(string(o), 3))}
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
