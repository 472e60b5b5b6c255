package deviceplugin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// vmKind is the kind of the controller of a VM's VirtualMachineInstance.
const vmKind = "VirtualMachine"

// wiredLauncher is a pod verified as the virt-launcher, on this node, of
// the VirtualMachineInstance of a VirtualMachine that a FastPathAttachment
// wired: what verifyLauncher found.
type wiredLauncher struct {
	pod *corev1.Pod
	vmi *kubevirtv1.VirtualMachineInstance
	// rec is the VM's wiring record (annotation fastpath.io/wiring).
	rec *wiring.Record
	// att is the attachment rec names, with the uid rec names.
	att *fastpathv1alpha1.FastPathAttachment
	// vm is att's status.vms entry of the VM, wired.
	vm fastpathv1alpha1.VMStatus
}

// verifyLauncher decides whether the pod key is the virt-launcher pod, on
// node, of a VirtualMachineInstance whose VirtualMachine the operator wired.
// It returns what it found, or the pod (when it exists, for events) with
// reason: it is not, and the objects will not change that; or err: it
// cannot be decided now (API errors; the pod not yet in its VMI's
// status.activePods, which virt-controller fills once the pod exists, as
// for a migration target that is starting; the attachment's status not yet
// listing the VM as wired). Which resource the wiring is for is the
// caller's check (wiredFor*).
//
// The chain, each link written by whom a tenant cannot impersonate:
//  1. the pod is bound to node and its controller reference names a VMI
//     with the VMI's uid;
//  2. the VMI's status.activePods (written by virt-controller only: status
//     is a subresource tenants are not granted) lists the pod's uid on
//     node: virt-controller lists exactly the pods the VMI controls
//     (pkg/virt-controller/watch/vmi lifecycle.go setActivePods, KubeVirt v1.6);
//  3. the VMI's controller reference names a VirtualMachine with its uid
//     (a VMI created on its own is never wired);
//  4. the VM's wiring record (internal/vm/wiring) names a
//     FastPathAttachment of the VM's namespace, and the attachment exists
//     with the uid the record names;
//  5. that attachment's status.vms (written by the operator only) lists the
//     VM as wired.
//
// The record alone proves nothing (a tenant may write a VM's annotations);
// it says which attachment to ask. Every object is read in the pod's
// namespace, so a pod is never checked against another namespace's VM.
func verifyLauncher(ctx context.Context, r client.Reader, node string, key types.NamespacedName) (w *wiredLauncher, obj *corev1.Pod, reason string, err error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("pod %s does not exist", key), nil
		}
		return nil, nil, "", fmt.Errorf("failed to read pod %s: %w", key, err)
	}
	if pod.Spec.NodeName != node {
		return nil, pod, fmt.Sprintf("pod %s is bound to node %q, not %s", key, pod.Spec.NodeName, node), nil
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != vmiKind || !strings.HasPrefix(owner.APIVersion, kubevirtv1.SchemeGroupVersion.Group+"/") {
		return nil, pod, fmt.Sprintf("pod %s is not controlled by a %s (not a virt-launcher pod)", key, vmiKind), nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: owner.Name}, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, pod, fmt.Sprintf("the %s %s/%s controlling pod %s does not exist", vmiKind, key.Namespace, owner.Name, key), nil
		}
		return nil, pod, "", fmt.Errorf("failed to read %s %s/%s: %w", vmiKind, key.Namespace, owner.Name, err)
	}
	if vmi.UID != owner.UID {
		return nil, pod, fmt.Sprintf("pod %s names %s %s/%s uid %s as its controller, but that VMI has uid %s", key, vmiKind, key.Namespace, owner.Name, owner.UID, vmi.UID), nil
	}
	at, active := vmi.Status.ActivePods[pod.UID]
	if !active {
		return nil, pod, "", fmt.Errorf("pod %s (uid %s) is not in status.activePods of %s %s/%s yet", key, pod.UID, vmiKind, key.Namespace, vmi.Name)
	}
	if at != node {
		return nil, pod, fmt.Sprintf("status.activePods of %s %s/%s places pod %s on node %q, not %s", vmiKind, key.Namespace, vmi.Name, key, at, node), nil
	}
	vmOwner := metav1.GetControllerOf(vmi)
	if vmOwner == nil || vmOwner.Kind != vmKind || !strings.HasPrefix(vmOwner.APIVersion, kubevirtv1.SchemeGroupVersion.Group+"/") {
		return nil, pod, fmt.Sprintf("%s %s/%s is not controlled by a %s: the operator wires VMs only", vmiKind, key.Namespace, vmi.Name, vmKind), nil
	}
	vm := &metav1.PartialObjectMetadata{}
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	vmKey := types.NamespacedName{Namespace: key.Namespace, Name: vmOwner.Name}
	if err := r.Get(ctx, vmKey, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, pod, fmt.Sprintf("the %s %s controlling %s %s/%s does not exist", vmKind, vmKey, vmiKind, key.Namespace, vmi.Name), nil
		}
		return nil, pod, "", fmt.Errorf("failed to read %s %s: %w", vmKind, vmKey, err)
	}
	if vm.UID != vmOwner.UID {
		return nil, pod, fmt.Sprintf("%s %s/%s names %s %s uid %s as its controller, but that VM has uid %s", vmiKind, key.Namespace, vmi.Name, vmKind, vmKey, vmOwner.UID, vm.UID), nil
	}
	rec, err := wiring.RecordFromAnnotations(vm.Annotations)
	if err != nil {
		return nil, pod, fmt.Sprintf("%s %s: %v", vmKind, vmKey, err), nil
	}
	if rec == nil {
		return nil, pod, fmt.Sprintf("%s %s carries no wiring record (annotation %s): no FastPathAttachment wired it", vmKind, vmKey, wiring.RecordAnnotation), nil
	}
	att := &fastpathv1alpha1.FastPathAttachment{}
	attKey := types.NamespacedName{Namespace: key.Namespace, Name: rec.Attachment}
	if err := r.Get(ctx, attKey, att); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, pod, fmt.Sprintf("the FastPathAttachment %s named by the wiring record of %s %s does not exist", attKey, vmKind, vmKey), nil
		}
		return nil, pod, "", fmt.Errorf("failed to read FastPathAttachment %s: %w", attKey, err)
	}
	if rec.AttachmentUID != "" && string(att.UID) != rec.AttachmentUID {
		return nil, pod, fmt.Sprintf("the wiring record of %s %s names FastPathAttachment %s uid %s, but that attachment has uid %s", vmKind, vmKey, attKey, rec.AttachmentUID, att.UID), nil
	}
	i := slices.IndexFunc(att.Status.VMs, func(v fastpathv1alpha1.VMStatus) bool { return v.Name == vm.Name })
	if i < 0 || !att.Status.VMs[i].Wired {
		return nil, pod, "", fmt.Errorf("FastPathAttachment %s does not list %s %s as wired (status.vms) yet", attKey, vmKind, vm.Name)
	}
	return &wiredLauncher{pod: pod, vmi: vmi, rec: rec, att: att, vm: att.Status.VMs[i]}, pod, "", nil
}

