package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkMode says what the endpoints of a benchmark are.
// +kubebuilder:validation:Enum=VM;Pod
type BenchmarkMode string

const (
	// BenchmarkModeVM runs netperf inside the client VM (over SSH) against the
	// server VM: the whole guest path.
	BenchmarkModeVM BenchmarkMode = "VM"
	// BenchmarkModePod runs netperf in pods attached to the attachment's NAD: the
	// node datapath alone.
	BenchmarkModePod BenchmarkMode = "Pod"
)

// BenchmarkTest is a netperf test name, or a vsock test run by fastpath-bench
// (netperf has no AF_VSOCK).
// +kubebuilder:validation:Enum=TCP_STREAM;TCP_MAERTS;UDP_STREAM;TCP_RR;TCP_CRR;VSOCK_STREAM;VSOCK_RR
type BenchmarkTest string

const (
	// TestTCPStream is netperf TCP_STREAM: bulk throughput.
	TestTCPStream BenchmarkTest = "TCP_STREAM"
	// TestTCPRR is netperf TCP_RR: request/response latency (1-byte messages).
	TestTCPRR BenchmarkTest = "TCP_RR"
	// TestTCPMaerts is netperf TCP_MAERTS: bulk throughput in the receive
	// direction (the server sends).
	TestTCPMaerts BenchmarkTest = "TCP_MAERTS"
	// TestUDPStream is netperf UDP_STREAM with 1472-byte datagrams (they fit
	// a 1500-byte MTU unfragmented); the loss is reported.
	TestUDPStream BenchmarkTest = "UDP_STREAM"
	// TestTCPCRR is netperf TCP_CRR: a new TCP connection per 1-byte
	// transaction, the connection rate.
	TestTCPCRR BenchmarkTest = "TCP_CRR"
	// TestVSOCKStream is a vsock bulk stream through the sibling relay.
	TestVSOCKStream BenchmarkTest = "VSOCK_STREAM"
	// TestVSOCKRR is a vsock request/response test through the sibling relay.
	TestVSOCKRR BenchmarkTest = "VSOCK_RR"
)

// Baseline is the path each fast-path point is compared with.
// +kubebuilder:validation:Enum=PodNetwork;None
type Baseline string

const (
	// BaselinePodNetwork measures the same point over the default pod network.
	BaselinePodNetwork Baseline = "PodNetwork"
	// BaselineNone measures the fast path only.
	BaselineNone Baseline = "None"
)

// BenchmarkPhase is the coarse state of a benchmark.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BenchmarkPhase string

const (
	// BenchmarkPending: waiting for the attachment or the endpoints.
	BenchmarkPending BenchmarkPhase = "Pending"
	// BenchmarkRunning: the runner Job is running.
	BenchmarkRunning BenchmarkPhase = "Running"
	// BenchmarkSucceeded: results are in and every success criterion is met.
	BenchmarkSucceeded BenchmarkPhase = "Succeeded"
	// BenchmarkFailed: the runner failed or a success criterion was missed.
	BenchmarkFailed BenchmarkPhase = "Failed"
)

