package nodeagent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// Defaults of the caps on the vhost-device-vsock groups one node runs
// (agent flags --sibling-max-groups and --sibling-max-groups-per-namespace,
// chart values agent.sibling.maxGroups and maxGroupsPerNamespace). A group
// is one process with one thread and two sockets per slot; kubelet's
// default of 110 pods per node bounds the VMs that can use them.
const (
	DefaultSiblingMaxGroups             = 64
	DefaultSiblingMaxGroupsPerNamespace = 16
)

// SiblingPlacement says which VMs of Sibling attachments run, or are being
// started, on this node.
//
// The VMI's status.nodeName (the attachment's status.vms[].node) is not
// enough on its own: virt-controller sets it only when the launcher pod is
// Ready (KubeVirt pkg/virt-controller/watch/vmi: phase Scheduling →
// Scheduled), and the pod's compute container cannot start before the
// sibling device plugin's PreStartContainer linked the VM's socket, which
// exists only once this node runs the group. The launcher pod bound to this
// node (spec.nodeName, set by the scheduler before kubelet admits the pod)
// breaks that circle: the agent starts the group then, and kubelet, which
// retries a container whose PreStartContainer failed, starts it once the
// socket is there.
type SiblingPlacement struct {
	// Node is this node's name.
	Node string
	// Launchers are the VMs ("<namespace>/<vm>") with a virt-launcher pod
	// bound to Node that has not finished (siblingLaunchers).
	Launchers map[types.NamespacedName]bool
}

// Here reports whether VM vm of an attachment in namespace runs or is being
// started on this node.
func (p SiblingPlacement) Here(namespace string, vm fastpathv1alpha1.VMStatus) bool {
	return (p.Node != "" && vm.Node == p.Node) || p.Launchers[types.NamespacedName{Namespace: namespace, Name: vm.Name}]
}

// SiblingLimits caps the groups one node runs.
type SiblingLimits struct {
	// MaxGroups caps the groups of the node; 0 is DefaultSiblingMaxGroups.
	MaxGroups int
	// MaxGroupsPerNamespace caps the groups of one namespace on the node;
	// 0 is DefaultSiblingMaxGroupsPerNamespace.
	MaxGroupsPerNamespace int
	// Running are the keys of the groups that run now: they keep their
	// place under the caps before any group that does not (a new group
	// never displaces a running one).
	Running map[string]bool
}

// SiblingOverCap is a group with a member VM on this node that the caps
// leave out.
type SiblingOverCap struct {
	// Key is the attachment, "<namespace>/<name>".
	Key string
	// Why names the cap.
	Why string
}

func (o SiblingOverCap) String() string { return o.Key + ": not started: " + o.Why }

// SiblingGroupsHere returns the groups of SiblingGroups(atts, socketDir)
// that this node runs: those with at least one slot whose VM is here
// (placement.Here), within limits. A group keeps every slot, also those of
// VMs on other nodes, so a VM that comes to this node later joins without a
// restart (an idle slot is one listening socket). Groups are taken running
// ones first, then by key; those over a cap come back in over, by key.
func SiblingGroupsHere(atts []fastpathv1alpha1.FastPathAttachment, socketDir string, placement SiblingPlacement, limits SiblingLimits) (groups []backend.Group, over []SiblingOverCap) {
	here := map[string]bool{}
	for _, a := range atts {
		if a.Spec.VSOCK == nil || a.Spec.VSOCK.Mode != fastpathv1alpha1.VSOCKModeSibling {
			continue
		}
		for _, vm := range a.Status.VMs {
			if vm.VSOCKMode == fastpathv1alpha1.VSOCKModeSibling && vm.CID != nil && placement.Here(a.Namespace, vm) {
				here[a.Namespace+"/"+a.Name] = true
			}
		}
	}
	var candidates []backend.Group
	for _, g := range SiblingGroups(atts, socketDir) {
		if here[g.Key] {
			candidates = append(candidates, g)
		}
	}
	slices.SortStableFunc(candidates, func(a, b backend.Group) int {
		if ra, rb := limits.Running[a.Key], limits.Running[b.Key]; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	maxNode, maxNS := limits.MaxGroups, limits.MaxGroupsPerNamespace
	if maxNode <= 0 {
		maxNode = DefaultSiblingMaxGroups
	}
	if maxNS <= 0 {
		maxNS = DefaultSiblingMaxGroupsPerNamespace
	}
	perNS := map[string]int{}
	for _, g := range candidates {
		ns, _, _ := strings.Cut(g.Key, "/")
		switch {
		case len(groups) >= maxNode:
			over = append(over, SiblingOverCap{Key: g.Key, Why: fmt.Sprintf("this node already runs %d vhost-device-vsock groups, its cap (agent --sibling-max-groups)", maxNode)})
		case perNS[ns] >= maxNS:
			over = append(over, SiblingOverCap{Key: g.Key, Why: fmt.Sprintf("this node already runs %d vhost-device-vsock groups of namespace %s, its cap (agent --sibling-max-groups-per-namespace)", maxNS, ns)})
		default:
			groups = append(groups, g)
			perNS[ns]++
		}
	}
	slices.SortFunc(groups, func(a, b backend.Group) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(over, func(a, b SiblingOverCap) int { return strings.Compare(a.Key, b.Key) })
	return groups, over
}

// siblingLaunchers returns the VMs whose virt-launcher pod is bound to this
// node and not finished: pods controlled by a kubevirt.io
// VirtualMachineInstance (KubeVirt names a VM's VMI, and so the controller
// reference, after the VM). The agent's cache holds only this node's pods
// (CacheOptions); the node name is checked again here. A pod being deleted
// still counts: its QEMU may still hold the socket.
func (r *Reconciler) siblingLaunchers(ctx context.Context) (map[types.NamespacedName]bool, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("failed to list the pods of node %s: %w", r.NodeName, err)
	}
	out := map[types.NamespacedName]bool{}
	for i := range pods.Items {
		if vm, ok := launcherOf(&pods.Items[i], r.NodeName); ok {
			out[types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: vm}] = true
		}
	}
	return out, nil
}

// launcherOf returns the VM (VMI) name of pod when it is a virt-launcher pod
// bound to node that has not finished.
func launcherOf(pod *corev1.Pod, node string) (string, bool) {
	if pod.Spec.NodeName == "" || pod.Spec.NodeName != node ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", false
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != vmiKind || !strings.HasPrefix(owner.APIVersion, "kubevirt.io/") {
		return "", false
	}
	return owner.Name, true
}

// vmiKind is the kind of the controller of a virt-launcher pod.
const vmiKind = "VirtualMachineInstance"

// launcherEvents passes the pod events that can change siblingLaunchers:
// a virt-launcher pod of node created, deleted, bound or finished.
func launcherEvents(node string) predicate.Funcs {
	launcher := func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		if !ok {
			return false
		}
		_, ok = launcherOf(pod, node)
		return ok
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return launcher(e.Object) },
		// A finished pod no longer counts, so its deletion changes nothing.
		DeleteFunc: func(e event.DeleteEvent) bool { return launcher(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return false
			}
			vo, io := launcherOf(o, node)
			vn, in := launcherOf(n, node)
			return io != in || vo != vn
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
