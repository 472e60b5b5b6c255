package attachment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// Group moves (spec.eviction MigrateTogether; docs/design.md §3.2).
//
// A member VM must leave its node when KubeVirt marks its VMI for
// evacuation (status.evacuationNodeName: a drain's eviction of the launcher
// pod, denied because the operator wired evictionStrategy External) or when
// a VirtualMachineInstanceMigration the operator did not create targets it
// (KubeVirt's workload updater, a user's). The operator then moves every
// member VM on that node to one node chosen for all of them (chooseTarget):
// it records the move in status.move, leaves the pod affinity term out of
// the moving VMs (desiredFor; KubeVirt's LiveUpdate applies that to the
// running VMIs), deletes the migrations it did not create, creates one
// migration per VM with addedNodeSelector naming the target, and when all
// arrived puts the term back and clears status.move.
const (
	// MoveLabel marks the VirtualMachineInstanceMigrations the operator
	// creates for a group move; its value is the attachment's name.
	MoveLabel = "fastpath.io/move"
	// moveRequeue paces a running move between watch events.
	moveRequeue = 5 * time.Second
	// noTargetRequeue is how often a group with nowhere to go looks again
	// (node, FastPathNode and pod changes are not all watched).
	noTargetRequeue = 30 * time.Second
	// moveRetryPause is how long a failed move waits before the next try.
	moveRetryPause = time.Minute
	// liveUpdateGrace is how long a move waits for KubeVirt to apply the
	// affinity change to a VMI before saying so in the condition.
	liveUpdateGrace = time.Minute
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// reconcileMove starts, advances and ends group moves.
func (r *Reconciler) reconcileMove(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.spec.Eviction != v1alpha1.EvictionMigrateTogether || r.KubeVirtAbsent {
		s.att.Status.Move = nil
		meta.RemoveStatusCondition(&s.att.Status.Conditions, v1alpha1.MovedTogetherCondition)
		return ctrl.Result{}, nil
	}
	migrations := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	if err := r.Cache.List(ctx, migrations, client.InNamespace(s.att.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list VirtualMachineInstanceMigrations in %s: %w", s.att.Namespace, err)
	}
	if s.att.Status.Move != nil {
		return r.advanceMove(ctx, s, migrations.Items)
	}
	return r.startMove(ctx, s, migrations.Items)
}

// activeMigration reports whether m has not ended.
func activeMigration(m *kubevirtv1.VirtualMachineInstanceMigration) bool {
	return m.DeletionTimestamp.IsZero() && !finishedMigration(m)
}

// finishedMigration reports whether m ended, succeeded or failed (a
// deleted migration stays listed, unfinished, until KubeVirt removes its
// finalizer).
func finishedMigration(m *kubevirtv1.VirtualMachineInstanceMigration) bool {
	return m.Status.Phase == kubevirtv1.MigrationSucceeded || m.Status.Phase == kubevirtv1.MigrationFailed
}

// targetPodsLeft names a virt-launcher target pod of the failed migrations
// that still runs, or "". virt-handler on the target node forgets a VMI's
// pod addresses (its netstat cache, keyed by VMI UID) only when it sees the
// failure of the VMI's current migration and signals that pod to end
// (KubeVirt v1.7 pkg/virt-handler/migration-target.go); a next attempt to
// the same node started before then finds the old entry and the VMI reports
// the failed target pod's address for as long as it stays there, which
// `virtctl ssh` and port-forwards then dial in vain.
func (r *Reconciler) targetPodsLeft(ctx context.Context, ns string, failed []*kubevirtv1.VirtualMachineInstanceMigration) (string, error) {
	for _, m := range failed {
		pods := &corev1.PodList{}
		if err := r.APIReader.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.MigrationJobLabel: string(m.UID)}); err != nil {
			return "", fmt.Errorf("failed to list the target pods of migration %s/%s: %w", ns, m.Name, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return p.Name, nil
			}
		}
	}
	return "", nil
}

// ours reports whether the operator created m for this attachment's moves.
func (s *scope) ours(m *kubevirtv1.VirtualMachineInstanceMigration) bool {
	return m.Labels[MoveLabel] == s.att.Name
}