// FastPathBenchmarkSpec is a netperf matrix between two endpoints of an attachment.
// +kubebuilder:validation:XValidation:rule="self.mode != 'VM' || (has(self.client.vm) && has(self.server.vm))",message="spec.client.vm and spec.server.vm are required in VM mode"
// +kubebuilder:validation:XValidation:rule="self.mode != 'VM' || has(self.sshKeySecretRef)",message="spec.sshKeySecretRef is required in VM mode: the runner reaches the client VM over SSH"
// +kubebuilder:validation:XValidation:rule="!has(self.successCriteria) || !has(self.successCriteria.minSpeedupPercent) || !has(self.baseline) || self.baseline != 'None'",message="spec.successCriteria.minSpeedupPercent needs a baseline: spec.baseline must not be None"
// +kubebuilder:validation:XValidation:rule="!has(self.successCriteria) || !has(self.successCriteria.maxCPURatio) || !has(self.baseline) || self.baseline != 'None'",message="spec.successCriteria.maxCPURatio needs a baseline: spec.baseline must not be None"
// +kubebuilder:validation:XValidation:rule="!has(self.successCriteria) || !has(self.successCriteria.maxRegressionPercent) || has(self.compareTo)",message="spec.successCriteria.maxRegressionPercent needs spec.compareTo: the run to compare with"
// +kubebuilder:validation:XValidation:rule="self.mode == 'VM' || !has(self.additionalPairs)",message="spec.additionalPairs is for VM mode only: Pod mode creates one netserver pod per pair itself"
// +kubebuilder:validation:XValidation:rule="self.mode != 'VM' || !has(self.pairs) || self.pairs <= 1 + (has(self.additionalPairs) ? size(self.additionalPairs) : 0)",message="spec.pairs in VM mode needs that many client/server VM pairs: spec.client/spec.server plus pairs-1 entries in spec.additionalPairs"
type FastPathBenchmarkSpec struct {
	// attachmentRef names the FastPathAttachment (same namespace) under test.
	// +required
	AttachmentRef LocalObjectReference `json:"attachmentRef"`

	// mode: VM | Pod.
	// +required
	Mode BenchmarkMode `json:"mode"`

	// client is the netperf client endpoint.
	// +required
	Client BenchmarkEndpoint `json:"client"`

	// server is the netserver endpoint.
	// +required
	Server BenchmarkEndpoint `json:"server"`

	// tests are netperf test names (TCP_STREAM, TCP_MAERTS, UDP_STREAM,
	// TCP_RR, TCP_CRR), measured on the fast path and the baseline with CPU
	// (netperf -c -C), and the vsock tests VSOCK_STREAM and VSOCK_RR,
	// measured on the path "fastpath-vsock" (VM mode with one pair only: the
	// runner copies fastpath-bench into both VMs over SSH, starts its
	// vsock-server in the server VM on the port of the attachment's vsock
	// service targeting it, and connects from the client VM to that service's
	// status.vsockServices[].address: CID 2 at its relay port in vsock mode
	// Relay, the server VM's CID at the service port in mode Sibling; no
	// baseline). Default [TCP_STREAM, TCP_RR].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Tests []BenchmarkTest `json:"tests,omitempty"`

	// socketSizes are the socket buffer sizes in bytes (netperf -s/-S): 4096-16777216
	// each. Default [65536, 262144] (the VMCI paper's 64 KB and 256 KB).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=4096
	// +kubebuilder:validation:items:Maximum=16777216
	SocketSizes []int32 `json:"socketSizes,omitempty"`

	// messageSizes are the send sizes in bytes (netperf -m): 1-1048576 each.
	// Default [512, 4096, 16384, 65536].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=12
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=1048576
	MessageSizes []int32 `json:"messageSizes,omitempty"`

	// sessions are the numbers of concurrent netperf sessions per point: 1-64 each.
	// Default [1, 5].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=64
	Sessions []int32 `json:"sessions,omitempty"`

	// duration of each run (netperf -l), 1s-10m. Default 60s.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`

	// repetitions are the runs per point: 1-10; the median is reported with min/max.
	// Default 3.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Repetitions *int32 `json:"repetitions,omitempty"`

	// pairs is the number of client/server pairs driving traffic at once (the
	// multi-VM paper's scale-out test): 1-64. Default 1. With pairs N > 1 every
	// point is measured with 1 pair and with N pairs, so status shows the
	// scale-out next to the single pair. Pod mode creates N netserver pods per
	// path (the N clients share the runner pod); VM mode needs 2N VMs: pair 1 is
	// spec.client/spec.server, pairs 2..N are spec.additionalPairs.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Pairs *int32 `json:"pairs,omitempty"`

	// additionalPairs are the client/server VMs of pairs 2..N in VM mode
	// (additionalPairs[i] is pair i+2); pairs N needs at least N-1 entries. Each VM
	// must be selected by the attachment. Not allowed in Pod mode.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=63
	AdditionalPairs []BenchmarkPair `json:"additionalPairs,omitempty"`

	// baseline: PodNetwork | None. Default PodNetwork.
	// +optional
	Baseline Baseline `json:"baseline,omitempty"`

	// successCriteria are the thresholds that decide Succeeded or Failed.
	// +optional
	SuccessCriteria *SuccessCriteria `json:"successCriteria,omitempty"`

	// compareTo names an earlier run this one is compared with, point by
	// point (status.comparison), and judged against with
	// successCriteria.maxRegressionPercent: a FastPathBenchmark, or a
	// ConfigMap holding the results.json a pipeline kept. The run waits
	// (Pending, WaitingForCompareTo) until it exists and, for a benchmark,
	// has finished.
	// +optional
	CompareTo *CompareTo `json:"compareTo,omitempty"`

	// sshKeySecretRef names a Secret (same namespace) with key ssh-privatekey used
	// to reach the client VM in VM mode.
	// +optional
	SSHKeySecretRef *LocalObjectReference `json:"sshKeySecretRef,omitempty"`

	// sshUser is the guest user for SSH in VM mode: a POSIX user name, 1-32
	// letters, digits, '_', '.' or '-', starting with a letter or '_'
	// (wellknown.SSHUserPattern), so the runner can never read it as an ssh
	// option. Default fedora.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_.-]*$')",message="sshUser must be a POSIX user name: 1-32 letters, digits, '_', '.' or '-', starting with a letter or '_' (e.g. fedora, cloud-user)"
	SSHUser string `json:"sshUser,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// CompareTo names the run a benchmark is compared with: exactly one of
// benchmark and configMap, in the benchmark's namespace.
// +kubebuilder:validation:XValidation:rule="has(self.benchmark) != has(self.configMap)",message="spec.compareTo needs exactly one of benchmark and configMap"
type CompareTo struct {
	// benchmark names a FastPathBenchmark whose finished run (the
	// results.json in its results ConfigMap) is compared with.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Benchmark string `json:"benchmark,omitempty"`
	// configMap names a ConfigMap with a results.json key, e.g. made with
	// `kubectl create configmap ci-baseline --from-file=results.json`.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ConfigMap string `json:"configMap,omitempty"`
}

// BenchmarkEndpoint is one side of a benchmark.
type BenchmarkEndpoint struct {
	// vm names a VirtualMachine selected by the attachment (VM mode).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	VM string `json:"vm,omitempty"`
	// node pins the endpoint pod to a node (Pod mode; default: any node, both
	// endpoints on the same one).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`
}

