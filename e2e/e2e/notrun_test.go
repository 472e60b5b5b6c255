package e2e

import (
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
)

// NotRunLabel begins the reason of every spec this suite does not run in an
// environment. Ginkgo reports such a spec as skipped, never as passed, and
// the ReportAfterSuite below lists it with its reason and counts them.
const NotRunLabel = "NOT RUN: "

// notRun skips the current spec (in a BeforeAll: every spec of its ordered
// container) with reason, labelled NotRunLabel.
func notRun(reason string) {
	GinkgoHelper()
	Skip(NotRunLabel + reason)
}

// inheritedSkip begins the message Ginkgo gives the specs after the first
// of an ordered container whose BeforeAll called Skip; the first carries the
// reason.
const inheritedSkip = "Spec skipped because Skip() was called in"

// notRunSpecs returns one line per spec of r that did not run, with its
// reason, and the specs skipped with a reason that lacks NotRunLabel (a Skip
// that did not go through notRun).
func notRunSpecs(r types.Report) (lines, unlabelled []string) {
	containerReason := map[string]string{}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		container := strings.Join(s.ContainerHierarchyTexts, " ")
		name := strings.TrimSpace(container + " " + s.LeafNodeText)
		var reason string
		switch {
		case s.State == types.SpecStatePending:
			reason = "pending (PIt, PDescribe or Pending)"
		case s.State != types.SpecStateSkipped:
			continue
		case s.Failure.Message == "":
			reason = "filtered out (-ginkgo.focus, -ginkgo.skip, -ginkgo.label-filter) or the suite stopped before it"
		case strings.HasPrefix(s.Failure.Message, inheritedSkip):
			reason = s.Failure.Message
			if r, ok := containerReason[container]; ok {
				reason = r
			}
		case strings.HasPrefix(s.Failure.Message, "Spec skipped because"):
			// An earlier failure in its ordered container: the suite fails.
			reason = s.Failure.Message
		default:
			reason = s.Failure.Message
			containerReason[container] = reason
			if !strings.HasPrefix(reason, NotRunLabel) {
				unlabelled = append(unlabelled, name+": "+reason)
			}
		}
		lines = append(lines, name+": "+reason)
	}
	return lines, unlabelled
}

// Every run ends with the count of specs that did not run and why, on
// stdout (go test shows it with -v, as make e2e runs it); a Skip without the
// label fails the suite.
var _ = ReportAfterSuite("specs not run", func(r Report) {
	lines, unlabelled := notRunSpecs(r)
	its := 0
	for _, s := range r.SpecReports {
		if s.LeafNodeType == types.NodeTypeIt {
			its++
		}
	}
	fmt.Fprintf(os.Stdout, "\n%s: %d of %d specs NOT RUN (reported skipped, not passed)\n", r.SuiteDescription, len(lines), its)
	for _, l := range lines {
		fmt.Fprintf(os.Stdout, "  - %s\n", l)
	}
	Expect(unlabelled).To(BeEmpty(), "a spec was skipped with a reason not beginning %q: skip with notRun", NotRunLabel)
})