// siblingMembers names the VMs of group whose VMI runs in vsock mode
// Sibling (the domain hook gave it a vhost-user-vsock device): QEMU
// refuses to migrate a domain with one ("non-migratable device"), so a
// migration of them could only fail.
func siblingMembers(group []*vmState) []string {
	var out []string
	for _, st := range group {
		if st.vmi.Annotations[v1alpha1.VSOCKModeAnnotation] == string(v1alpha1.VSOCKModeSibling) {
			out = append(out, st.name)
		}
	}
	return out
}

// running is the member VM's VMI when it runs on a node.
func running(st *vmState) *kubevirtv1.VirtualMachineInstance {
	if !st.member() || st.vmi == nil || st.vmi.Status.NodeName == "" || st.vmi.Status.Phase != kubevirtv1.Running || !st.vmi.DeletionTimestamp.IsZero() {
		return nil
	}
	return st.vmi
}

// startMove looks for a member that must leave its node and starts the
// group's move.
func (r *Reconciler) startMove(ctx context.Context, s *scope, migrations []kubevirtv1.VirtualMachineInstanceMigration) (ctrl.Result, error) {
	from, cause := "", ""
	for _, st := range s.vms {
		vmi := running(st)
		if vmi == nil {
			continue
		}
		if vmi.Status.EvacuationNodeName != "" && vmi.Status.EvacuationNodeName == vmi.Status.NodeName && from == "" {
			from, cause = vmi.Status.NodeName, v1alpha1.MoveCauseEviction
		}
		for i := range migrations {
			m := &migrations[i]
			if m.Spec.VMIName == st.name && activeMigration(m) && !s.ours(m) {
				if from == "" {
					from, cause = vmi.Status.NodeName, v1alpha1.MoveCauseMigration
				}
			}
		}
	}
	cond := meta.FindStatusCondition(s.att.Status.Conditions, v1alpha1.MovedTogetherCondition)
	if from == "" {
		if cond == nil || cond.Reason == v1alpha1.ReasonNoTargetNode || cond.Reason == v1alpha1.ReasonNotMigratable {
			s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionTrue, v1alpha1.ReasonIdle, "no member VM has to leave its node")
		}
		return ctrl.Result{}, nil
	}
	if cond != nil && cond.Reason == v1alpha1.ReasonMoveFailed {
		if wait := time.Until(cond.LastTransitionTime.Add(moveRetryPause)); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	var group []*vmState
	g := moveGroup{from: from, need: corev1.ResourceList{}}
	for _, st := range s.vms {
		if vmi := running(st); vmi != nil && vmi.Status.NodeName == from {
			group = append(group, st)
			g.constraints = append(g.constraints, placementOf(vmi))
		}
	}
	if sib := siblingMembers(group); len(sib) > 0 {
		msg := fmt.Sprintf("VMs %s must leave node %s (%s) but cannot be live-migrated: vsock mode Sibling gives them QEMU's vhost-user-vsock device, which QEMU does not migrate; "+
			"nothing moves, and a drain waits, until each is restarted (virtctl restart: placement %s starts them on another node together) or stopped; their Sibling vsock connections end then",
			joinNames(sib), from, strings.ToLower(cause), s.spec.Placement)
		if cond == nil || cond.Message != msg {
			r.Recorder.Event(s.att, corev1.EventTypeWarning, v1alpha1.ReasonNotMigratable, msg)
		}
		s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionFalse, v1alpha1.ReasonNotMigratable, msg)
		return ctrl.Result{}, nil
	}
	for _, st := range group {
		pod, err := r.launcherPod(ctx, st.vmi)
		if err != nil {
			return ctrl.Result{}, err
		}
		if pod != nil {
			addResources(g.need, podRequests(pod))
		}
	}
	names := make([]string, len(group))
	for i, st := range group {
		names[i] = st.name
	}
	cands, err := r.moveCandidates(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	to, why := chooseTarget(g, cands)
	if to == "" {
		msg := fmt.Sprintf("VMs %s must leave node %s (%s) but no other node can take them all: %s; they stay, and a drain waits, until one can",
			joinNames(names), from, strings.ToLower(cause), summarize(why))
		if len(why) == 0 {
			msg = fmt.Sprintf("VMs %s must leave node %s (%s) but there is no other node; they stay, and a drain waits", joinNames(names), from, strings.ToLower(cause))
		}
		if cond == nil || cond.Message != msg {
			r.Recorder.Event(s.att, corev1.EventTypeWarning, v1alpha1.ReasonNoTargetNode, msg)
		}
		s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionFalse, v1alpha1.ReasonNoTargetNode, msg)
		return ctrl.Result{RequeueAfter: noTargetRequeue}, nil
	}
	// The foreign migrations that started this move are deleted by
	// advanceMove, once status.move is written: deleted first, a status
	// write that loses its optimistic lock would forget the move and its
	// cause together.
	s.att.Status.Move = &v1alpha1.MoveStatus{From: from, To: to, VMs: names, Cause: cause, StartTime: metav1.Now()}
	msg := fmt.Sprintf("moving VMs %s from node %s to node %s together (%s); their fast path is down until all arrived", joinNames(names), from, to, strings.ToLower(cause))
	r.Recorder.Event(s.att, corev1.EventTypeNormal, v1alpha1.ReasonMoving, msg)
	s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionFalse, v1alpha1.ReasonMoving, msg)
	// The next reconcile wires the moving VMs without the affinity term.
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// placementOf is a pod carrying the VMI's scheduling constraints, as
// KubeVirt renders them into the migration target pod.
func placementOf(vmi *kubevirtv1.VirtualMachineInstance) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: vmi.Name}, Spec: corev1.PodSpec{
		NodeSelector: vmi.Spec.NodeSelector, Affinity: vmi.Spec.Affinity, Tolerations: vmi.Spec.Tolerations,
	}}
}