// BenchmarkPair is one client/server VM pair of a scale-out benchmark (VM mode).
type BenchmarkPair struct {
	// client names the VirtualMachine that runs netperf.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Client string `json:"client"`
	// server names the VirtualMachine that runs netserver.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server"`
}

// SuccessCriteria are pass/fail thresholds.
type SuccessCriteria struct {
	// minThroughputMbps is the least acceptable best fast-path TCP_STREAM median in
	// 10^6 bit/s.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinThroughputMbps *int64 `json:"minThroughputMbps,omitempty"`
	// minSpeedupPercent is the least acceptable fast-path/baseline throughput ratio
	// at the best point, in percent: at least 100 (100 = as fast as the baseline).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 100",message="spec.successCriteria.minSpeedupPercent must be at least 100 (percent of the baseline)"
	MinSpeedupPercent *int32 `json:"minSpeedupPercent,omitempty"`
	// maxCPURatio is the largest acceptable fast-path/baseline service demand
	// ratio (CPU per byte, netperf -c -C) at the best point, a decimal number
	// greater than 0 and at most 100, e.g. "0.80" (the fast path must spend at
	// most 80% of the baseline's CPU per byte). The ratio is the median of the
	// per-repetition ratios. Needs a baseline.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?$') && double(self) > 0.0 && double(self) <= 100.0",message="spec.successCriteria.maxCPURatio must be a decimal number greater than 0 and at most 100, e.g. \"0.80\""
	MaxCPURatio string `json:"maxCPURatio,omitempty"`
	// maxRegressionPercent is the largest acceptable regression against
	// spec.compareTo's run, in percent, 1-100: at every matrix point both
	// runs measured, on every path but the baseline, neither may the
	// median throughput drop nor the service demand (CPU per byte) rise by
	// more, unless the min-max ranges of the two runs' repetitions overlap
	// (the difference is within the noise). Needs spec.compareTo.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="spec.successCriteria.maxRegressionPercent must be between 1 and 100 (percent of the compared run's figure)"
	MaxRegressionPercent *int32 `json:"maxRegressionPercent,omitempty"`
}

// FastPathBenchmarkStatus holds a bounded summary; the full results JSON is in the
// ConfigMap named by resultsConfigMap.
type FastPathBenchmarkStatus struct {
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase: Pending | Running | Succeeded | Failed.
	// +optional
	Phase BenchmarkPhase `json:"phase,omitempty"`
	// conditions: Running, Succeeded, Failed (reasons in conditions.go).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// jobName is the runner Job.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// resultsConfigMap holds results.json (the runner's full output).
	// +optional
	ResultsConfigMap string `json:"resultsConfigMap,omitempty"`
	// startTime is when the runner started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when results arrived.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// bestGbps is the best fast-path TCP_STREAM median in 10^9 bit/s, as a decimal
	// string with two digits (for printing), e.g. "13.52".
	// +optional
	BestGbps string `json:"bestGbps,omitempty"`
	// speedup is the fast-path/baseline ratio at the best point, e.g. "2.93x".
	// +optional
	Speedup string `json:"speedup,omitempty"`
	// cpuRatio is the fast-path/baseline service demand ratio (CPU per byte)
	// at the best point, the median of the per-repetition ratios with two
	// decimals, e.g. "0.62"; lower is better.
	// +optional
	CPURatio string `json:"cpuRatio,omitempty"`
	// paths summarises each measured path.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=8
	Paths []PathSummary `json:"paths,omitempty"`
	// points are the matrix points, fast path beside baseline (at most 64; the rest
	// is in the ConfigMap).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Points []BenchmarkPoint `json:"points,omitempty"`
	// comparedTo says what spec.compareTo resolved to, e.g.
	// "FastPathBenchmark ci-x7k2p (run ci-x7k2p-1)" or "ConfigMap ci-baseline".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ComparedTo string `json:"comparedTo,omitempty"`
	// comparison is this run beside spec.compareTo's at every path and
	// matrix point both measured (at most 64).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Comparison []ComparedPoint `json:"comparison,omitempty"`
}

