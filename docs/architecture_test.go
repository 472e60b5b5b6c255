package docs

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/fastpath-io/fastpath"

// layerOf is the layer of docs/architecture.md ("Layers") that a package of
// this module belongs to: 1 contract, 2 libraries, 3 parts, 4 mains, 5 the
// harness; 0 for a package the table does not place (docs itself, charts,
// config/samples, hack), which the test reports.
func layerOf(pkg string) int {
	p := strings.TrimPrefix(pkg, module+"/")
	switch {
	case p == "e2e" || strings.HasPrefix(p, "e2e/"):
		return 5
	case strings.HasPrefix(p, "cmd/"), strings.HasPrefix(p, "cni/cmd/"), strings.HasPrefix(p, "bench/cmd/"):
		return 4
	case strings.HasPrefix(p, "api/"), p == "config/crd":
		return 1
	case strings.HasPrefix(p, "internal/"):
		return 2
	case strings.HasPrefix(p, "cni/"), strings.HasPrefix(p, "controllers/"), p == "bench", strings.HasPrefix(p, "bench/"):
		return 3
	}
	return 0
}

// goList runs `go list` in the repository root with args and returns its
// lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestNoImportRunsUpward checks the layering of docs/architecture.md on every
// non-test import of the product module: a package imports only from its own
// layer or a lower one, and of the parts neither cni nor controllers imports
// the other.
func TestNoImportRunsUpward(t *testing.T) {
	g := NewWithT(t)
	var upward []string
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...") {
		f := strings.Fields(line)
		from, lf := f[0], layerOf(f[0])
		for _, to := range f[1:] {
			if !strings.HasPrefix(to, module+"/") {
				continue
			}
			lt := layerOf(to)
			part := func(p string) string { return strings.SplitN(strings.TrimPrefix(p, module+"/"), "/", 2)[0] }
			switch {
			case lf == 0 && strings.HasPrefix(from, module+"/docs"):
			case lt > lf, lt == 0:
				upward = append(upward, from+" -> "+to)
			case lf == 3 && lt == 3 && part(from) != part(to):
				upward = append(upward, from+" -> "+to+" (one part into another)")
			}
		}
	}
	g.Expect(upward).To(BeEmpty(), "imports against the layers of docs/architecture.md")
}

// TestLayerOf pins the table, so that TestNoImportRunsUpward can fail: an
// import from a library into the plugin is upward.
func TestLayerOf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(layerOf(module + "/internal/datapath/bridge")).To(Equal(2))
	g.Expect(layerOf(module + "/cni/pkg/plugin")).To(BeNumerically(">", layerOf(module+"/internal/datapath/bridge")))
	g.Expect(layerOf(module + "/api/netconf")).To(Equal(1))
	g.Expect(layerOf(module + "/api/wellknown")).To(Equal(1))
	g.Expect(layerOf(module + "/cmd/fastpath-agent")).To(Equal(4))
	g.Expect(layerOf(module + "/bench")).To(Equal(3))
	g.Expect(layerOf(module + "/bench/jobrunner")).To(Equal(3))
	g.Expect(layerOf(module + "/bench/cmd/fastpath-bench")).To(Equal(4))
	g.Expect(layerOf(module + "/api/benchjob")).To(Equal(1))
	g.Expect(layerOf(module + "/e2e/localenv/demo")).To(Equal(5))
	g.Expect(layerOf(module + "/charts/fastpath")).To(Equal(0))
}

// TestWellKnownIsALeaf: api/wellknown, which the API, the agent and the
// plugin binary all import, imports only the standard library, so importing
// it links nothing of ours and no third-party module.
func TestWellKnownIsALeaf(t *testing.T) {
	g := NewWithT(t)
	g.Expect(goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./api/wellknown")).To(Equal([]string{module + "/api/wellknown"}))
}

// harnessOnly are import path prefixes that only the harness (e2e/) and
// tests may use: a shipped binary that links one carries test machinery.
var harnessOnly = []string{
	module + "/e2e",
	module + "/internal/testing",
	"github.com/onsi/ginkgo",
	"github.com/onsi/gomega",
	"github.com/google/go-containerregistry",
	"github.com/krolaw/dhcp4",
	"sigs.k8s.io/controller-runtime/pkg/envtest",
}

// TestShippedBinariesLinkNoHarness lists the dependencies of every main in
// cmd/, cni/cmd/ and bench/cmd/ (the shipped binaries) and fails on any harness package.
func TestShippedBinariesLinkNoHarness(t *testing.T) {
	g := NewWithT(t)
	mains := goList(t, "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./cmd/...", "./cni/cmd/...", "./bench/cmd/...")
	var bins []string
	for _, m := range mains {
		if m != "" {
			bins = append(bins, m)
		}
	}
	g.Expect(bins).To(ContainElements(module+"/cmd/fastpath-operator", module+"/cmd/fastpath-agent", module+"/cni/cmd/fastpath", module+"/bench/cmd/fastpath-bench"))
	for _, b := range bins {
		var linked []string
		for _, dep := range goList(t, "-deps", b) {
			for _, h := range harnessOnly {
				if dep == h || strings.HasPrefix(dep, h+"/") {
					linked = append(linked, dep)
				}
			}
		}
		g.Expect(linked).To(BeEmpty(), "%s links harness packages", b)
	}
}

// TestOperatorLinksNoRunner: the operator links only the controller's half of
// the benchmark Job contract (api/benchjob), never the runner wing (bench/),
// whose netperf, vsock and SSH drivers it has no use for.
func TestOperatorLinksNoRunner(t *testing.T) {
	g := NewWithT(t)
	var linked []string
	for _, dep := range goList(t, "-deps", "./cmd/fastpath-operator") {
		if dep == module+"/bench" || strings.HasPrefix(dep, module+"/bench/") {
			linked = append(linked, dep)
		}
	}
	g.Expect(linked).To(BeEmpty(), "fastpath-operator links the runner")
}
