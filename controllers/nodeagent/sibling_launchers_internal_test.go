package nodeagent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

const launcherTestNode = "node-a"

// groupsSupervisor is a SiblingSupervisor that runs nothing and keeps the
// groups of the last Sync; each of them "runs".
type groupsSupervisor struct {
	mu     sync.Mutex
	groups []backend.Group
}

func (s *groupsSupervisor) Sync(groups []backend.Group) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = slices.Clone(groups)
	return nil
}

func (s *groupsSupervisor) Status() []backend.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []backend.Status
	for _, g := range s.groups {
		out = append(out, backend.Status{Key: g.Key, Running: true, PID: 1, Serving: g.VMs})
	}
	return out
}

// siblingWorld is the objects of VM ns/vm that attachment "att-<vm>" wired
// in vsock mode Sibling (status.vms lists it wired, mode Sibling, CID 3,
// on no node yet: its VMI is still being scheduled), its VMI (uid
// "uid-vmi-<vm>") whose status.activePods is active, and a pod bound to
// launcherTestNode named pod (uid "uid-<pod>") that claims to be the VMI's
// launcher (its controller reference, the sibling resource). Only
// activePods tells a real launcher from a forged one.
func siblingWorld(ns, vm, pod string, active map[types.UID]string) []client.Object {
	att := &fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "att-" + vm, UID: types.UID("uid-att-" + vm)},
		Spec:       fastpathv1alpha1.FastPathAttachmentSpec{VSOCK: &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling}},
		Status: fastpathv1alpha1.FastPathAttachmentStatus{VMs: []fastpathv1alpha1.VMStatus{{
			Name: vm, Wired: true, VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To(int64(3))}}},
	}
	rec, err := json.Marshal(wiring.Record{Attachment: att.Name, AttachmentUID: string(att.UID),
		Added: []wiring.Item{wiring.ItemLabel, wiring.ItemVSOCKMode, wiring.ItemSiblingNode, wiring.ItemSiblingResource}})
	if err != nil {
		panic(err)
	}
	v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm, UID: types.UID("uid-vm-" + vm),
		Annotations: map[string]string{wiring.RecordAnnotation: string(rec)}}}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm, UID: types.UID("uid-vmi-" + vm),
			Annotations: map[string]string{fastpathv1alpha1.VSOCKModeAnnotation: string(fastpathv1alpha1.VSOCKModeSibling)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: vm,
				UID: v.UID, Controller: ptr.To(true)}}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{ActivePods: active},
	}
	return []client.Object{att, v, vmi, claimedLauncher(ns, pod, vm, vmi.UID)}
}