// NoiseVerdict says whether two runs' repetitions overlap.
// +kubebuilder:validation:Enum=WithinNoise;BeyondNoise
type NoiseVerdict string

const (
	// WithinNoise: the min-max ranges of the two runs' repetitions
	// overlap; the difference of the medians may be noise.
	WithinNoise NoiseVerdict = "WithinNoise"
	// BeyondNoise: the ranges do not overlap.
	BeyondNoise NoiseVerdict = "BeyondNoise"
)

// ComparedPoint is one path at one matrix point, this run beside the run
// of spec.compareTo.
type ComparedPoint struct {
	// path name, as in results.json.
	Path string `json:"path"`
	// test name.
	Test BenchmarkTest `json:"test"`
	// socketBytes, messageBytes, sessions and pairs name the point, as in
	// status.points.
	// +optional
	SocketBytes int32 `json:"socketBytes,omitempty"`
	// +optional
	MessageBytes int32 `json:"messageBytes,omitempty"`
	// +optional
	Sessions int32 `json:"sessions,omitempty"`
	// +optional
	Pairs int32 `json:"pairs,omitempty"`
	// mbps and comparedMbps are this run's and the compared run's median
	// throughput in 10^6 bit/s.
	// +optional
	Mbps int64 `json:"mbps,omitempty"`
	// +optional
	ComparedMbps int64 `json:"comparedMbps,omitempty"`
	// throughputRatio is mbps / comparedMbps of the unrounded medians with
	// two decimals, e.g. "0.82".
	// +optional
	ThroughputRatio string `json:"throughputRatio,omitempty"`
	// throughputNoise: WithinNoise | BeyondNoise.
	// +optional
	ThroughputNoise NoiseVerdict `json:"throughputNoise,omitempty"`
	// cpuRatio is this run's median service demand (CPU per byte) over the
	// compared run's, two decimals; lower is better. Set when both
	// measured it.
	// +optional
	CPURatio string `json:"cpuRatio,omitempty"`
	// cpuNoise: WithinNoise | BeyondNoise, for cpuRatio.
	// +optional
	CPUNoise NoiseVerdict `json:"cpuNoise,omitempty"`
}

