package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of spec.tuning (issue 27).
const (
	// DefaultTuningMode measures nothing until an admin asks.
	DefaultTuningMode = TuningOff
	// DefaultTuningObjective is bulk throughput, the papers' first figure.
	DefaultTuningObjective = ObjectiveThroughput
	// DefaultTuningRepetitions is the papers' "runs averaged over 3"
	// (docs/design.md §1), the least that gives a median with a spread.
	DefaultTuningRepetitions = int32(3)
	// DefaultTuningDuration is netperf -l per run: long enough for TCP to
	// leave slow start at these MTUs, short enough that 3 MTUs x 3
	// repetitions x 2 tests stay under 4 minutes per node.
	DefaultTuningDuration = 10 * time.Second
	// DefaultTuningMinInterval is the least time between sweeps of one node.
	DefaultTuningMinInterval = 24 * time.Hour
)

// DefaultTuning returns spec.tuning of a defaulted network spec (net must
// come from DefaultNetworkSpec) with every unset field defaulted: mode Off,
// objective Throughput, candidates [net.mtu.default] x [net.offloads] (an
// offload set's unset keys take net.offloads), 3 repetitions, 10 s runs,
// re-measure on node change at most every 24h. It never mutates its argument.
func DefaultTuning(net FastPathNetworkSpec) NetworkTuning {
	var out NetworkTuning
	if net.Tuning != nil {
		out = *net.Tuning.DeepCopy()
	}
	if out.Mode == "" {
		out.Mode = DefaultTuningMode
	}
	if out.Objective == "" {
		out.Objective = DefaultTuningObjective
	}
	if out.Candidates == nil {
		out.Candidates = &TuningCandidates{}
	}
	if len(out.Candidates.MTUs) == 0 && net.MTU != nil && net.MTU.Default != nil {
		out.Candidates.MTUs = []int32{*net.MTU.Default}
	}
	if len(out.Candidates.Offloads) == 0 && net.Offloads != nil {
		out.Candidates.Offloads = []Offloads{*net.Offloads}
	}
	for i := range out.Candidates.Offloads {
		o := &out.Candidates.Offloads[i]
		if net.Offloads == nil {
			continue
		}
		for _, p := range []struct{ got, want *OffloadState }{
			{&o.TSO, &net.Offloads.TSO}, {&o.GSO, &net.Offloads.GSO},
			{&o.GRO, &net.Offloads.GRO}, {&o.TXChecksum, &net.Offloads.TXChecksum}} {
			if *p.got == "" {
				*p.got = *p.want
			}
		}
	}
	if out.Repetitions == nil {
		out.Repetitions = ptrTo(DefaultTuningRepetitions)
	}
	if out.Duration == nil {
		out.Duration = &metav1.Duration{Duration: DefaultTuningDuration}
	}
	if out.Remeasure == nil {
		out.Remeasure = &TuningRemeasure{}
	}
	if out.Remeasure.OnNodeChange == nil {
		out.Remeasure.OnNodeChange = ptrTo(true)
	}
	if out.Remeasure.MinInterval == nil {
		out.Remeasure.MinInterval = &metav1.Duration{Duration: DefaultTuningMinInterval}
	}
	return out
}

// TunedDefaultMTU returns the MTU an attachment that sets no
// spec.network.mtu gets on network because of tuning, and true; or 0 and
// false when spec.network.mtu.default applies. The tuned MTU applies only
// in mode Apply, only once status.tuning.applied is set, only to
// attachments created at or after status.tuning.appliedAt (existing ones
// are left alone), and only inside the network's spec.mtu bounds. Setting
// mode Off therefore brings the previous default back at once: the network's
// spec is never changed.
func TunedDefaultMTU(network *FastPathNetwork, created metav1.Time) (int32, bool) {
	if network == nil || network.Spec.Tuning == nil || network.Spec.Tuning.Mode != TuningApply {
		return 0, false
	}
	st := network.Status.Tuning
	if st == nil || st.Applied == nil || st.AppliedAt == nil || created.Before(st.AppliedAt) {
		return 0, false
	}
	net := DefaultNetworkSpec(network.Spec)
	if st.Applied.MTU < *net.MTU.Min || st.Applied.MTU > *net.MTU.Max {
		return 0, false
	}
	return st.Applied.MTU, true
}
