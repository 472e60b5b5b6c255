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
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// maxDiffering caps status.tuning.differing (its CRD MaxItems).
const maxDiffering = 256

// Applied returns the setting new attachments default to in mode Apply, or
// nil when some node of nodes has no recommendation yet: Apply waits for
// every node, so one sweep's answer does not become the whole network's.
// The MTU is the one most nodes recommend (ties: the smaller MTU); the
// offloads are the set most of the nodes that recommend that MTU recommend
// with it (ties: the set with more offloads On, then offloadsKey order). The
// result is therefore always a setting that won on some node, never a mix
// that no node measured.
func Applied(nodes []v1alpha1.NodeTuning, serving int) *v1alpha1.TuningSetting {
	if len(nodes) < serving || len(nodes) == 0 {
		return nil
	}
	votes := map[int32]int{}
	for _, n := range nodes {
		if n.Recommended == nil {
			return nil
		}
		votes[n.Recommended.MTU]++
	}
	var best int32
	for mtu, v := range votes {
		if best == 0 || v > votes[best] || (v == votes[best] && mtu < best) {
			best = mtu
		}
	}
	offloadVotes := map[string]int{}
	sets := map[string]*v1alpha1.Offloads{}
	for _, n := range nodes {
		if n.Recommended.MTU != best {
			continue
		}
		k := offloadsKey(n.Recommended.Offloads)
		offloadVotes[k]++
		sets[k] = n.Recommended.Offloads
	}
	var bestSet string
	first := true
	for k, v := range offloadVotes {
		if first || v > offloadVotes[bestSet] || (v == offloadVotes[bestSet] && offloadsBefore(k, bestSet)) {
			bestSet, first = k, false
		}
	}
	return &v1alpha1.TuningSetting{MTU: best, Offloads: sets[bestSet].DeepCopy()}
}

// offloadsKey is o's keys in wellknown.Offloads order, one character each: '1' On, '0' Off, '-' unset; "" for nil.
func offloadsKey(o *v1alpha1.Offloads) string {
	if o == nil {
		return ""
	}
	k := make([]byte, 0, len(wellknown.Offloads))
	for _, row := range wellknown.Offloads {
		switch *o.Offload(row.Name) {
		case v1alpha1.OffloadOn:
			k = append(k, '1')
		case v1alpha1.OffloadOff:
			k = append(k, '0')
		default:
			k = append(k, '-')
		}
	}
	return string(k)
}

// offloadsBefore orders offload keys for a tie: more offloads On first
// (every offload On is the design's default, docs/design.md §1), then On
// before Off key by key in wellknown.Offloads order.
func offloadsBefore(a, b string) bool {
	if ca, cb := strings.Count(a, "1"), strings.Count(b, "1"); ca != cb {
		return ca > cb
	}
	return a > b // '1' > '0' > '-': On sorts first
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
		// recommendation counts as existing and keeps its MTU and offloads.
		// The other rounding would change an attachment that existed before.
		at := metav1.NewTime(s.now.Add(time.Second))
		st.Applied, st.AppliedAt = want, &at
		r.Recorder.Eventf(s.net, "Normal", v1alpha1.ReasonApplied, "New attachments on this network default to %s", s.appliedDefaults())
	}
	// The offloads are compared only where they are applied (not under
	// offloadPolicy Fixed, not Off on Macvtap): elsewhere no restart could
	// give an attachment the recommended set.
	wantOffloads, offloadsApply := v1alpha1.TunedDefaultOffloads(s.net, *st.AppliedAt)
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
		// What the attachment has: its own fields, else the tuned defaults
		// when it was created after they were applied, else the network's.
		has := v1alpha1.WithTunedDefaults(a.Spec, s.net, a.CreationTimestamp).Network
		d := v1alpha1.TuningDifference{Namespace: a.Namespace, Name: a.Name, MTU: *s.spec.MTU.Default}
		if has.MTU != nil {
			d.MTU = *has.MTU
		}
		var set []string
		if d.MTU != want.MTU {
			set = append(set, fmt.Sprintf("spec.network.mtu to %d", want.MTU))
		}
		if offloadsApply {
			o := v1alpha1.OffloadsWithDefaults(has.Offloads, *s.spec.Offloads)
			d.Offloads = &o
			set = append(set, offloadChanges(o, *wantOffloads)...)
		}
		if len(set) == 0 || len(st.Differing) >= maxDiffering {
			continue
		}
		d.Restart = fmt.Sprintf("set %s, then restart its VMs (virtctl restart <vm>): a running VM keeps the MTU and offloads it started with", strings.Join(set, ", "))
		st.Differing = append(st.Differing, d)
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
	var failed, flat []string
	for _, n := range st.Nodes {
		switch {
		case n.Recommended == nil:
			failed = append(failed, n.Node)
		case n.MTUCurve == v1alpha1.WithinNoise:
			flat = append(flat, fmt.Sprintf("%s (MTU %d)", n.Node, n.Recommended.MTU))
		}
	}
	// A flat MTU curve changed the answer from the fastest candidate to
	// the smallest MTU: the condition says so, the node's message says why.
	var flatNote string
	if len(flat) > 0 {
		flatNote = fmt.Sprintf("; the MTU curve is flat within noise on node(s) %s, so the smallest MTU within the noise is recommended there (status.tuning.nodes[].message)", strings.Join(flat, ", "))
	}
	switch {
	case len(failed) > 0:
		s.set(metav1.ConditionFalse, v1alpha1.ReasonAllCandidatesFailed, fmt.Sprintf("no candidate succeeded with the offloads it asked for on node(s) %s: see status.tuning.nodes[].evidence[].failed and .offloadMismatch", strings.Join(failed, ", ")))
	case len(st.Nodes) < serving:
		s.set(metav1.ConditionFalse, v1alpha1.ReasonSweeping, fmt.Sprintf("%d of %d nodes measured", len(st.Nodes), serving))
	case st.Applied != nil:
		s.set(metav1.ConditionTrue, v1alpha1.ReasonApplied, fmt.Sprintf("every node is measured; new attachments default to %s (%d existing differ)%s", s.appliedDefaults(), len(st.Differing), flatNote))
	default:
		s.set(metav1.ConditionTrue, v1alpha1.ReasonRecommended, fmt.Sprintf("every node (%d) has a recommendation by %s%s", len(st.Nodes), s.tuning.Objective, flatNote))
	}
}

// appliedDefaults says what new attachments default to: the applied MTU, and
// its offloads where they apply (TunedDefaultOffloads).
func (s *scope) appliedDefaults() string {
	st := s.net.Status.Tuning
	out := fmt.Sprintf("MTU %d", st.Applied.MTU)
	if o, ok := v1alpha1.TunedDefaultOffloads(s.net, *st.AppliedAt); ok {
		out += " and offloads " + o.Format(" ", ", ")
	}
	return out
}

// offloadChanges names the keys of spec.network.offloads to set to turn has
// into want ("spec.network.offloads.gro to Off"), in wellknown.Offloads
// order.
func offloadChanges(has, want v1alpha1.Offloads) []string {
	var out []string
	for _, row := range wellknown.Offloads {
		if h, w := *has.Offload(row.Name), *want.Offload(row.Name); h != w {
			out = append(out, fmt.Sprintf("spec.network.offloads.%s to %s", row.Name, w))
		}
	}
	return out
}
