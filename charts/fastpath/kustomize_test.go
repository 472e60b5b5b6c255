package fastpath_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
)

// TestConfigDefaultIsTheChart checks that config/default/fastpath.yaml is
// the chart rendered with its defaults (make manifests writes it; a chart
// change without make manifests fails here), and that `kubectl kustomize
// config/default` builds the namespace, the CRDs of config/crd/bases and
// every object of the chart, the relay in the vsock backend as with helm.
func TestConfigDefaultIsTheChart(t *testing.T) {
	g := NewWithT(t)
	committed, err := os.ReadFile("../../config/default/fastpath.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	rendered := helm(t, "template", "fastpath", ".", "--namespace", "fastpath-system", "--no-hooks", "--set", "crds.enabled=false")
	body := regexp.MustCompile(`(?s)^(#[^\n]*\n)*`).ReplaceAllString(string(committed), "")
	g.Expect(body).To(Equal(rendered), "config/default/fastpath.yaml is stale: run make manifests")

	kubectl, err := filepath.Abs("../../bin/kubectl")
	g.Expect(err).NotTo(HaveOccurred())
	var out, errb bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", "../../config/default")
	cmd.Stdout, cmd.Stderr = &out, &errb
	g.Expect(cmd.Run()).To(Succeed(), errb.String())
	kindRE := regexp.MustCompile(`(?m)^kind: (\S+)$`)
	kinds := map[string]int{}
	for _, m := range kindRE.FindAllStringSubmatch(out.String(), -1) {
		kinds[m[1]]++
	}
	crds, err := filepath.Glob("../../config/crd/bases/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds).To(HaveKeyWithValue("Namespace", 1))
	g.Expect(kinds).To(HaveKeyWithValue("CustomResourceDefinition", len(crds)))
	g.Expect(kinds).To(HaveKeyWithValue("Deployment", 1))
	// The agent and, with the relay in it (agent.relay.backend.enabled, the
	// chart's default), the vsock backend, which the agent programs.
	g.Expect(kinds).To(HaveKeyWithValue("DaemonSet", 2))
	g.Expect(out.String()).To(ContainSubstring("name: fastpath-vsock-backend\n"))
	g.Expect(out.String()).To(ContainSubstring("- --relay-backend-socket=/var/run/fastpath/vsock/backend/control.sock\n"))
	g.Expect(out.String()).To(ContainSubstring("- --relay\n"))
	g.Expect(len(kindRE.FindAllString(out.String(), -1))).To(Equal(len(kindRE.FindAllString(rendered, -1))+1+len(crds)),
		"every object of the chart, plus the namespace and the CRDs")
}
