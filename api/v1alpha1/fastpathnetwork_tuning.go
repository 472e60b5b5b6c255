package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TuningMode says what a network does with its own measurements (issue 27).
// +kubebuilder:validation:Enum=Off;Recommend;Apply
type TuningMode string

const (
	// TuningOff measures nothing; attachments default to spec.mtu.default
	// and spec.offloads.
	TuningOff TuningMode = "Off"
	// TuningRecommend sweeps the candidates on each node and records the
	// winner in status.tuning; nothing else changes.
	TuningRecommend TuningMode = "Recommend"
	// TuningApply also makes the winner's MTU and offloads the defaults of
	// attachments created afterwards; existing ones are listed in
	// status.tuning.differing with the restart that would apply it.
	TuningApply TuningMode = "Apply"
)

// TuningObjective is what "best" means when the sweep chooses.
// +kubebuilder:validation:Enum=Throughput;CPUPerByte;Latency
type TuningObjective string

const (
	// ObjectiveThroughput: the highest median TCP_STREAM Mbit/s.
	ObjectiveThroughput TuningObjective = "Throughput"
	// ObjectiveCPUPerByte: the lowest median service demand (usec/KiB,
	// netperf LOCAL_SD, host scope in Pod mode: docs/design.md §5.3).
	ObjectiveCPUPerByte TuningObjective = "CPUPerByte"
	// ObjectiveLatency: the lowest median TCP_RR mean latency.
	ObjectiveLatency TuningObjective = "Latency"
)

// TuningCandidates are the settings a sweep tries. Every combination of an
// MTU and an offload set is one candidate. Queue counts and ring sizes are
// not candidates yet: they need VM mode (real guests), and the sweep runs in
// Pod mode.
type TuningCandidates struct {
	// mtus are the MTUs to try, bytes: 1-6 distinct values, each inside the
	// network's spec.mtu bounds (1280-65535 at most). Default: [spec.mtu.default].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:Minimum=1280
	// +kubebuilder:validation:items:Maximum=65535
	MTUs []int32 `json:"mtus,omitempty"`
	// offloads are the offload sets to try: 0-4 entries; none means the
	// network's spec.offloads only. Under offloadPolicy Fixed or datapath
	// Macvtap only the network's own offloads are allowed, so leave it empty.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Offloads []Offloads `json:"offloads,omitempty"`
}

// TuningRemeasure says when a node's measurement is taken again.
type TuningRemeasure struct {
	// onNodeChange re-measures a node when its FastPathNode reports another
	// kernel or datapath than the measurement was made on. Default true.
	// +optional
	OnNodeChange *bool `json:"onNodeChange,omitempty"`
	// minInterval is the least time between two sweeps of one node, 10m-720h.
	// Default 24h. A node change waits for it too, so a flapping node cannot
	// keep the network benchmarking.
	// +optional
	MinInterval *metav1.Duration `json:"minInterval,omitempty"`
}

// NetworkTuning asks a network to measure its own datapath on each node and
// recommend (or apply) the candidate that wins by the objective.
// +kubebuilder:validation:XValidation:rule="!has(self.duration) || (duration(self.duration) >= duration('1s') && duration(self.duration) <= duration('60s'))",message="spec.tuning.duration must be between 1s and 60s",fieldPath=".duration"
// +kubebuilder:validation:XValidation:rule="!has(self.remeasure) || !has(self.remeasure.minInterval) || (duration(self.remeasure.minInterval) >= duration('10m') && duration(self.remeasure.minInterval) <= duration('720h'))",message="spec.tuning.remeasure.minInterval must be between 10m and 720h",fieldPath=".remeasure.minInterval"
type NetworkTuning struct {
	// mode: Off | Recommend | Apply. Default Off.
	// +optional
	Mode TuningMode `json:"mode,omitempty"`
	// objective: Throughput | CPUPerByte | Latency. Default Throughput.
	// +optional
	Objective TuningObjective `json:"objective,omitempty"`
	// candidates to try. Default: the network's spec.mtu.default and
	// spec.offloads.
	// +optional
	Candidates *TuningCandidates `json:"candidates,omitempty"`
	// repetitions per candidate, 3-10: candidates alternate within each
	// repetition (A B C, then C B A) so drift hits all alike. Default 3.
	// +optional
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=10
	Repetitions *int32 `json:"repetitions,omitempty"`
	// duration of each netperf run (netperf -l), 1s-60s. Default 10s.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// remeasure says when to sweep a node again.
	// +optional
	Remeasure *TuningRemeasure `json:"remeasure,omitempty"`
}

