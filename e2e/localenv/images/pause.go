package images

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildPause compiles Kubernetes' pause (build/pause/linux/pause.c of
// k8s.io/kubernetes KubernetesVersion, from the Go module cache, downloaded
// through hack/tools when absent) with the flags of build/pause/Makefile
// (gcc -Os -Wall -Werror -static) into cache/bin/pause and returns its path.
// `pause -v` prints "pause.c v3.10.1-kubernetes-v1.34.1".
func (b *Builder) BuildPause(ctx context.Context) (string, error) {
	dir, err := ModuleDir(ctx, filepath.Join(b.Root, "hack", "tools"), "k8s.io/kubernetes", KubernetesVersion)
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "build", "pause", "linux", "pause.c")
	out := b.cache("bin", "pause")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	version := fmt.Sprintf("v%s-kubernetes-%s", PauseVersion, KubernetesVersion)
	b.logf("gcc -static -Os -o %s %s", out, src)
	cmd := exec.CommandContext(ctx, "gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION="+version, "-o", out, src)
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to compile %s (gcc and libc6-dev come from hack/setup.sh): %w: %s", src, err, strings.TrimSpace(string(o)))
	}
	return out, nil
}

// ModuleDir returns the module cache directory of module@version, downloading
// it with `go mod download -json` run in moduleRoot (a module whose go.sum
// vouches for it, e.g. hack/tools).
func ModuleDir(ctx context.Context, moduleRoot, module, version string) (string, error) {
	cmd := goCommand(ctx, moduleRoot, "mod", "download", "-json", module+"@"+version)
	out, err := cmd.Output()
	var res struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &res); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || res.Error != "" || res.Dir == "" {
		return "", fmt.Errorf("failed to download module %s@%s in %s: %v %s", module, version, moduleRoot, err, res.Error)
	}
	return res.Dir, nil
}

// goCommand returns `go args...` run in dir with this process's environment
// (GOFLAGS, GOPROXY, caches), to which callers may append.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	return cmd
}
