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
