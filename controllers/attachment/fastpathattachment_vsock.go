package attachment

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// reconcileVSOCK allocates relay ports and computes the relay routes.
func (r *Reconciler) reconcileVSOCK(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.spec.VSOCK == nil {
		r.ports.release(s.key())
		s.att.Status.VSOCKServices = nil
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNotRequested, "spec.vsock is not set")
		return ctrl.Result{}, nil
	}
	if s.spec.VSOCK.Mode == v1alpha1.VSOCKModeSibling {
		r.ports.release(s.key())
		return ctrl.Result{}, r.reconcileSiblingVSOCK(ctx, s)
	}
	for _, st := range s.vms {
		if st.member() {
			st.status.VSOCKMode, st.status.VSOCKMessage = v1alpha1.VSOCKModeRelay, MsgRelayMode
		}
	}
	all := &v1alpha1.FastPathAttachmentList{}
	if err := r.Cache.List(ctx, all); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	pairs := map[string]int64{}
	for _, a := range all.Items {
		for _, svc := range a.Status.VSOCKServices {
			if svc.RelayPort > 0 {
				pairs[portKey(a.Namespace+"/"+a.Name, svc.Name)] = svc.RelayPort
			}
		}
	}
	previous := map[string]int64{}
	for _, svc := range s.att.Status.VSOCKServices {
		previous[svc.Name] = svc.RelayPort
	}
	byName := map[string]*vmState{}
	for _, st := range s.vms {
		byName[st.name] = st
	}
	// A service holds a relay port only once its target VM runs (and keeps
	// it while the VM exists): attachments naming VMs that never run cannot
	// take the range from everyone.
	var names []string
	for _, svc := range s.spec.VSOCK.Services {
		if target := byName[svc.VM]; target != nil && (target.vmi != nil || previous[svc.Name] > 0) {
			names = append(names, svc.Name)
		}
	}
	ports, allocErr := r.ports.assign(s.key(), names, previous, claimsFrom(pairs))
	var notFound, notRunning, noCID []string
	for _, st := range s.vms {
		if st.member() && st.vmi != nil && st.vmi.Status.VSOCKCID == nil {
			noCID = append(noCID, st.name)
		}
	}
	services := make([]v1alpha1.VSOCKServiceStatus, 0, len(s.spec.VSOCK.Services))
	for _, svc := range s.spec.VSOCK.Services {
		out := v1alpha1.VSOCKServiceStatus{Name: svc.Name, VM: svc.VM, Port: svc.Port, RelayPort: ports[svc.Name], Mode: v1alpha1.VSOCKModeRelay}
		out.Address = out.DialAddress()
		target := byName[svc.VM]
		switch {
		case target == nil:
			// reconcileSelection rejected a target that exists unselected.
			notFound = append(notFound, fmt.Sprintf("service %s: VirtualMachine %s/%s does not exist", svc.Name, s.att.Namespace, svc.VM))
			services = append(services, out)
			continue
		case target.vmi == nil:
			notRunning = append(notRunning, fmt.Sprintf("service %s: VM %s is not running", svc.Name, svc.VM))
			services = append(services, out)
			continue
		}
		out.Node = target.vmi.Status.NodeName
		out.TargetCID = target.status.CID
		for _, st := range s.vms {
			if st == target || !st.member() || st.vmi == nil || st.status.CID == nil || st.status.Node != out.Node || out.Node == "" {
				continue
			}
			out.AllowedCIDs = append(out.AllowedCIDs, *st.status.CID)
		}
		slices.Sort(out.AllowedCIDs)
		out.AllowedCIDs = slices.Compact(out.AllowedCIDs)
		services = append(services, out)
	}
	s.att.Status.VSOCKServices = services
	for _, st := range s.vms {
		if !st.member() {
			continue
		}
		for _, svc := range services {
			if svc.VM != st.name && svc.RelayPort > 0 {
				st.status.RelayPorts = append(st.status.RelayPorts, v1alpha1.RelayPort{Service: svc.Name, Port: svc.RelayPort})
			}
		}
	}
	switch {
	case errors.Is(allocErr, errNamespacePorts):
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonRelayPortsExhausted,
			fmt.Sprintf("%v: remove vsock services of this namespace, or ask the cluster admin to raise the operator's --relay-ports-per-namespace", allocErr))
	case allocErr != nil:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonRelayPortsExhausted,
			fmt.Sprintf("%v: widen --relay-port-range or remove vsock services", allocErr))
	case len(notFound) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotFound,
			summarize(append(notFound, notRunning...))+"; the route is set up once the VirtualMachine is created with labels spec.vmSelector matches")
	case len(notRunning) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotRunning, summarize(notRunning))
	case len(noCID) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNoCID,
			fmt.Sprintf("VMs without a vsock CID in VMI status.VSOCKCID: %s; enable the KubeVirt VSOCK feature gate and restart them", joinNames(noCID)))
	default:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonVSOCKReady,
			fmt.Sprintf("%d relay routes with target CIDs", len(services)))
	}
	return ctrl.Result{}, nil
}
