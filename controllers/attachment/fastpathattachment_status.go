package attachment

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// maxListedItems bounds how many VMs or problems a condition message names.
const maxListedItems = 5

// summarizedConditions are the conditions Ready summarises, in message order.
var summarizedConditions = []string{
	v1alpha1.NetworkAttachmentReadyCondition,
	v1alpha1.VMsWiredCondition,
	v1alpha1.ColocatedCondition,
	v1alpha1.VSOCKReadyCondition,
	v1alpha1.NodesReadyCondition,
}

// setCondition sets one condition for the attachment's current generation;
// lastTransitionTime changes only when the status does.
func (s *scope) setCondition(conditionType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&s.att.Status.Conditions, metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: s.att.Generation,
	})
}

// setColocated compares the nodes of the running member VMs. Placement None
// asks for no co-location, and VMs apart are then reported all the same
// (only VMs on one node share the fast path), but Ready does not count it
// (setReady).
func (s *scope) setColocated() {
	byNode := map[string][]string{}
	for _, st := range s.vms {
		if st.member() && st.status.Node != "" {
			byNode[st.status.Node] = append(byNode[st.status.Node], st.name)
		}
	}
	nodes := sortedKeys(byNode)
	switch {
	case s.spec.Placement == v1alpha1.PlacementNone && len(nodes) <= 1:
		s.setCondition(v1alpha1.ColocatedCondition, metav1.ConditionTrue, v1alpha1.ReasonPlacementNone,
			fmt.Sprintf("spec.placement is None: co-location is not asked for; running VMs on %d node(s)", len(nodes)))
	case len(nodes) == 0:
		s.setCondition(v1alpha1.ColocatedCondition, metav1.ConditionTrue, v1alpha1.ReasonNoRunningVMs, "no selected VM is running")
	case len(nodes) == 1:
		s.setCondition(v1alpha1.ColocatedCondition, metav1.ConditionTrue, v1alpha1.ReasonColocated,
			fmt.Sprintf("%d running VMs on node %s", len(byNode[nodes[0]]), nodes[0]))
	default:
		parts := make([]string, len(nodes))
		for i, n := range nodes {
			parts[i] = fmt.Sprintf("%s on %s", joinNames(byNode[n]), n)
		}
		s.setCondition(v1alpha1.ColocatedCondition, metav1.ConditionFalse, v1alpha1.ReasonNotColocated,
			fmt.Sprintf("VMs run on %d nodes and only VMs on one node share the fast path: %s", len(nodes), strings.Join(parts, "; ")))
	}
}

// memberNodes returns the sorted nodes running member VMs.
func (s *scope) memberNodes() []string {
	set := map[string][]string{}
	for _, st := range s.vms {
		if st.member() && st.status.Node != "" {
			set[st.status.Node] = nil
		}
	}
	return sortedKeys(set)
}

// setReady summarises the other conditions.
func (s *scope) setReady() {
	switch {
	case s.deleting:
		s.setCondition(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonDeleting, "removing the wiring from the VMs")
		return
	case s.invalid != nil:
		s.setCondition(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, s.invalid.Error())
		return
	}
	var problems []string
	for _, t := range summarizedConditions {
		if t == v1alpha1.ColocatedCondition && s.spec.Placement == v1alpha1.PlacementNone {
			continue // None asks for no co-location: VMs apart are reported, not a fault
		}
		c := meta.FindStatusCondition(s.att.Status.Conditions, t)
		switch {
		case c == nil:
			problems = append(problems, t+" not yet determined")
		case c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.att.Generation:
			problems = append(problems, fmt.Sprintf("%s is %s (%s)", t, c.Status, c.Reason))
		}
	}
	switch {
	case len(problems) > 0:
		s.setCondition(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNotReady, strings.Join(problems, "; "))
	case len(s.restart) > 0:
		s.setCondition(v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonRestartRequired,
			fmt.Sprintf("restart VMs %s to apply the fast path: their running VMIs predate the wiring", joinNames(s.restart)))
	default:
		s.setCondition(v1alpha1.ReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonReady,
			fmt.Sprintf("%d VMs wired", s.att.Status.WiredVMs))
	}
}

// publishVMs copies the per-VM status into the attachment's status.
func (s *scope) publishVMs() {
	if !s.observed {
		return
	}
	vms := make([]v1alpha1.VMStatus, 0, len(s.vms))
	for _, st := range s.vms {
		vms = append(vms, st.status)
	}
	if len(vms) == 0 {
		vms = nil
	}
	s.att.Status.VMs = vms
}

// patchStatus writes the status once, when it changed, emits an Event for
// each condition transition and updates the metrics.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if s.deleted {
		return nil
	}
	s.publishVMs()
	s.att.Status.ObservedGeneration = s.att.Generation
	s.setReady()
	r.metrics.observe(s.att)
	if equality.Semantic.DeepEqual(s.base.Status, s.att.Status) {
		return nil
	}
	patch := client.MergeFrom(s.base)
	if !equality.Semantic.DeepEqual(s.base.Status.Move, s.att.Status.Move) {
		// The move is the operator's memory between reconciles: a reconcile
		// that read the attachment before the last move change (a stale
		// cache) must not write over it. The conflict retries it.
		patch = client.MergeFromWithOptions(s.base, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Client.Status().Patch(ctx, s.att, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to patch status of FastPathAttachment %s: %w", s.key(), err)
	}
	r.emitTransitions(s.att, s.base.Status.Conditions)
	return nil
}

// emitTransitions records an Event for every condition whose status or reason
// changed: Normal when it became True, Warning otherwise.
func (r *Reconciler) emitTransitions(att *v1alpha1.FastPathAttachment, before []metav1.Condition) {
	for _, c := range att.Status.Conditions {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		eventType := corev1.EventTypeNormal
		if c.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Event(att, eventType, c.Reason, fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message))
	}
}

// summarize joins at most maxListedItems messages and counts the rest.
func summarize(items []string) string {
	if len(items) <= maxListedItems {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:maxListedItems], "; "), len(items)-maxListedItems)
}

// joinNames joins at most maxListedItems names and counts the rest.
func joinNames(names []string) string {
	if len(names) <= maxListedItems {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListedItems], ", "), len(names)-maxListedItems)
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = err.Error()
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