// claimedLauncher is pod ns/name (uid "uid-<name>") bound to
// launcherTestNode, controlled by VMI vmi (uid vmiUID) and requesting the
// sibling resource: what a virt-launcher of a Sibling VM looks like, and
// what anyone who may create pods in ns can write.
func claimedLauncher(ns, name, vmi string, vmiUID types.UID) *corev1.Pod {
	sibling := corev1.ResourceList{corev1.ResourceName(fastpathv1alpha1.SiblingResourceName): resource.MustParse("1")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi,
				UID: vmiUID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: launcherTestNode, Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher",
			Resources: corev1.ResourceRequirements{Limits: sibling, Requests: sibling}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// superviseWith runs superviseSiblings once against a fake API holding
// objs, and returns the groups it started and its result.
func superviseWith(t *testing.T, objs ...client.Object) (keys []string, requeue bool) {
	t.Helper()
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(objs...).
		WithStatusSubresource(&fastpathv1alpha1.FastPathAttachment{}, &kubevirtv1.VirtualMachineInstance{}).Build()
	atts := &fastpathv1alpha1.FastPathAttachmentList{}
	g.Expect(c.List(context.Background(), atts)).To(Succeed())
	sup := &groupsSupervisor{}
	r := &Reconciler{Client: c, APIReader: c, NodeName: launcherTestNode, Siblings: sup, SiblingVersion: "0.3.0", SiblingSocketDir: t.TempDir()}
	res, err := r.superviseSiblings(context.Background(), &scope{attachments: atts.Items})
	g.Expect(err).NotTo(HaveOccurred())
	for _, grp := range sup.groups {
		keys = append(keys, grp.Key)
	}
	return keys, res.RequeueAfter > 0
}

// TestForgedLauncherPlacesNoSiblingGroup is issue 39's Low item: a pod
// with a VMI controller reference (and the sibling resource) bound to a
// node made the agent run that VMI's Sibling group there. Only a pod the
// VMI's status.activePods lists on this node, of a VM the operator wired
// in mode Sibling, places the group (deviceplugin.SiblingLauncher, the
// sibling device plugin's check); a forged one places nothing, and one
// virt-controller has not listed yet is looked at again.
func TestForgedLauncherPlacesNoSiblingGroup(t *testing.T) {
	const ns = "tenant-a"
	t.Run("real-launcher-places-its-group", func(t *testing.T) {
		g := NewWithT(t)
		keys, requeue := superviseWith(t, siblingWorld(ns, "db-0", "virt-launcher-db-0", map[types.UID]string{"uid-virt-launcher-db-0": launcherTestNode})...)
		g.Expect(keys).To(ConsistOf(ns + "/att-db-0"))
		g.Expect(requeue).To(BeFalse())
	})
	t.Run("forged-pod-not-in-active-pods", func(t *testing.T) {
		g := NewWithT(t)
		// The VM runs elsewhere (its real launcher is on node-b); the
		// forged pod names the VMI, with its uid, on this node.
		keys, requeue := superviseWith(t, siblingWorld(ns, "db-0", "forged", map[types.UID]string{"uid-real-launcher": "node-b"})...)
		g.Expect(keys).To(BeEmpty(), "a pod not in the VMI's status.activePods places no group")
		g.Expect(requeue).To(BeTrue(), "undecidable until virt-controller lists the pod (or never): looked at again")
	})
	t.Run("forged-pod-active-on-another-node", func(t *testing.T) {
		g := NewWithT(t)
		keys, _ := superviseWith(t, siblingWorld(ns, "db-0", "forged", map[types.UID]string{"uid-forged": "node-b"})...)
		g.Expect(keys).To(BeEmpty())
	})
	t.Run("forged-pod-of-a-vmi-that-does-not-exist", func(t *testing.T) {
		g := NewWithT(t)
		// The VM is stopped: no VMI, no launcher; the forged pod names
		// the VMI it would have.
		objs := siblingWorld(ns, "db-0", "virt-launcher-db-0", nil)[:2]
		objs = append(objs, claimedLauncher(ns, "forged", "db-0", "uid-anything"))
		keys, requeue := superviseWith(t, objs...)
		g.Expect(keys).To(BeEmpty())
		g.Expect(requeue).To(BeFalse(), "a refusal the objects will not change is not retried")
	})
	t.Run("forged-pod-of-an-unwired-vm", func(t *testing.T) {
		g := NewWithT(t)
		objs := siblingWorld(ns, "db-0", "virt-launcher-db-0", map[types.UID]string{"uid-virt-launcher-db-0": launcherTestNode})
		objs[1].SetAnnotations(nil) // the VM carries no wiring record
		keys, _ := superviseWith(t, objs...)
		g.Expect(keys).To(BeEmpty())
	})
	t.Run("listed-before-it-was-bound", func(t *testing.T) {
		g := NewWithT(t)
		// virt-controller listed the pod before the scheduler bound it.
		keys, requeue := superviseWith(t, siblingWorld(ns, "db-0", "virt-launcher-db-0", map[types.UID]string{"uid-virt-launcher-db-0": ""})...)
		g.Expect(keys).To(BeEmpty())
		g.Expect(requeue).To(BeTrue(), "virt-controller updates the entry once it sees the pod bound")
	})
}

// TestLauncherOfNeedsTheSiblingResource: a pod that requests no sibling
// device gets no socket, so it places no group whatever it claims; the
// chart's fastpath-device-requests policy lets only virt-controller create
// a pod that requests one.
func TestLauncherOfNeedsTheSiblingResource(t *testing.T) {
	g := NewWithT(t)
	pod := claimedLauncher("ns", "p", "vm1", "uid-vmi")
	_, ok := launcherOf(pod, launcherTestNode)
	g.Expect(ok).To(BeTrue())
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	_, ok = launcherOf(pod, launcherTestNode)
	g.Expect(ok).To(BeFalse())
}
