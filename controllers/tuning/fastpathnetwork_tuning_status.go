package tuning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// maxDiffering caps status.tuning.differing (its CRD MaxItems).
const maxDiffering = 256

// Applied returns the setting most nodes recommend (ties: the smaller MTU),
// or nil when some node of nodes has no recommendation yet: Apply waits for
// every node, so one sweep's answer does not become the whole network's.
func Applied(nodes []v1alpha1.NodeTuning, serving int) *v1alpha1.TuningSetting {
	if len(nodes) < serving || len(nodes) == 0 {
		return nil
	}
	votes := map[int32]int{}
	var first = map[int32]*v1alpha1.TuningSetting{}
	for _, n := range nodes {
		if n.Recommended == nil {
			return nil
		}
		votes[n.Recommended.MTU]++
		if first[n.Recommended.MTU] == nil {
			first[n.Recommended.MTU] = n.Recommended
		}
	}
	var best int32
	for mtu, v := range votes {
		if best == 0 || v > votes[best] || (v == votes[best] && mtu < best) {
			best = mtu
		}
	}
	return first[best].DeepCopy()
}

// apply sets status.tuning.applied (mode Apply) and lists the existing
// attachments on the network whose MTU differs from it.
func (r *Reconciler) apply(ctx context.Context, s *scope, serving int) error {
	st := s.net.Status.Tuning
	var want *v1alpha1.TuningSetting
	if s.tuning.Mode == v1alpha1.TuningApply {
		want = Applied(st.Nodes, serving)
	}
	if want == nil {
		st.Applied, st.AppliedAt, st.Differing = nil, nil, nil
		return nil
	}
	if st.Applied == nil || !equality.Semantic.DeepEqual(*st.Applied, *want) {
		// appliedAt is rounded up to the next second (metav1.Time keeps
		// seconds): an attachment created in the same second as the
		// recommendation counts as existing and keeps its MTU. The other
		// rounding would change an attachment that existed before.
		at := metav1.NewTime(s.now.Add(time.Second))
		st.Applied, st.AppliedAt = want, &at
		r.Recorder.Eventf(s.net, "Normal", v1alpha1.ReasonApplied, "New attachments on this network default to MTU %d", want.MTU)
	}
	var atts v1alpha1.FastPathAttachmentList
	if err := r.Client.List(ctx, &atts); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	isDefault := s.net.Annotations[v1alpha1.DefaultNetworkAnnotation] == "true"
	st.Differing = nil
	for i := range atts.Items {
		a := &atts.Items[i]
		if a.Spec.Network == nil || metav1.IsControlledBy(a, s.net) {
			continue
		}
		if ref := v1alpha1.NetworkRefName(&a.Spec); ref != s.net.Name && (ref != "" || !isDefault) {
			continue
		}
		mtu := *s.spec.MTU.Default
		if a.Spec.Network.MTU != nil {
			mtu = *a.Spec.Network.MTU
		} else if tuned, ok := v1alpha1.TunedDefaultMTU(s.net, a.CreationTimestamp); ok {
			mtu = tuned
		}
		if mtu == want.MTU || len(st.Differing) >= maxDiffering {
			continue
		}
		st.Differing = append(st.Differing, v1alpha1.TuningDifference{Namespace: a.Namespace, Name: a.Name, MTU: mtu,
			Restart: fmt.Sprintf("set spec.network.mtu to %d, then restart its VMs (virtctl restart <vm>): a running VM keeps the MTU it started with", want.MTU)})
	}
	slices.SortFunc(st.Differing, func(a, b v1alpha1.TuningDifference) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return nil
}

// summarise sets TuningReady from the node entries unless a phase already
// explained a problem (Sweeping, SweepFailed).
func (s *scope) summarise(serving int) {
	if s.reason == v1alpha1.ReasonSweeping || s.reason == v1alpha1.ReasonSweepFailed {
		return
	}
	st := s.net.Status.Tuning
	var failed []string
	for _, n := range st.Nodes {
		if n.Recommended == nil {
			failed = append(failed, n.Node)
		}
	}
	switch {
	case len(failed) > 0:
		s.set(metav1.ConditionFalse, v1alpha1.ReasonAllCandidatesFailed, fmt.Sprintf("no candidate succeeded on node(s) %s: see status.tuning.nodes[].evidence[].failed", strings.Join(failed, ", ")))
	case len(st.Nodes) < serving:
		s.set(metav1.ConditionFalse, v1alpha1.ReasonSweeping, fmt.Sprintf("%d of %d nodes measured", len(st.Nodes), serving))
	case st.Applied != nil:
		s.set(metav1.ConditionTrue, v1alpha1.ReasonApplied, fmt.Sprintf("every node is measured; new attachments default to MTU %d (%d existing differ)", st.Applied.MTU, len(st.Differing)))
	default:
		s.set(metav1.ConditionTrue, v1alpha1.ReasonRecommended, fmt.Sprintf("every node (%d) has a recommendation by %s", len(st.Nodes), s.tuning.Objective))
	}
}
