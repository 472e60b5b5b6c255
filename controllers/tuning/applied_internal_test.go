package tuning

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestApplied(t *testing.T) {
	rec := func(node string, mtu int32) v1alpha1.NodeTuning {
		return v1alpha1.NodeTuning{Node: node, Recommended: &v1alpha1.TuningSetting{MTU: mtu}}
	}
	for _, tc := range []struct {
		name    string
		nodes   []v1alpha1.NodeTuning
		serving int
		want    int32 // 0: nil
	}{
		{"the majority", []v1alpha1.NodeTuning{rec("a", 9000), rec("b", 65520), rec("c", 9000)}, 3, 9000},
		{"a tie goes to the smaller MTU", []v1alpha1.NodeTuning{rec("a", 65520), rec("b", 9000)}, 2, 9000},
		{"waits for every serving node", []v1alpha1.NodeTuning{rec("a", 9000)}, 2, 0},
		{"a node without a recommendation blocks it", []v1alpha1.NodeTuning{rec("a", 9000), {Node: "b"}}, 2, 0},
		{"no nodes", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Applied(tc.nodes, tc.serving)
			if tc.want == 0 {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.MTU).To(Equal(tc.want))
		})
	}
}

// TestAppliedOffloads covers how the nodes' offload sets merge into the
// applied one: the MTU is chosen first, exactly as without offloads, and the
// offloads among the nodes that recommend it.
func TestAppliedOffloads(t *testing.T) {
	const on, off = v1alpha1.OffloadOn, v1alpha1.OffloadOff
	allOn := &v1alpha1.Offloads{TSO: on, GSO: on, GRO: on, TXChecksum: on}
	noGRO := &v1alpha1.Offloads{TSO: on, GSO: on, GRO: off, TXChecksum: on}
	noTSO := &v1alpha1.Offloads{TSO: off, GSO: on, GRO: on, TXChecksum: on}
	allOff := &v1alpha1.Offloads{TSO: off, GSO: off, GRO: off, TXChecksum: off}
	rec := func(node string, mtu int32, o *v1alpha1.Offloads) v1alpha1.NodeTuning {
		return v1alpha1.NodeTuning{Node: node, Recommended: &v1alpha1.TuningSetting{MTU: mtu, Offloads: o.DeepCopy()}}
	}
	for _, tc := range []struct {
		name  string
		nodes []v1alpha1.NodeTuning
		want  v1alpha1.TuningSetting
	}{
		{"every node agrees",
			[]v1alpha1.NodeTuning{rec("a", 9000, noGRO), rec("b", 9000, noGRO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: noGRO}},
		{"the majority of the nodes at the winning MTU",
			[]v1alpha1.NodeTuning{rec("a", 9000, allOn), rec("b", 9000, noGRO), rec("c", 9000, noGRO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: noGRO}},
		{"the MTU is chosen first: votes at another MTU do not count for the offloads",
			[]v1alpha1.NodeTuning{rec("a", 9000, allOn), rec("b", 9000, allOn), rec("c", 9000, noGRO), rec("d", 1500, noGRO), rec("e", 1500, noGRO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: allOn}},
		{"nodes that agree on the MTU only still outvote a setting more nodes share whole",
			[]v1alpha1.NodeTuning{rec("a", 9000, allOn), rec("b", 9000, noGRO), rec("c", 65520, allOff), rec("d", 65520, allOff), rec("e", 9000, noTSO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: allOn}},
		{"a tie goes to the set with more offloads On",
			[]v1alpha1.NodeTuning{rec("a", 9000, allOff), rec("b", 9000, allOn)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: allOn}},
		{"a tie between sets with as many offloads On goes to On first in tso, gso, gro, txChecksum order",
			[]v1alpha1.NodeTuning{rec("a", 9000, noTSO), rec("b", 9000, noGRO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: noGRO}},
		{"the tie break does not depend on the order of the nodes",
			[]v1alpha1.NodeTuning{rec("a", 9000, noGRO), rec("b", 9000, noTSO)},
			v1alpha1.TuningSetting{MTU: 9000, Offloads: noGRO}},
		{"a recommendation without offloads",
			[]v1alpha1.NodeTuning{rec("a", 9000, nil)},
			v1alpha1.TuningSetting{MTU: 9000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			for range 20 { // map order varies between runs: the answer must not
				got := Applied(tc.nodes, len(tc.nodes))
				g.Expect(got).NotTo(BeNil())
				g.Expect(*got).To(Equal(tc.want))
			}
			if got := Applied(tc.nodes, len(tc.nodes)); got.Offloads != nil {
				for _, n := range tc.nodes {
					g.Expect(got.Offloads).NotTo(BeIdenticalTo(n.Recommended.Offloads), "the result is a copy")
				}
			}
		})
	}
}