// launcherPod is the VMI's running virt-launcher pod on its node, or nil.
func (r *Reconciler) launcherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, fmt.Errorf("failed to list the virt-launcher pods of VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == vmi.Status.NodeName && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, nil
}

// moveCandidates are the cluster's nodes with their Fastpath readiness for
// the attachment's network and the requests of the pods on them.
func (r *Reconciler) moveCandidates(ctx context.Context, s *scope) ([]moveCandidate, error) {
	nodes := &corev1.NodeList{}
	if err := r.Cache.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("failed to list Nodes: %w", err)
	}
	var out []moveCandidate
	for i := range nodes.Items {
		n := &nodes.Items[i]
		c := moveCandidate{node: n, used: corev1.ResourceList{}}
		c.fastPath = r.fastPathReady(ctx, s, n.Name)
		if c.fastPath == "" {
			pods := &corev1.PodList{}
			if err := r.APIReader.List(ctx, pods, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", n.Name)}); err != nil {
				return nil, fmt.Errorf("failed to list the pods on node %s: %w", n.Name, err)
			}
			for j := range pods.Items {
				p := &pods.Items[j]
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					addResources(c.used, podRequests(p))
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// fastPathReady says why node cannot carry the attachment's fast path, or "".
func (r *Reconciler) fastPathReady(ctx context.Context, s *scope, node string) string {
	fpn := &v1alpha1.FastPathNode{}
	if err := r.Cache.Get(ctx, types.NamespacedName{Name: node}, fpn); err != nil {
		return "no FastPathNode (is fastpath-agent running there?)"
	}
	if c := meta.FindStatusCondition(fpn.Status.Conditions, v1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		return "FastPathNode not Ready"
	}
	if s.spec.Network == nil || s.network == "" {
		return ""
	}
	for _, b := range fpn.Status.Bridges {
		if b.Network == s.network {
			if !b.Ready {
				return fmt.Sprintf("bridge %s of FastPathNetwork %s not ready: %s", b.Name, s.network, b.Message)
			}
			return ""
		}
	}
	return fmt.Sprintf("no bridge of FastPathNetwork %s", s.network)
}

// advanceMove creates the move's migrations and ends the move when every VM
// arrived, or when its migrations failed too often.
func (r *Reconciler) advanceMove(ctx context.Context, s *scope, migrations []kubevirtv1.VirtualMachineInstanceMigration) (ctrl.Result, error) {
	mv := s.att.Status.Move
	byName := map[string]*vmState{}
	for _, st := range s.vms {
		byName[st.name] = st
	}
	var arrived, waiting []string
	var failures []string
	for _, name := range mv.VMs {
		st := byName[name]
		vmi := (*kubevirtv1.VirtualMachineInstance)(nil)
		if st != nil {
			vmi = running(st)
		}
		if vmi == nil {
			continue // stopped or no longer selected: nothing to move
		}
		var mine, failed []*kubevirtv1.VirtualMachineInstanceMigration
		// succeeded: the VMI may not show its new node yet (KubeVirt
		// updates both, the cache sees them in any order).
		// replaced: a foreign migration deleted but not yet gone, which
		// KubeVirt's admission still counts as in flight.
		active, succeeded, replaced := false, false, false
		for i := range migrations {
			m := &migrations[i]
			if m.Spec.VMIName != name {
				continue
			}
			switch {
			case !s.ours(m) && activeMigration(m):
				// It started the move, or started since: the group moves instead.
				if err := r.Client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, fmt.Errorf("failed to delete VirtualMachineInstanceMigration %s/%s: %w", m.Namespace, m.Name, err)
				}
				r.Recorder.Eventf(s.att, corev1.EventTypeNormal, v1alpha1.ReasonMigrationReplaced,
					"Deleted VirtualMachineInstanceMigration %s of VM %s: it is moving with its group to node %s", m.Name, name, mv.To)
				replaced = true
			case !s.ours(m) && !finishedMigration(m):
				replaced = true // deleted, still finishing
			case s.ours(m) && !strings.HasPrefix(m.Name, movePrefix(name, mv)):
				// A migration of an earlier move.
			case s.ours(m):
				mine = append(mine, m)
				active = active || activeMigration(m)
				succeeded = succeeded || m.Status.Phase == kubevirtv1.MigrationSucceeded
				if m.Status.Phase == kubevirtv1.MigrationFailed {
					failures = append(failures, fmt.Sprintf("VM %s: %s", name, failureOf(vmi, m)))
					failed = append(failed, m)
				}
			}
		}
		migrating := vmi.Status.MigrationState != nil && !vmi.Status.MigrationState.Completed && !vmi.Status.MigrationState.Failed
		switch {
		case vmi.Status.NodeName == mv.To && !migrating && !active:
			arrived = append(arrived, name)
		case active || migrating:
			waiting = append(waiting, name+" migrating")
		case succeeded:
			waiting = append(waiting, name+" migrated, not yet seen on node "+mv.To)
		case s.spec.Placement == v1alpha1.PlacementRequired && hasRequiredTerm(vmi, s.att.Name):
			note := name + " waiting for KubeVirt to apply the affinity change"
			if time.Since(mv.StartTime.Time) > liveUpdateGrace {
				note += " (not applied after " + liveUpdateGrace.String() + ": is the VM RestartRequired, or the KubeVirt rollout strategy not LiveUpdate?)"
			}
			waiting = append(waiting, note)
		case len(mine) >= v1alpha1.MaxMoveAttempts:
			return r.failMove(s, failures)
		case replaced:
			waiting = append(waiting, name+" waiting for the migration it replaced to end")
		default:
			if left, err := r.targetPodsLeft(ctx, s.att.Namespace, failed); err != nil {
				return ctrl.Result{}, err
			} else if left != "" {
				waiting = append(waiting, name+" waiting for target pod "+left+" of its failed migration to end before the next attempt")
				continue
			}
			// A name per move and attempt: a reconcile whose cache does not
			// show the migration yet gets AlreadyExists, not a second one.
			m := &kubevirtv1.VirtualMachineInstanceMigration{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.att.Namespace, Name: fmt.Sprintf("%s%d", movePrefix(name, mv), len(mine)+1),
					Labels: map[string]string{MoveLabel: s.att.Name}},
				Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{
					VMIName:           name,
					AddedNodeSelector: map[string]string{corev1.LabelHostname: mv.To},
				},
			}
			if err := r.Client.Create(ctx, m); apierrors.IsAlreadyExists(err) {
				waiting = append(waiting, name+" migrating")
				continue
			} else if err != nil {
				return ctrl.Result{}, fmt.Errorf("failed to create the migration of VM %s to node %s: %w", name, mv.To, err)
			}
			mv.Attempts++
			waiting = append(waiting, name+" migrating")
		}
	}
	if len(waiting) == 0 {
		took := time.Since(mv.StartTime.Time).Round(100 * time.Millisecond)
		msg := fmt.Sprintf("moved VMs %s from node %s to node %s together in %s (%s)", joinNames(arrived), mv.From, mv.To, took, strings.ToLower(mv.Cause))
		if len(arrived) == 0 {
			msg = fmt.Sprintf("the move from node %s to node %s ended: none of its VMs runs any more", mv.From, mv.To)
		}
		r.Recorder.Event(s.att, corev1.EventTypeNormal, v1alpha1.ReasonMoved, msg)
		s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionTrue, v1alpha1.ReasonMoved, msg)
		groupMoveSeconds.Observe(took.Seconds())
		s.att.Status.Move = nil
		return ctrl.Result{}, nil
	}
	s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionFalse, v1alpha1.ReasonMoving,
		fmt.Sprintf("moving VMs %s from node %s to node %s together (%s): %d arrived; %s", joinNames(mv.VMs), mv.From, mv.To, strings.ToLower(mv.Cause), len(arrived), summarize(waiting)))
	return ctrl.Result{RequeueAfter: moveRequeue}, nil
}