// wiredForSibling returns why w is not wired for v1alpha1.SiblingResourceName
// ("" when it is) and an error while the attachment's status has not caught
// up: the VMI runs in vsock mode Sibling (annotation
// v1alpha1.VSOCKModeAnnotation), the VM's record lists the resource limit
// as the operator's (wiring.ItemSiblingResource), and the attachment's
// status gives the VM mode Sibling.
func (w *wiredLauncher) wiredForSibling() (reason string, err error) {
	ns := w.vmi.Namespace
	if mode := w.vmi.Annotations[fastpathv1alpha1.VSOCKModeAnnotation]; mode != string(fastpathv1alpha1.VSOCKModeSibling) {
		return fmt.Sprintf("%s %s/%s is not in vsock mode Sibling (annotation %s is %q)", vmiKind, ns, w.vmi.Name, fastpathv1alpha1.VSOCKModeAnnotation, mode), nil
	}
	if !slices.Contains(w.rec.Added, wiring.ItemSiblingResource) {
		return fmt.Sprintf("FastPathAttachment %s/%s did not put %s into %s %s/%s (its wiring record has no %s)",
			ns, w.att.Name, fastpathv1alpha1.SiblingResourceName, vmKind, ns, w.vm.Name, wiring.ItemSiblingResource), nil
	}
	if w.vm.VSOCKMode != fastpathv1alpha1.VSOCKModeSibling {
		return "", fmt.Errorf("FastPathAttachment %s/%s does not give %s %s vsock mode Sibling (status.vms[].vsockMode %q) yet", ns, w.att.Name, vmKind, w.vm.Name, w.vm.VSOCKMode)
	}
	return "", nil
}

