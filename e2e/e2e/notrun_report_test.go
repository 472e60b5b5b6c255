package e2e

import (
	"testing"

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
