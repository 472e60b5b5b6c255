package docs

import (
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// docs/ci.md shows the workflow of .github/workflows/bench-gate.yaml as it
// is: a change to one is a change to the other.
func TestCIDocShowsTheWorkflow(t *testing.T) {
	g := NewWithT(t)
	wf, err := os.ReadFile("../.github/workflows/bench-gate.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile("ci.md")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(doc)).To(ContainSubstring("```yaml\n"+string(wf)+"```\n"), "docs/ci.md lacks .github/workflows/bench-gate.yaml verbatim")
	// It must not run on this repository's pushes or pull requests.
	on := string(wf)[strings.Index(string(wf), "\non:"):]
	on = on[:strings.Index(on, "\npermissions:")]
	g.Expect(on).To(ContainSubstring("workflow_dispatch:"))
	g.Expect(on).NotTo(ContainSubstring("push"))
	g.Expect(on).NotTo(ContainSubstring("pull_request"))
	g.Expect(on).NotTo(ContainSubstring("schedule"))
}
