package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// SiblingSupervisor runs the vhost-device-vsock groups of vsock mode Sibling;
// *backend.Supervisor is the real one.
type SiblingSupervisor interface {
	// Sync makes the supervisor serve exactly groups.
	Sync(groups []backend.Group) error
	// Status returns every group's process state.
	Status() []backend.Status
}

// SiblingGroups returns the vhost-device-vsock groups of the attachments in
// vsock mode Sibling: one per attachment, with a slot for every VM the
// operator gave a group CID (status.vms[].cid with vsockMode Sibling), running
// or not, so a VM that starts later joins without a restart. Sockets are
// <socketDir>/<base of v1alpha1.SiblingSocketPath> (.vhost for QEMU, .vsock
// for the hybrid host side); socketDir "" is v1alpha1.SiblingSocketDir.
// Attachments being deleted get no group. Which of them a node runs is
// SiblingGroupsHere's choice.
func SiblingGroups(atts []fastpathv1alpha1.FastPathAttachment, socketDir string) []backend.Group {
	if socketDir == "" {
		socketDir = fastpathv1alpha1.SiblingSocketDir
	}
	var groups []backend.Group
	for _, a := range atts {
		if a.DeletionTimestamp != nil || a.Spec.VSOCK == nil || a.Spec.VSOCK.Mode != fastpathv1alpha1.VSOCKModeSibling {
			continue
		}
		g := backend.Group{Key: a.Namespace + "/" + a.Name}
		for _, vm := range a.Status.VMs {
			if vm.VSOCKMode != fastpathv1alpha1.VSOCKModeSibling || vm.CID == nil {
				continue
			}
			base := strings.TrimSuffix(filepath.Base(fastpathv1alpha1.SiblingSocketPath(a.Namespace, vm.Name)), ".vhost")
			g.VMs = append(g.VMs, backend.VM{
				Name: vm.Name, CID: uint32(*vm.CID),
				Socket:  filepath.Join(socketDir, base+".vhost"),
				UDSPath: filepath.Join(socketDir, base+".vsock"),
			})
		}
		if len(g.VMs) > 0 {
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b backend.Group) int { return strings.Compare(a.Key, b.Key) })
	return groups
}

// superviseSiblings syncs the Sibling groups and reads back their processes.
func (r *Reconciler) superviseSiblings(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.Siblings == nil {
		return ctrl.Result{}, nil
	}
	obs := &s.observed
	launchers, err := r.siblingLaunchers(ctx)
	if err != nil {
		// Without knowing which VMs are here, keep the processes as they are.
		obs.siblingErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the virt-launcher pods of this node")
		return r.retry(), nil
	}
	running := map[string]bool{}
	for _, st := range r.Siblings.Status() {
		running[st.Key] = true
	}
	var over []SiblingOverCap
	obs.siblingGroups, over = SiblingGroupsHere(s.attachments, r.SiblingSocketDir,
		SiblingPlacement{Node: r.NodeName, Launchers: launchers},
		SiblingLimits{MaxGroups: r.SiblingMaxGroups, MaxGroupsPerNamespace: r.SiblingMaxGroupsPerNamespace, Running: running})
	if err := r.Siblings.Sync(obs.siblingGroups); err != nil {
		obs.siblingErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to sync the vhost-device-vsock groups")
	}
	for _, o := range over {
		obs.siblingOver = append(obs.siblingOver, o.String())
	}
	for _, st := range r.Siblings.Status() {
		bs := fastpathv1alpha1.SiblingBackendStatus{Attachment: st.Key, Running: st.Running, PID: int64(st.PID), Restarts: st.Restarts, Message: st.Message}
		for _, vm := range st.Serving {
			bs.VMs = append(bs.VMs, fmt.Sprintf("%s=%d", vm.Name, vm.CID))
		}
		if !st.Running {
			obs.siblingDown = append(obs.siblingDown, fmt.Sprintf("%s: %s", st.Key, st.Message))
		}
		obs.siblings = append(obs.siblings, bs)
	}
	for _, o := range over {
		obs.siblings = append(obs.siblings, fastpathv1alpha1.SiblingBackendStatus{Attachment: o.Key, Message: "not started: " + o.Why})
	}
	slices.SortFunc(obs.siblings, func(a, b fastpathv1alpha1.SiblingBackendStatus) int {
		return strings.Compare(a.Attachment, b.Attachment)
	})
	if obs.siblingErr != nil || len(obs.siblingDown) > 0 {
		return r.retry(), nil
	}
	return ctrl.Result{}, nil
}

