package attachment

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testNode(name, cpu, memory string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// TestChooseTarget: each rule of the group's target choice, each case
// failing when its rule is undone: the node being left, cordoned and not
// Ready nodes, untolerated taints, the VMs' node selectors, FastPathNode
// readiness, room for the whole group; of the nodes that fit, the most free
// memory wins; nothing fits: no target and a reason per node.
func TestChooseTarget(t *testing.T) {
	group := func(need corev1.ResourceList, pods ...*corev1.Pod) moveGroup {
		if len(pods) == 0 {
			pods = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "db-1"}}}
		}
		return moveGroup{from: "node1", need: need, constraints: pods}
	}
	fits := func(n *corev1.Node) moveCandidate { return moveCandidate{node: n, used: resources("0", "0")} }
	for _, c := range []struct {
		name  string
		g     moveGroup
		cands []moveCandidate
		want  string
		why   []string
	}{
		{name: "never the node being left", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{fits(testNode("node1", "8", "32Gi"))}, want: ""},
		{name: "the most free memory of the nodes that fit", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{fits(testNode("node1", "8", "32Gi")), fits(testNode("node2", "4", "8Gi")), fits(testNode("node3", "4", "16Gi")),
				{node: testNode("node4", "4", "64Gi"), used: resources("0", "60Gi")}},
			want: "node3"},
		{name: "cordoned", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{fits(testNode("node2", "4", "16Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true })), fits(testNode("node3", "4", "8Gi"))},
			want:  "node3", why: []string{"node2: cordoned"}},
		{name: "not Ready", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{fits(testNode("node2", "4", "16Gi", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }))},
			why:   []string{"node2: Node not Ready"}},
		{name: "a NoSchedule taint the VMs do not tolerate", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{fits(testNode("node2", "4", "16Gi", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
			}))},
			why: []string{"node2: taint maintenance=:NoSchedule not tolerated by VM db-0"}},
		{name: "a tolerated taint", g: group(resources("1", "1Gi"), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0"},
			Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}}}),
			cands: []moveCandidate{fits(testNode("node2", "4", "16Gi", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
			}))},
			want: "node2"},
		{name: "a VM's node selector", g: group(resources("1", "1Gi"), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1"},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "node3"}}}),
			cands: []moveCandidate{fits(testNode("node2", "4", "16Gi")), fits(testNode("node3", "4", "8Gi"))},
			want:  "node3", why: []string{"node2: VM db-1's node selector or required node affinity does not match"}},
		{name: "FastPathNode not Ready", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{{node: testNode("node2", "4", "16Gi"), fastPath: "FastPathNode not Ready"}},
			why:   []string{"node2: FastPathNode not Ready"}},
		{name: "room for one VM is not room for the group", g: group(resources("2", "3Gi")),
			cands: []moveCandidate{{node: testNode("node2", "4", "8Gi"), used: resources("1", "6Gi")}},
			why:   []string{"node2: no room: 2Gi free of memory, 3Gi needed"}},
		{name: "a resource the node does not have", g: group(corev1.ResourceList{"devices.kubevirt.io/kvm": resource.MustParse("2")}),
			cands: []moveCandidate{fits(testNode("node2", "4", "8Gi"))},
			why:   []string{"node2: no room: no allocatable devices.kubevirt.io/kvm (2 needed)"}},
		{name: "nothing fits", g: group(resources("1", "1Gi")),
			cands: []moveCandidate{
				fits(testNode("node3", "4", "16Gi", func(n *corev1.Node) { n.Spec.Unschedulable = true })),
				{node: testNode("node2", "4", "16Gi"), fastPath: "no FastPathNode (is fastpath-agent running there?)"},
				fits(testNode("node1", "8", "32Gi")),
			},
			why: []string{"node2: no FastPathNode (is fastpath-agent running there?)", "node3: cordoned"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, why := chooseTarget(c.g, c.cands)
			g.Expect(got).To(Equal(c.want))
			g.Expect(why).To(Equal(c.why))
		})
	}
}

// TestPodRequests: containers add up, the largest init container counts
// when it is larger, and the pod overhead is added.
func TestPodRequests(t *testing.T) {
	g := NewWithT(t)
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: resources("500m", "1Gi")}},
			{Resources: corev1.ResourceRequirements{Requests: resources("100m", "40Mi")}},
		},
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: resources("2", "10Mi")}}},
		Overhead:       corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")},
	}}
	got := podRequests(p)
	g.Expect(got.Cpu().String()).To(Equal("2"))
	g.Expect(got.Memory().String()).To(Equal("1264Mi"))
}
