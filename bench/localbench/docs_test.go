package localbench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/onsi/gomega"
)

// ExitCodes gives gate's codes, in order, without the timeout the local
// benchmark does not have; docs/benchmarks.md has a row for each.
func TestExitCodesDocumented(t *testing.T) {
	g := gomega.NewWithT(t)
	g.Expect(ExitCodes).To(gomega.HaveLen(3))
	for i, e := range ExitCodes {
		g.Expect(int(e.Code)).To(gomega.Equal(i))
	}
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	const heading = "\n### The local benchmark as a gate\n"
	i := strings.Index(string(doc), heading)
	g.Expect(i).To(gomega.BeNumerically(">=", 0), "docs/benchmarks.md lacks %q", strings.TrimSpace(heading))
	section := string(doc)[i+len(heading):]
	if j := strings.Index(section, "\n#"); j >= 0 {
		section = section[:j]
	}
	for _, e := range ExitCodes {
		g.Expect(section).To(gomega.ContainSubstring(fmt.Sprintf("\n| %d | %s | ", e.Code, e.Code)), "the local benchmark's exit code %d", e.Code)
	}
}
