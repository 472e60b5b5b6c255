package attachment

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Messages of the per-VM vsock status (status.vms[].vsockMessage) when the mode works.
const (
	MsgRelayMode   = "mode Relay: KubeVirt's kernel vhost-vsock; dial CID 2 at the relay ports"
	MsgSiblingMode = "mode Sibling: vhost-user vsock in the attachment's group; dial the target's CID directly"
)

// reconcileSiblingVSOCK is the vsock phase in mode Sibling: it allocates each
// member VM a CID in the attachment's group (kept from the last status, so a
// CID never changes while the VM stays selected), lists every service as
// "<cid>:<port>" and checks that every node running a member VM has the
// vhost-user vsock backend. There are no relay ports: the node agent's
// vhost-device-vsock joins the guests itself, and its group (only the
// attachment's VMs) is the allow-list.
func (r *Reconciler) reconcileSiblingVSOCK(ctx context.Context, s *scope) error {
	previous := map[string]int64{}
	for _, v := range s.base.Status.VMs {
		if v.VSOCKMode == v1alpha1.VSOCKModeSibling && v.CID != nil {
			previous[v.Name] = *v.CID
		}
	}
	var members []string
	for _, st := range s.vms {
		if st.member() {
			members = append(members, st.name)
		}
	}
	cids, allocErr := allocateSiblingCIDs(members, previous)

	capable := map[string]string{} // node -> "" when it can do Sibling, else why not
	var cannot []string
	for _, st := range s.vms {
		st.status.CID = nil
		if !st.member() {
			continue
		}
		st.status.VSOCKMode = v1alpha1.VSOCKModeSibling
		st.status.VSOCKMessage = MsgSiblingMode
		if cid, ok := cids[st.name]; ok {
			st.status.CID = &cid
		}
		node := st.status.Node
		if node == "" {
			continue
		}
		why, seen := capable[node]
		if !seen {
			var err error
			if why, err = r.siblingCapability(ctx, node); err != nil {
				return err
			}
			capable[node] = why
		}
		if why != "" {
			st.status.VSOCKMessage = "mode Sibling, not working: " + why
			cannot = append(cannot, fmt.Sprintf("VM %s: %s", st.name, why))
		}
	}

	byName := map[string]*vmState{}
	for _, st := range s.vms {
		byName[st.name] = st
	}
	var notFound, notRunning []string
	services := make([]v1alpha1.VSOCKServiceStatus, 0, len(s.spec.VSOCK.Services))
	for _, svc := range s.spec.VSOCK.Services {
		out := v1alpha1.VSOCKServiceStatus{Name: svc.Name, VM: svc.VM, Port: svc.Port, Mode: v1alpha1.VSOCKModeSibling}
		target := byName[svc.VM]
		switch {
		case target == nil:
			notFound = append(notFound, fmt.Sprintf("service %s: VirtualMachine %s/%s does not exist", svc.Name, s.att.Namespace, svc.VM))
		case target.vmi == nil:
			notRunning = append(notRunning, fmt.Sprintf("service %s: VM %s is not running", svc.Name, svc.VM))
		case target.vmi.Status.NodeName == "":
			// Created but not yet scheduled: nothing on a node serves it yet.
			msg := fmt.Sprintf("service %s: VM %s is not running on a node yet", svc.Name, svc.VM)
			if why := unschedulable(target.vmi); why != "" {
				msg += fmt.Sprintf(" (the scheduler: %s; mode Sibling places a VM only on a node labelled %s=true, which fastpath-agent labels where it runs the sibling backend, Helm value agent.sibling.enabled)",
					why, v1alpha1.VhostUserVSOCKNodeLabel)
			}
			notRunning = append(notRunning, msg)
		default:
			out.Node = target.vmi.Status.NodeName
		}
		if target != nil && target.status.CID != nil {
			cid := *target.status.CID
			out.TargetCID = &cid
			out.Address = out.DialAddress()
			for _, st := range s.vms {
				if st != target && st.status.CID != nil {
					out.AllowedCIDs = append(out.AllowedCIDs, *st.status.CID)
				}
			}
			slices.Sort(out.AllowedCIDs)
		}
		services = append(services, out)
	}
	s.att.Status.VSOCKServices = services

	switch {
	case allocErr != nil:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonSiblingCIDsExhausted, allocErr.Error())
	case len(cannot) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNodeCannotSibling,
			summarize(cannot)+"; run fastpath-agent with vhost-device-vsock there, or set spec.vsock.mode: Relay")
	case len(notFound) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotFound,
			summarize(append(notFound, notRunning...))+"; the service is reachable once the VirtualMachine is created with labels spec.vmSelector matches")
	case len(notRunning) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotRunning, summarize(notRunning))
	default:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonSiblingReady,
			fmt.Sprintf("%d services reachable at <cid>:<port> in the attachment's vhost-user vsock group", len(services)))
	}
	return nil
}

// unschedulable returns the scheduler's message when the VMI's launcher pod
// cannot be scheduled (the PodScheduled=False condition virt-controller
// copies from the pod onto the VMI), else "".
func unschedulable(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
			return strings.TrimSpace(c.Message)
		}
	}
	return ""
}

// siblingCapability returns "" when the FastPathNode of node reports the
// vhost-user vsock backend, else why the node cannot do Sibling.
func (r *Reconciler) siblingCapability(ctx context.Context, node string) (string, error) {
	fpn := &v1alpha1.FastPathNode{}
	if err := r.Cache.Get(ctx, types.NamespacedName{Name: node}, fpn); err != nil {
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("failed to get FastPathNode %s: %w", node, err)
		}
		return fmt.Sprintf("node %s has no FastPathNode (is fastpath-agent running there?)", node), nil
	}
	if !fpn.Status.Capabilities.VhostUserVSOCK {
		return fmt.Sprintf("node %s cannot do Sibling: its FastPathNode does not report capabilities.vhostUserVSOCK (vhost-device-vsock missing)", node), nil
	}
	return "", nil
}

// allocateSiblingCIDs gives each VM a CID in
// [v1alpha1.MinSiblingCID, v1alpha1.MaxSiblingCID], unique in the list: a
// VM's previous CID when it has one and no other VM kept it, else the lowest
// free one. VMs are taken in list order, so the result is deterministic. The
// error says how many VMs got none when the range is full.
func allocateSiblingCIDs(vms []string, previous map[string]int64) (map[string]int64, error) {
	out := make(map[string]int64, len(vms))
	used := map[int64]bool{}
	for _, vm := range vms {
		if cid, ok := previous[vm]; ok && cid >= v1alpha1.MinSiblingCID && cid <= v1alpha1.MaxSiblingCID && !used[cid] {
			out[vm], used[cid] = cid, true
		}
	}
	next := int64(v1alpha1.MinSiblingCID)
	missing := 0
	for _, vm := range vms {
		if _, ok := out[vm]; ok {
			continue
		}
		for next <= v1alpha1.MaxSiblingCID && used[next] {
			next++
		}
		if next > v1alpha1.MaxSiblingCID {
			missing++
			continue
		}
		out[vm], used[next] = next, true
	}
	if missing > 0 {
		return out, fmt.Errorf("%d VMs got no CID: a Sibling group holds at most %d VMs (CIDs %d-%d)",
			missing, v1alpha1.MaxSiblingCID-v1alpha1.MinSiblingCID+1, v1alpha1.MinSiblingCID, v1alpha1.MaxSiblingCID)
	}
	return out, nil
}
