package nodeagent

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

func siblingAtt(ns, name string, vms ...fastpathv1alpha1.VMStatus) fastpathv1alpha1.FastPathAttachment {
	a := fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{VSOCK: &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling}}}
	for i, vm := range vms {
		vm.VSOCKMode, vm.CID = fastpathv1alpha1.VSOCKModeSibling, ptr.To(int64(3+i))
		a.Status.VMs = append(a.Status.VMs, vm)
	}
	return a
}

func keysOf(groups []backend.Group) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Key)
	}
	return out
}

// TestSiblingGroupsHereKeepsRunningGroupsUnderTheCap: a new group that
// sorts first never displaces a running one; groups without a member here
// count for nothing.
func TestSiblingGroupsHereKeepsRunningGroupsUnderTheCap(t *testing.T) {
	g := NewWithT(t)
	atts := []fastpathv1alpha1.FastPathAttachment{
		siblingAtt("ns", "a-new", fastpathv1alpha1.VMStatus{Name: "x", Node: "n1"}),
		siblingAtt("ns", "b-running", fastpathv1alpha1.VMStatus{Name: "y"}, fastpathv1alpha1.VMStatus{Name: "z", Node: "n2"}),
		siblingAtt("ns", "c-elsewhere", fastpathv1alpha1.VMStatus{Name: "w", Node: "n2"}),
	}
	place := SiblingPlacement{Node: "n1", Launchers: map[types.NamespacedName]bool{{Namespace: "ns", Name: "y"}: true}}
	limits := SiblingLimits{MaxGroups: 1, Running: map[string]bool{"ns/b-running": true}}
	groups, over := SiblingGroupsHere(atts, "/run/fp", place, limits)
	g.Expect(keysOf(groups)).To(Equal([]string{"ns/b-running"}))
	g.Expect(groups[0].VMs).To(HaveLen(2), "the group keeps the slot of its VM on another node")
	g.Expect(over).To(HaveLen(1))
	g.Expect(over[0].String()).To(And(HavePrefix("ns/a-new: not started: "), ContainSubstring("--sibling-max-groups)")))

	// Without the running one, the first by key wins.
	groups, _ = SiblingGroupsHere(atts, "/run/fp", place, SiblingLimits{MaxGroups: 1})
	g.Expect(keysOf(groups)).To(Equal([]string{"ns/a-new"}))

	// Defaults: both fit; the one elsewhere never runs here.
	groups, over = SiblingGroupsHere(atts, "/run/fp", place, SiblingLimits{})
	g.Expect(keysOf(groups)).To(Equal([]string{"ns/a-new", "ns/b-running"}))
	g.Expect(over).To(BeEmpty())
}

// TestLauncherOf: only a pod controlled by a kubevirt.io VMI, bound to this
// node and not finished, puts its VM here.
func TestLauncherOf(t *testing.T) {
	g := NewWithT(t)
	pod := func(apiVersion, kind, node string, phase corev1.PodPhase, controller bool) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "vm1", Controller: ptr.To(controller)}}},
			Spec:       corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase},
		}
	}
	vm, ok := launcherOf(pod("kubevirt.io/v1", "VirtualMachineInstance", "n1", corev1.PodPending, true), "n1")
	g.Expect(ok).To(BeTrue())
	g.Expect(vm).To(Equal("vm1"))
	for name, p := range map[string]*corev1.Pod{
		"other node":     pod("kubevirt.io/v1", "VirtualMachineInstance", "n2", corev1.PodRunning, true),
		"unbound":        pod("kubevirt.io/v1", "VirtualMachineInstance", "", corev1.PodPending, true),
		"finished":       pod("kubevirt.io/v1", "VirtualMachineInstance", "n1", corev1.PodFailed, true),
		"succeeded":      pod("kubevirt.io/v1", "VirtualMachineInstance", "n1", corev1.PodSucceeded, true),
		"other kind":     pod("kubevirt.io/v1", "VirtualMachine", "n1", corev1.PodRunning, true),
		"other group":    pod("example.com/v1", "VirtualMachineInstance", "n1", corev1.PodRunning, true),
		"not controller": pod("kubevirt.io/v1", "VirtualMachineInstance", "n1", corev1.PodRunning, false),
	} {
		_, ok := launcherOf(p, "n1")
		g.Expect(ok).To(BeFalse(), name)
	}
}