// TuningSetting is one candidate setting.
type TuningSetting struct {
	// mtu in bytes.
	MTU int32 `json:"mtu"`
	// offloads of the candidate (every key set).
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`
}

// TuningEvidence is what one candidate measured on one node. Throughput is
// TCP_STREAM in Mbit/s over the repetitions (median, min, max); service
// demand is netperf's usec of CPU per KiB (host scope, docs/design.md §5.3);
// latency is TCP_RR's mean in microseconds.
type TuningEvidence struct {
	// mtu of the candidate, bytes.
	MTU int32 `json:"mtu"`
	// offloads of the candidate.
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`
	// repetitions that finished.
	// +optional
	Repetitions int32 `json:"repetitions,omitempty"`
	// medianMbps is the median TCP_STREAM throughput, Mbit/s.
	// +optional
	MedianMbps int64 `json:"medianMbps,omitempty"`
	// minMbps is the lowest repetition, Mbit/s.
	// +optional
	MinMbps int64 `json:"minMbps,omitempty"`
	// maxMbps is the highest repetition, Mbit/s.
	// +optional
	MaxMbps int64 `json:"maxMbps,omitempty"`
	// serviceDemandUsPerKB is the median service demand, usec/KiB, as a
	// decimal string.
	// +optional
	ServiceDemandUsPerKB string `json:"serviceDemandUsPerKB,omitempty"`
	// meanLatencyUs is the median TCP_RR mean latency, usec, as a decimal string.
	// +optional
	MeanLatencyUs string `json:"meanLatencyUs,omitempty"`
	// failed is why the candidate failed (path MTU check, lost connection,
	// runner error); a failed candidate is never recommended.
	// +optional
	Failed string `json:"failed,omitempty"`
	// negotiatedOffloads are the offloads the candidate's path negotiated,
	// as the benchmark runner read them on the client's interface before
	// each repetition (status.paths[].offloads of its FastPathBenchmark):
	// the first repetition's, or the first that differs from offloads.
	// +optional
	NegotiatedOffloads *Offloads `json:"negotiatedOffloads,omitempty"`
	// offloadMismatch says why the candidate's path did not have the
	// offloads it asked for, naming each offload, asked and negotiated
	// ("repetition 1: gro asked On, negotiated Off"), or that the runner
	// reported none. Such a candidate measured another setting than its
	// own, so it is never recommended.
	// +optional
	OffloadMismatch string `json:"offloadMismatch,omitempty"`
}

// NodeTuning is the answer of one node's sweep.
type NodeTuning struct {
	// node name.
	Node string `json:"node"`
	// recommended is the winning setting; absent when every candidate failed.
	// +optional
	Recommended *TuningSetting `json:"recommended,omitempty"`
	// evidence has one entry per candidate.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=24
	Evidence []TuningEvidence `json:"evidence,omitempty"`
	// marginPercent is how much better the winner is than the runner-up by
	// the objective, in percent, as a decimal string ("" with one candidate).
	// With mtuCurve WithinNoise it is how far the recommended (smallest) MTU's
	// median lies from the fastest candidate's, in percent of the fastest's
	// (0 or negative).
	// +optional
	MarginPercent string `json:"marginPercent,omitempty"`
	// mtuCurve says whether throughput changes with the MTU beyond the
	// noise (objective Throughput, two or more MTUs measured with the
	// winner's offloads): WithinNoise when the min-max ranges of their
	// repetitions all overlap, and then the smallest of those MTUs is
	// recommended (the same speed, less memory per ring); BeyondNoise
	// otherwise. Absent when not judged.
	// +optional
	MTUCurve NoiseVerdict `json:"mtuCurve,omitempty"`
	// message explains the recommendation: the flat MTU curve and the MTU
	// chosen within it, the candidates left out for their offloads.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// measuredAt is when the sweep of this node finished.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`
	// kernel and datapath the node reported when it was measured (the
	// re-measure trigger compares them with its FastPathNode).
	// +optional
	Kernel string `json:"kernel,omitempty"`
	// +optional
	Datapath string `json:"datapath,omitempty"`
}

// TuningDifference is an existing attachment whose MTU or offloads differ
// from the applied recommendation.
type TuningDifference struct {
	// namespace and name of the FastPathAttachment.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// mtu the attachment has, bytes.
	MTU int32 `json:"mtu"`
	// offloads the attachment has (every key set). Absent when the applied
	// offloads do not apply on the network (offloadPolicy Fixed, or an
	// offload Off on datapath Macvtap): then only the MTU is compared.
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`
	// restart that would apply the recommendation: the fields to set and the
	// restart of the attachment's VMs.
	Restart string `json:"restart"`
}

// NetworkTuningStatus is the state of a network's tuning.
type NetworkTuningStatus struct {
	// nodes has one entry per node that serves the network.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=5000
	Nodes []NodeTuning `json:"nodes,omitempty"`
	// applied is the setting new attachments default to (mode Apply only):
	// the MTU most nodes recommend (ties: the smaller MTU), with the offload
	// set most of those nodes recommend with it (ties: the set with more
	// offloads On, then the first in the order of the offloads' fields with
	// On before Off), so it is always a setting some node measured.
	// +optional
	Applied *TuningSetting `json:"applied,omitempty"`
	// appliedAt is when applied was set: attachments created before keep
	// their MTU and offloads and are listed in differing.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// differing lists existing attachments whose MTU or offloads are not
	// the applied ones.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Differing []TuningDifference `json:"differing,omitempty"`
	// sweep is the sweep in progress: the node and when it started.
	// +optional
	SweepNode string `json:"sweepNode,omitempty"`
	// +optional
	SweepStarted *metav1.Time `json:"sweepStarted,omitempty"`
}
