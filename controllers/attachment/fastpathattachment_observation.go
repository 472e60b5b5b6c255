package attachment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// reconcileObservation fills the per-VM status from the VMIs and sets Colocated.
func (r *Reconciler) reconcileObservation(ctx context.Context, s *scope) (ctrl.Result, error) {
	netName := v1alpha1.NetworkName(s.att.Name)
	var restart []string
	for _, st := range s.vms {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := r.Cache.Get(ctx, types.NamespacedName{Namespace: s.att.Namespace, Name: st.name}, vmi); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("failed to get VirtualMachineInstance %s/%s: %w", s.att.Namespace, st.name, err)
			}
			vmi = nil
		}
		st.vmi = vmi
		vs := v1alpha1.VMStatus{Name: st.name, Wired: st.wired && st.member()}
		if n := s.spec.Network; n != nil && vs.Wired {
			vs.MTU = *n.MTU
		}
		switch {
		case st.conflict != "":
			vs.Message = st.conflict
		case st.wireErr != nil:
			vs.Message = st.wireErr.Error()
		case vmi == nil:
			vs.Message = "not running: the VM has no VirtualMachineInstance"
		}
		if vmi != nil {
			vs.Node = vmi.Status.NodeName
			for _, iface := range vmi.Status.Interfaces {
				if iface.Name != netName {
					continue
				}
				vs.Interface, vs.PodInterface, vs.MAC = iface.InterfaceName, iface.PodInterfaceName, iface.MAC
				vs.IPs = slices.Clone(iface.IPs)
				if len(vs.IPs) == 0 && iface.IP != "" {
					vs.IPs = []string{iface.IP}
				}
			}
			if vmi.Status.VSOCKCID != nil {
				cid := int64(*vmi.Status.VSOCKCID)
				vs.CID = &cid
			}
			if vs.Wired {
				if missing := missingWiring(vmi, s.desired); len(missing) > 0 {
					vs.RestartRequired = true
					vs.Message = "restart the VM to apply the fast path: the running VMI lacks " + strings.Join(missing, ", ")
					restart = append(restart, st.name)
				}
			}
		}
		st.status = vs
	}
	s.restart = restart
	s.observed = true
	s.setColocated()
	return ctrl.Result{}, nil
}

// onBinding reports whether iface uses the network binding plugin name.
func onBinding(iface kubevirtv1.Interface, name string) bool {
	return iface.Binding != nil && iface.Binding.Name == name
}

// missingWiring lists what the desired wiring adds that the running VMI's spec lacks.
func missingWiring(vmi *kubevirtv1.VirtualMachineInstance, d wiring.Desired) []string {
	name := v1alpha1.NetworkName(d.Attachment)
	var missing []string
	if d.Network != nil {
		if !slices.ContainsFunc(vmi.Spec.Networks, func(n kubevirtv1.Network) bool { return n.Name == name }) {
			missing = append(missing, "network "+name)
		}
		i := slices.IndexFunc(vmi.Spec.Domain.Devices.Interfaces, func(i kubevirtv1.Interface) bool { return i.Name == name })
		switch {
		case i < 0:
			missing = append(missing, "interface "+name)
		case d.Network.Binding != "" && !onBinding(vmi.Spec.Domain.Devices.Interfaces[i], d.Network.Binding):
			// e.g. a VMI started on an earlier Fastpath's bridge: {} wiring
			missing = append(missing, fmt.Sprintf("the network binding plugin %q on interface %s", d.Network.Binding, name))
		}
	}
	if d.Network != nil && len(missing) == 0 {
		// Only for a VMI that has the interface: a missing one implies it.
		if diff := tuningDiff(vmi.Annotations[v1alpha1.TuningAnnotation], name, d.Network.Tuning); diff != "" {
			missing = append(missing, "the current tuning of "+name+" ("+diff+")")
		}
	}
	if d.VSOCK && (vmi.Spec.Domain.Devices.AutoattachVSOCK == nil || !*vmi.Spec.Domain.Devices.AutoattachVSOCK) {
		missing = append(missing, "autoattachVSOCK")
	}
	if d.SiblingVSOCK && vmi.Annotations[v1alpha1.VSOCKModeAnnotation] != string(v1alpha1.VSOCKModeSibling) {
		missing = append(missing, "annotation "+v1alpha1.VSOCKModeAnnotation+"=Sibling")
	}
	return missing
}

// tuningDiff compares the tuning of interface name in a running VMI's
// fastpath.io/tuning annotation (KubeVirt copies the template's annotations
// to the VMI when it starts; the domain hook reads them there) with want:
// "" when equal, "running none" when the VMI has no valid tuning for name,
// else domaintuning.Interface.Diff.
func tuningDiff(annotation, name string, want domaintuning.Interface) string {
	var got domaintuning.Interface
	if a, err := domaintuning.Parse(annotation); err == nil {
		got = a.Interfaces[name]
	}
	if got == (domaintuning.Interface{}) && want != got {
		return "running none"
	}
	return want.Diff(got)
}

// reconcileNodes sets NodesReady from the FastPathNodes of the member VMs' nodes.
func (r *Reconciler) reconcileNodes(ctx context.Context, s *scope) (ctrl.Result, error) {
	nodes := s.memberNodes()
	if len(nodes) == 0 {
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNoRunningVMs, "no selected VM is running")
		return ctrl.Result{}, nil
	}
	var notReady, unknown []string
	for _, node := range nodes {
		fpn := &v1alpha1.FastPathNode{}
		if err := r.Cache.Get(ctx, types.NamespacedName{Name: node}, fpn); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("failed to get FastPathNode %s: %w", node, err)
			}
			unknown = append(unknown, fmt.Sprintf("node %s has no FastPathNode (is fastpath-agent running there?)", node))
			continue
		}
		c := meta.FindStatusCondition(fpn.Status.Conditions, v1alpha1.ReadyCondition)
		switch {
		case c == nil:
			unknown = append(unknown, fmt.Sprintf("FastPathNode %s has no Ready condition yet", node))
		case c.Status != metav1.ConditionTrue:
			notReady = append(notReady, fmt.Sprintf("FastPathNode %s is not Ready (%s): %s", node, c.Reason, c.Message))
		}
	}
	switch {
	case len(notReady) > 0:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNodeNotReady, summarize(append(notReady, unknown...)))
	case len(unknown) > 0:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionUnknown, v1alpha1.ReasonNodeUnknown, summarize(unknown))
	default:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNodesReady, "FastPathNode Ready on "+strings.Join(nodes, ", "))
	}
	return ctrl.Result{}, nil
}
