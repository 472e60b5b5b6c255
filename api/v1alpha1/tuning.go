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
		o.FillFrom(*net.Offloads)
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
	applied := appliedTo(network, created)
	if applied == nil {
		return 0, false
	}
	net := DefaultNetworkSpec(network.Spec)
	if applied.MTU < *net.MTU.Min || applied.MTU > *net.MTU.Max {
		return 0, false
	}
	return applied.MTU, true
}

// TunedDefaultOffloads returns the offloads an attachment gets on network
// because of tuning for the keys of spec.network.offloads it does not set,
// and true; or nil and false when spec.offloads applies. Like
// TunedDefaultMTU it applies only in mode Apply, once status.tuning.applied
// is set, and to attachments created at or after status.tuning.appliedAt;
// and only where the network lets attachments choose offloads: never under
// offloadPolicy Fixed (spec.offloads is then the only value), never with an
// offload Off on datapath Macvtap (the kernel keeps a macvtap's offloads
// on). Keys applied leaves unset take spec.offloads. The result is a copy.
func TunedDefaultOffloads(network *FastPathNetwork, created metav1.Time) (*Offloads, bool) {
	applied := appliedTo(network, created)
	if applied == nil || applied.Offloads == nil {
		return nil, false
	}
	net := DefaultNetworkSpec(network.Spec)
	if net.OffloadPolicy == OffloadPolicyFixed {
		return nil, false
	}
	out := fillOffloads(*applied.Offloads, *net.Offloads)
	if net.Datapath == DatapathMacvtap && out != AllOffloads(OffloadOn) {
		return nil, false
	}
	return &out, true
}

// WithTunedDefaults returns spec with network's tuned defaults (issue 27)
// in the fields of spec.network the attachment does not set itself: mtu
// (TunedDefaultMTU) and each key of offloads (TunedDefaultOffloads); a field
// the attachment sets is kept. The offloads are filled only when the result
// keeps TX checksum offload on wherever TSO is on (the kernel's rule, which
// the attachment controller enforces); otherwise the attachment keeps
// spec.offloads. created is the attachment's creation time. A
// spec without spec.network, or one the tuning does not apply to, is
// returned as it is. It never mutates its argument.
func WithTunedDefaults(spec FastPathAttachmentSpec, network *FastPathNetwork, created metav1.Time) FastPathAttachmentSpec {
	if spec.Network == nil {
		return spec
	}
	mtu, mtuOK := TunedDefaultMTU(network, created)
	offloads, offloadsOK := TunedDefaultOffloads(network, created)
	if offloadsOK {
		if merged := OffloadsWithDefaults(spec.Network.Offloads, *offloads); merged.TSO.On() && !merged.TXChecksum.On() {
			// The attachment's own keys and the tuned ones together would
			// turn TSO on without TX checksum offload, which the kernel
			// refuses (the attachment controller rejects the spec): the
			// attachment keeps spec.offloads rather than being broken by a
			// default it did not ask for.
			offloadsOK = false
		}
	}
	if (!mtuOK || spec.Network.MTU != nil) && !offloadsOK {
		return spec
	}
	out := *spec.DeepCopy()
	n := out.Network
	if mtuOK && n.MTU == nil {
		n.MTU = &mtu
	}
	if offloadsOK {
		if n.Offloads == nil {
			n.Offloads = &Offloads{}
		}
		*n.Offloads = fillOffloads(*n.Offloads, *offloads)
	}
	return out
}

// appliedTo returns network's status.tuning.applied when it applies to an
// attachment created at created (mode Apply, created at or after
// status.tuning.appliedAt), else nil.
func appliedTo(network *FastPathNetwork, created metav1.Time) *TuningSetting {
	if network == nil || network.Spec.Tuning == nil || network.Spec.Tuning.Mode != TuningApply {
		return nil
	}
	st := network.Status.Tuning
	if st == nil || st.Applied == nil || st.AppliedAt == nil || created.Before(st.AppliedAt) {
		return nil
	}
	return st.Applied
}

// OffloadsWithDefaults returns o (nil: none set) with each unset key taken
// from defaults.
func OffloadsWithDefaults(o *Offloads, defaults Offloads) Offloads {
	var out Offloads
	if o != nil {
		out = *o
	}
	return fillOffloads(out, defaults)
}

// fillOffloads returns o with each unset key taken from defaults.
func fillOffloads(o, defaults Offloads) Offloads {
	return *o.FillFrom(defaults)
}