// PathSummary is the best result of one path (e.g. fastpath, baseline).
type PathSummary struct {
	// path name, as in results.json.
	Path string `json:"path"`
	// bestThroughputMbps is the best TCP_STREAM median in 10^6 bit/s.
	// +optional
	BestThroughputMbps int64 `json:"bestThroughputMbps,omitempty"`
	// meanLatency is the best TCP_RR mean round-trip latency.
	// +optional
	MeanLatency *metav1.Duration `json:"meanLatency,omitempty"`
	// interface is the client's interface on this path, e.g. "net1".
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Interface string `json:"interface,omitempty"`
	// offloads are what the client's interface on this path negotiated,
	// each On | Off, read by the runner before it measured (as `ethtool -k`
	// reads them; results.json run.offloads). Absent when the runner did not
	// read them: VM mode, the vsock path, or a read that failed.
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`
}

// BenchmarkPoint is one matrix point, fast path beside baseline.
type BenchmarkPoint struct {
	// test name.
	Test BenchmarkTest `json:"test"`
	// socketBytes is the socket buffer size in bytes.
	// +optional
	SocketBytes int32 `json:"socketBytes,omitempty"`
	// messageBytes is the message size in bytes.
	// +optional
	MessageBytes int32 `json:"messageBytes,omitempty"`
	// sessions is the number of concurrent sessions per pair.
	// +optional
	Sessions int32 `json:"sessions,omitempty"`
	// pairs is the number of client/server pairs that ran at once (1 unless
	// spec.pairs > 1).
	// +optional
	Pairs int32 `json:"pairs,omitempty"`
	// fastPathMbps is the fast-path median throughput in 10^6 bit/s.
	// +optional
	FastPathMbps int64 `json:"fastPathMbps,omitempty"`
	// fastPathPerPairMbps[i] is pair i+1's fast-path median throughput in 10^6
	// bit/s (set when pairs > 1; fastPathMbps is their aggregate).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	FastPathPerPairMbps []int64 `json:"fastPathPerPairMbps,omitempty"`
	// baselineMbps is the baseline median throughput in 10^6 bit/s.
	// +optional
	BaselineMbps int64 `json:"baselineMbps,omitempty"`
	// fastPathLatency is the fast-path mean latency (RR tests).
	// +optional
	FastPathLatency *metav1.Duration `json:"fastPathLatency,omitempty"`
	// baselineLatency is the baseline mean latency (RR tests).
	// +optional
	BaselineLatency *metav1.Duration `json:"baselineLatency,omitempty"`
	// speedupPercent is fast path / baseline in percent (throughput tests) or
	// baseline / fast path latency in percent (RR tests).
	// +optional
	SpeedupPercent int32 `json:"speedupPercent,omitempty"`
	// fastPathServiceDemandUsPerKB is the fast path's median service demand,
	// microseconds of CPU per KiB of payload (netperf -c -C, usec/KB), as a
	// decimal string with three digits, e.g. "3.600". On one node it is the
	// node's whole CPU, measured once for client and server.
	// +optional
	FastPathServiceDemandUsPerKB string `json:"fastPathServiceDemandUsPerKB,omitempty"`
	// baselineServiceDemandUsPerKB is the baseline's, as fastPathServiceDemandUsPerKB.
	// +optional
	BaselineServiceDemandUsPerKB string `json:"baselineServiceDemandUsPerKB,omitempty"`
	// fastPathHostCPUSecondsPerGB is the fast path's median host CPU per
	// byte in VM mode: seconds of CPU of the two VMs' virt-launcher pods
	// (their cgroups: vCPUs, vhost workers, QEMU's threads) plus the node's
	// softirq time, per 10^9 bytes of payload, as a decimal string with
	// three digits, e.g. "0.412"; lower is better. Measured by the node
	// agent's host CPU endpoint (docs/design.md §5.3); absent when it was
	// not. Under QEMU TCG (no /dev/kvm on the node) the launchers' time is
	// mostly CPU emulation: compare paths, not absolute figures.
	// +optional
	FastPathHostCPUSecondsPerGB string `json:"fastPathHostCPUSecondsPerGB,omitempty"`
	// baselineHostCPUSecondsPerGB is the baseline's, as fastPathHostCPUSecondsPerGB.
	// +optional
	BaselineHostCPUSecondsPerGB string `json:"baselineHostCPUSecondsPerGB,omitempty"`
	// fastPathGbpsPerHostCore is the fast path's median payload in 10^9
	// bits per second of that host CPU (the Gbit/s one host core carries at
	// this cost), three digits, e.g. "19.417"; higher is better.
	// +optional
	FastPathGbpsPerHostCore string `json:"fastPathGbpsPerHostCore,omitempty"`
	// baselineGbpsPerHostCore is the baseline's, as fastPathGbpsPerHostCore.
	// +optional
	BaselineGbpsPerHostCore string `json:"baselineGbpsPerHostCore,omitempty"`
	// cpuRatio is fast path / baseline service demand, the median of the
	// per-repetition ratios with two decimals, e.g. "0.62"; lower is better.
	// +optional
	CPURatio string `json:"cpuRatio,omitempty"`
	// fastPathLossPercent and baselineLossPercent are the median UDP loss in
	// percent with two decimals (UDP_STREAM only).
	// +optional
	FastPathLossPercent string `json:"fastPathLossPercent,omitempty"`
	// +optional
	BaselineLossPercent string `json:"baselineLossPercent,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fpb,categories=fastpath
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Best Gbps",type=string,JSONPath=`.status.bestGbps`
// +kubebuilder:printcolumn:name="Speedup",type=string,JSONPath=`.status.speedup`
// +kubebuilder:printcolumn:name="CPU Ratio",type=string,JSONPath=`.status.cpuRatio`
// +kubebuilder:printcolumn:name="Attachment",type=string,JSONPath=`.spec.attachmentRef.name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FastPathBenchmark runs netperf between two endpoints of an attachment and
// records the results, fast path beside the pod-network baseline.
type FastPathBenchmark struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FastPathBenchmarkSpec `json:"spec"`
	// +optional
	Status FastPathBenchmarkStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FastPathBenchmarkList is a list of FastPathBenchmark.
type FastPathBenchmarkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FastPathBenchmark `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FastPathBenchmark{}, &FastPathBenchmarkList{})
}
