package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
)

// TestNotRunSpecs needs no environment: it checks the end-of-suite listing
// on a made-up report.
func TestNotRunSpecs(t *testing.T) {
	g := NewWithT(t)
	it := func(container, text string, state types.SpecState, msg string) types.SpecReport {
		return types.SpecReport{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{container}, LeafNodeText: text,
			State: state, Failure: types.Failure{Message: msg}}
	}
	r := types.Report{SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeBeforeSuite, State: types.SpecStatePassed},
		it("VMs", "wires", types.SpecStateSkipped, NotRunLabel+"no KubeVirt"),
		it("VMs", "plugs", types.SpecStateSkipped, inheritedSkip+" BeforeAll"),
		it("Pods", "runs", types.SpecStatePassed, ""),
		it("Pods", "benchmarks", types.SpecStateSkipped, NotRunLabel+"with FASTPATH_GUESTS=qemu: no sshd"),
		it("Other", "focused away", types.SpecStateSkipped, ""),
		it("Other", "later", types.SpecStatePending, ""),
		it("Bare", "skipped", types.SpecStateSkipped, "no label here"),
	}}
	lines, unlabelled := notRunSpecs(r)
	g.Expect(lines).To(Equal([]string{
		"VMs wires: NOT RUN: no KubeVirt",
		"VMs plugs: NOT RUN: no KubeVirt",
		"Pods benchmarks: NOT RUN: with FASTPATH_GUESTS=qemu: no sshd",
		"Other focused away: filtered out (-ginkgo.focus, -ginkgo.skip, -ginkgo.label-filter) or the suite stopped before it",
		"Other later: pending (PIt, PDescribe or Pending)",
		"Bare skipped: no label here",
	}))
	g.Expect(unlabelled).To(Equal([]string{"Bare skipped: no label here"}))
}

// TestFailureSummary needs no environment: it checks the summary that make
// e2e-cluster prints last, on a made-up report.
func TestFailureSummary(t *testing.T) {
	g := NewWithT(t)
	r := types.Report{SuiteDescription: "Fastpath e2e", SuiteConfig: types.SuiteConfig{RandomSeed: 1764441915}}
	g.Expect(failureSummary(r)).To(BeEmpty())
	long := "Timed out after 240.001s.\nThe function passed to Eventually failed at fastpath_test.go:146 with:\n" +
		"condition Colocated: NotColocated VMs on node1, node2\n" + strings.Repeat("filler\n", 20) + "Expected\n    <string>: False\nto equal\n    <string>: True"
	r.SpecReports = types.SpecReports{
		{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"Fastpath"}, LeafNodeText: "passes", State: types.SpecStatePassed},
		{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"Fastpath"}, LeafNodeText: "makes it Ready", State: types.SpecStateFailed,
			RunTime: 241 * time.Second, Failure: types.Failure{Message: long, Location: types.CodeLocation{FileName: "fastpath_test.go", LineNumber: 171}}},
		{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"Two nodes"}, LeafNodeText: "drains", State: types.SpecStateTimedout,
			Failure: types.Failure{Message: "A suite timeout occurred", Location: types.CodeLocation{FileName: "twonodes_test.go", LineNumber: 224}}},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "skipped", State: types.SpecStateSkipped, Failure: types.Failure{Message: "Spec skipped because an earlier spec in an ordered container failed"}},
	}
	g.Expect(failureSummary(r)).To(Equal(`Fastpath e2e: 2 failed (random seed 1764441915: -ginkgo.seed=1764441915 runs the containers in the same order)
1. [failed] Fastpath makes it Ready (after 241s)
   at fastpath_test.go:171
   | Timed out after 240.001s.
   | The function passed to Eventually failed at fastpath_test.go:146 with:
   | condition Colocated: NotColocated VMs on node1, node2
   | filler
   | filler
   | filler
   | [15 lines]
   | filler
   | filler
   | Expected
   |     <string>: False
   | to equal
   |     <string>: True
2. [timedout] Two nodes drains (after 0s)
   at twonodes_test.go:224
   | A suite timeout occurred
`))
}