// labelNode keeps v1alpha1.VhostUserVSOCKNodeLabel on this node's Node
// object saying what the agent can do now: "true" while it runs with the
// vhost-user vsock backend, absent without it. The operator's nodeSelector
// on the VMs of Sibling attachments then keeps them off nodes that cannot
// serve them. A node without a Node object (the local environment) is left
// alone; a failed read or patch is reported and retried.
func (r *Reconciler) labelNode(ctx context.Context, s *scope) (ctrl.Result, error) {
	want := r.Siblings != nil && r.siblingVersion() != ""
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	node := &corev1.Node{}
	if err := reader.Get(ctx, types.NamespacedName{Name: r.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		s.nodeLabelErr = fmt.Errorf("failed to read Node %s to set its label %s: %w", r.NodeName, fastpathv1alpha1.VhostUserVSOCKNodeLabel, err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to read the Node", "label", fastpathv1alpha1.VhostUserVSOCKNodeLabel)
		return r.retry(), nil
	}
	cur, has := node.Labels[fastpathv1alpha1.VhostUserVSOCKNodeLabel]
	if (want && cur == "true") || (!want && !has) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if want {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[fastpathv1alpha1.VhostUserVSOCKNodeLabel] = "true"
	} else {
		delete(node.Labels, fastpathv1alpha1.VhostUserVSOCKNodeLabel)
	}
	if err := r.Client.Patch(ctx, node, patch); err != nil {
		s.nodeLabelErr = fmt.Errorf("failed to set label %s on Node %s: %w", fastpathv1alpha1.VhostUserVSOCKNodeLabel, r.NodeName, err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to label the Node", "label", fastpathv1alpha1.VhostUserVSOCKNodeLabel)
		return r.retry(), nil
	}
	ctrl.LoggerFrom(ctx).Info("Labelled the Node for vsock mode Sibling", "label", fastpathv1alpha1.VhostUserVSOCKNodeLabel, "set", want)
	return ctrl.Result{}, nil
}

// siblingCapabilities adds the vhost-user vsock backend to the probed
// capabilities: the agent has a supervisor and a backend version.
func (r *Reconciler) siblingCapabilities(obs *observed) {
	if v := r.siblingVersion(); r.Siblings != nil && v != "" {
		obs.caps.VhostUserVSOCK, obs.caps.VhostUserVSOCKVersion = true, v
	}
}

// SiblingVersioner is a SiblingSupervisor that learns the vhost-device-vsock
// version as it runs (backend.Client: from the backend pod's status, "" while
// that does not answer).
type SiblingVersioner interface {
	Version() string
}

// siblingVersion is SiblingVersion, else what Siblings reports: "" while a
// separate backend does not answer, so the node loses its Sibling label and
// capability until it does.
func (r *Reconciler) siblingVersion() string {
	if r.SiblingVersion != "" {
		return r.SiblingVersion
	}
	if v, ok := r.Siblings.(SiblingVersioner); ok {
		return v.Version()
	}
	return ""
}

// setSiblingBackendsReadyCondition: True when every group's process runs,
// False (SiblingBackendFailed) otherwise; absent on an agent without the
// backend and no Sibling attachment.
func setSiblingBackendsReadyCondition(conds *[]metav1.Condition, obs *observed, gen int64, has bool) {
	c := metav1.Condition{Type: fastpathv1alpha1.SiblingBackendsReadyCondition, ObservedGeneration: gen}
	switch {
	case !has:
		meta.RemoveStatusCondition(conds, c.Type)
		return
	case obs.siblingErr != nil || len(obs.siblingDown) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonSiblingBackendFailed
		var parts []string
		if obs.siblingErr != nil {
			parts = append(parts, obs.siblingErr.Error())
		}
		c.Message = joinMessages(append(parts, obs.siblingDown...))
	case len(obs.siblingOver) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fastpathv1alpha1.ReasonSiblingGroupsOverCap
		c.Message = joinMessages(obs.siblingOver)
	case obs.nodeLabelErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fastpathv1alpha1.ReasonNodeLabelFailed, obs.nodeLabelErr.Error()
	case obs.siblingPluginErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fastpathv1alpha1.ReasonSiblingDevicePluginFailed, obs.siblingPluginErr.Error()
	case len(obs.siblings) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fastpathv1alpha1.ReasonNoSiblingBackends, "no FastPathAttachment in vsock mode Sibling has a member VM on this node"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fastpathv1alpha1.ReasonSiblingBackendsRunning
		c.Message = fmt.Sprintf("%d vhost-device-vsock %s running", len(obs.siblings), r2(len(obs.siblings)))
	}
	meta.SetStatusCondition(conds, c)
}

func r2(n int) string {
	if n == 1 {
		return "group"
	}
	return "groups"
}