// movePrefix is the name prefix of the migrations of VM vm in move mv:
// "<vm>-fpmove-<start, Unix seconds>-", followed by the attempt (1-based).
func movePrefix(vm string, mv *v1alpha1.MoveStatus) string {
	return fmt.Sprintf("%s-fpmove-%d-", vm, mv.StartTime.Unix())
}

// failMove gives the running move up: the VMs stay where they are (the
// affinity term comes back) and the next try waits moveRetryPause.
func (r *Reconciler) failMove(s *scope, failures []string) (ctrl.Result, error) {
	mv := s.att.Status.Move
	msg := fmt.Sprintf("moving VMs %s from node %s to node %s failed after %d migrations: %s; trying again in %s",
		joinNames(mv.VMs), mv.From, mv.To, mv.Attempts, summarize(failures), moveRetryPause)
	r.Recorder.Event(s.att, corev1.EventTypeWarning, v1alpha1.ReasonMoveFailed, msg)
	s.setCondition(v1alpha1.MovedTogetherCondition, metav1.ConditionFalse, v1alpha1.ReasonMoveFailed, msg)
	s.att.Status.Move = nil
	return ctrl.Result{RequeueAfter: moveRetryPause}, nil
}

// failureOf is KubeVirt's reason for a failed migration: the VMI's
// migration state for it, else the migration's own.
func failureOf(vmi *kubevirtv1.VirtualMachineInstance, m *kubevirtv1.VirtualMachineInstanceMigration) string {
	for _, st := range []*kubevirtv1.VirtualMachineInstanceMigrationState{vmi.Status.MigrationState, m.Status.MigrationState} {
		if st != nil && st.MigrationUID == m.UID && st.FailureReason != "" {
			return st.FailureReason
		}
	}
	for _, c := range m.Status.Conditions {
		if c.Message != "" {
			return c.Message
		}
	}
	return "migration " + m.Name + " failed"
}

// hasRequiredTerm reports whether the VMI still carries the attachment's
// required pod affinity term (KubeVirt has not applied its removal yet).
func hasRequiredTerm(vmi *kubevirtv1.VirtualMachineInstance, attachment string) bool {
	a := vmi.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return false
	}
	return slices.ContainsFunc(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return t.TopologyKey == wiring.HostnameTopologyKey && t.LabelSelector != nil && t.LabelSelector.MatchLabels[v1alpha1.AttachmentLabel] == attachment
	})
}
