package gate_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/onsi/gomega"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// TestDecide is the exit-code table: one row per rule of Decide, with the
// phases and reasons the controller writes.
func TestDecide(t *testing.T) {
	const msg = "the condition's message"
	stale := succeeded(msg)
	stale.Generation = 2
	noFailedCondition := failed(fastpathv1alpha1.ReasonRunnerFailed, msg)
	noFailedCondition.Status.Conditions = noFailedCondition.Status.Conditions[:2]
	for _, tc := range []struct {
		name   string
		b      *fastpathv1alpha1.FastPathBenchmark
		facts  gate.Facts
		state  gate.State
		code   gate.ExitCode
		reason string
	}{
		{"no status yet: blocked on the operator", bench(1, 0, ""), gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, gate.ReasonNotObserved},
		{"observed without a phase: blocked on the operator", bench(1, 1, ""), gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, gate.ReasonNotObserved},
		{"status of the previous generation is not this run's", stale, gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, gate.ReasonNotObserved},
		{"succeeded", succeeded(msg), gate.Facts{}, gate.Done, gate.ExitSucceeded, fastpathv1alpha1.ReasonCriteriaMet},
		{"criteria not met", failed(fastpathv1alpha1.ReasonThresholdNotMet, msg), gate.Facts{}, gate.Done, gate.ExitCriteriaNotMet, fastpathv1alpha1.ReasonThresholdNotMet},
		{"runner failed", failed(fastpathv1alpha1.ReasonRunnerFailed, msg), gate.Facts{}, gate.Done, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonRunnerFailed},
		{"netserver unreachable", failed(fastpathv1alpha1.ReasonNetserverUnreachable, msg), gate.Facts{}, gate.Done, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonNetserverUnreachable},
		{"results invalid", failed(fastpathv1alpha1.ReasonResultsInvalid, msg), gate.Facts{}, gate.Done, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonResultsInvalid},
		{"spec the controller cannot run", failed(fastpathv1alpha1.ReasonUnsupported, msg), gate.Facts{}, gate.Done, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonUnsupported},
		{"failed without a Failed condition", noFailedCondition, gate.Facts{}, gate.Done, gate.ExitCouldNotRun, ""},
		{"runner job created", running(fastpathv1alpha1.ReasonJobCreated, msg), gate.Facts{}, gate.Waiting, 0, fastpathv1alpha1.ReasonJobCreated},
		{"runner job running", running(fastpathv1alpha1.ReasonJobRunning, msg), gate.Facts{}, gate.Waiting, 0, fastpathv1alpha1.ReasonJobRunning},
		{"attachment missing", pending(fastpathv1alpha1.ReasonWaitingForAttachment, msg), gate.Facts{AttachmentMissing: true}, gate.Blocked, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonWaitingForAttachment},
		{"attachment not Ready yet", pending(fastpathv1alpha1.ReasonWaitingForAttachment, msg), gate.Facts{}, gate.Waiting, 0, fastpathv1alpha1.ReasonWaitingForAttachment},
		{"SSH key Secret missing", pending(fastpathv1alpha1.ReasonSSHKeyMissing, msg), gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonSSHKeyMissing},
		{"runner object held by another owner", pending(fastpathv1alpha1.ReasonRunnerObjectConflict, msg), gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonRunnerObjectConflict},
		{"run to compare with missing", pending(fastpathv1alpha1.ReasonWaitingForCompareTo, msg), gate.Facts{}, gate.Blocked, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonWaitingForCompareTo},
		{"run to compare with unusable", failed(fastpathv1alpha1.ReasonCompareToInvalid, msg), gate.Facts{}, gate.Done, gate.ExitCouldNotRun, fastpathv1alpha1.ReasonCompareToInvalid},
		{"endpoints coming up", pending(fastpathv1alpha1.ReasonEndpointNotFound, msg), gate.Facts{AttachmentMissing: true}, gate.Waiting, 0, fastpathv1alpha1.ReasonEndpointNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			o := gate.Decide(tc.b, tc.facts)
			g.Expect(o.State).To(gomega.Equal(tc.state), "state")
			g.Expect(o.Reason).To(gomega.Equal(tc.reason), "reason")
			g.Expect(o.Phase).To(gomega.Equal(tc.b.Status.Phase), "phase")
			if tc.state != gate.Waiting {
				g.Expect(o.Code).To(gomega.Equal(tc.code), "exit code")
			}
			if tc.reason != "" && tc.reason != gate.ReasonNotObserved {
				g.Expect(o.Message).To(gomega.Equal(msg), "the condition's message is quoted")
			}
		})
	}
}

// The documented table names each code once, in order.
func TestExitCodesTable(t *testing.T) {
	g := gomega.NewWithT(t)
	for i, e := range gate.ExitCodes {
		g.Expect(int(e.Code)).To(gomega.Equal(i))
		g.Expect(e.Code.String()).To(gomega.Equal(e.Name))
	}
	g.Expect(gate.ExitCodes).To(gomega.HaveLen(4))
}

// docs/benchmarks.md ("CI gate") has a row per exit code, with its name.
func TestDocsListTheExitCodes(t *testing.T) {
	g := gomega.NewWithT(t)
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, e := range gate.ExitCodes {
		g.Expect(string(doc)).To(gomega.ContainSubstring(fmt.Sprintf("\n| %d | %s | ", e.Code, e.Name)), "docs/benchmarks.md lacks exit code %d", e.Code)
	}
}