// wiredForMacvtap returns why w is not wired for the macvtap resource of
// lower device lower ("" when it is): the attachment that wired the VM
// added its network (wiring.ItemNetwork) and is, by its status, on datapath
// Macvtap with that lower device (status.datapath, status.bridge).
func (w *wiredLauncher) wiredForMacvtap(lower string) string {
	ns := w.vmi.Namespace
	if !slices.Contains(w.rec.Added, wiring.ItemNetwork) {
		return fmt.Sprintf("FastPathAttachment %s/%s added no network to %s %s/%s (its wiring record has no %s)", ns, w.att.Name, vmKind, ns, w.vm.Name, wiring.ItemNetwork)
	}
	if st := w.att.Status; st.Datapath != fastpathv1alpha1.DatapathMacvtap || st.Bridge != lower {
		return fmt.Sprintf("FastPathAttachment %s/%s, which wired %s %s/%s, is on datapath %q with bridge %q (status.datapath, status.bridge), not on Macvtap lower device %s",
			ns, w.att.Name, vmKind, ns, w.vm.Name, st.Datapath, st.Bridge, lower)
	}
	return ""
}

// holdersOf returns, by device ID of resource, the pod kubelet assigned it
// to, from kubelet's PodResources API.
func holdersOf(ctx context.Context, l PodResourcesLister, resource string) (map[string]types.NamespacedName, error) {
	pods, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]types.NamespacedName{}
	for _, p := range pods {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() != resource {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					out[id] = types.NamespacedName{Namespace: p.GetNamespace(), Name: p.GetName()}
				}
			}
		}
	}
	return out, nil
}

// MacvtapLaunchers checks, before kubelet starts a container holding
// macvtap devices, that the container is the compute container of a
// virt-launcher the operator wired for that Macvtap network.
//
// Kubelet's Allocate names devices, never the pod (device plugin API
// v1beta1: AllocateRequest carries device IDs only, and the pod is not in
// kubelet's PodResources API until Allocate has returned), so the check is
// in PreStartContainer, which kubelet calls after Allocate and after the
// pod's sandbox (and its CNI ADD) exists, before every start of the
// container: an error there fails the start, so /dev/tap<N> never reaches
// a container that is not verified. Kubelet keeps the devices assigned to
// the pod until it ends, and retries the start (about every 10 s, backing
// off), verifying afresh each time.
//
// Fill in every field; its methods are safe for concurrent use.
type MacvtapLaunchers struct {
	// NodeName is this node: only pods and VMI entries on it qualify.
	NodeName string
	// PodResources finds the pod that holds a device.
	PodResources PodResourcesLister
	// Reader reads Pods, VirtualMachineInstances, VirtualMachines (their
	// metadata) and FastPathAttachments, uncached.
	Reader client.Reader
	// Log receives a line per verified or refused start.
	Log logr.Logger
}

// Resource returns MacvtapResource(lower, capacity) with a PreStart that
// runs the check.
func (l *MacvtapLaunchers) Resource(lower string, capacity int) Resource {
	res := MacvtapResource(lower, capacity)
	res.PreStart = func(ctx context.Context, ids []string) error { return l.preStart(ctx, res.Name, lower, ids) }
	return res
}

// preStart verifies the holder of ids: exactly one device (a wired VM has
// one interface on the attachment's network), held by a pod that
// verifyLauncher accepts, whose attachment is on lower device lower.
func (l *MacvtapLaunchers) preStart(ctx context.Context, resource, lower string, ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("failed to prepare %s: kubelet named no device", resource)
	}
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	holders, err := holdersOf(ctx, l.PodResources, resource)
	if err != nil {
		return fmt.Errorf("failed to find the pod holding %s devices %v: %w", resource, ids, err)
	}
	pod, ok := holders[ids[0]]
	if !ok {
		return fmt.Errorf("failed to prepare %s device %s: kubelet's PodResources API lists no pod holding it", resource, ids[0])
	}
	if len(ids) != 1 {
		return fmt.Errorf("refused %s devices %v to pod %s: a virt-launcher's container gets exactly 1 (the one interface of the FastPathAttachment that wired its VM), not %d",
			resource, ids, pod, len(ids))
	}
	w, _, reason, err := verifyLauncher(ctx, l.Reader, l.NodeName, pod)
	if err != nil {
		return fmt.Errorf("failed to verify pod %s holding %s device %s: %w", pod, resource, ids[0], err)
	}
	if reason == "" {
		reason = w.wiredForMacvtap(lower)
	}
	if reason != "" {
		l.Log.Info("Refused a macvtap device to a pod the operator did not wire for it", "resource", resource, "device", ids[0], "pod", pod.String(), "reason", reason)
		return fmt.Errorf("refused %s device %s to pod %s: %s", resource, ids[0], pod, reason)
	}
	l.Log.V(1).Info("Verified the virt-launcher holding a macvtap device", "resource", resource, "device", ids[0], "pod", pod.String(), "vm", w.vm.Name, "attachment", w.att.Name)
	return nil
}
