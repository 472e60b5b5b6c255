package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// lastLineContaining returns the last line of the file at path that contains
// s and says a connection was denied or refused (cut to 240 bytes).
func lastLineContaining(path, s string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var found string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) && (strings.Contains(strings.ToLower(l), "den") || strings.Contains(strings.ToLower(l), "refus")) {
			found = l
		}
	}
	if len(found) > 240 {
		found = found[:240] + "..."
	}
	return found
}

// sampleBridges returns the bridge of every FastPathNetwork in the samples
// directory (after defaulting), so the demo knows which node bridges the
// agent will create.
func sampleBridges(dir string) ([]fastpathv1alpha1.NetworkSpec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []fastpathv1alpha1.NetworkSpec
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", f, err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var n fastpathv1alpha1.FastPathNetwork
			if err := yaml.Unmarshal([]byte(doc), &n); err != nil || n.Kind != "FastPathNetwork" {
				continue
			}
			spec := fastpathv1alpha1.DefaultNetworkSpec(n.Spec)
			if !slices.ContainsFunc(out, func(b fastpathv1alpha1.NetworkSpec) bool { return b.Bridge == spec.Bridge }) {
				out = append(out, fastpathv1alpha1.NetworkSpec{Datapath: spec.Datapath, Bridge: spec.Bridge, MTU: spec.MTU.Max})
			}
		}
	}
	return out, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "config", "samples")); err == nil && st.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("failed to find the Fastpath repository (config/samples and go.mod) above the working directory: run the demo from the repository (make demo)")
		}
		dir = parent
	}
}
