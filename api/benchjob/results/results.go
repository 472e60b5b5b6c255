package results

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// EmulatedEnv is the environment variable through which whoever starts a
// runner tells it what is emulated: the demo's emulated kubelet
// (e2e/localenv/emulation) sets it to emulation.EmulatedNote in every runner
// process. `fastpath-bench run` records its value in Machine.Emulated.
const EmulatedEnv = "FASTPATH_EMULATED"

// JoinEmulated returns the notes for Machine.Emulated joined with "; ", in
// the order given, with surrounding space trimmed, empty notes and exact
// repeats dropped. It returns "" when no note is left, so a real run stays
// unlabelled.
func JoinEmulated(notes ...string) string {
	var kept []string
	seen := map[string]bool{}
	for _, n := range notes {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		kept = append(kept, n)
	}
	return strings.Join(kept, "; ")
}

// Test names. The TCP ones are netperf's -t values; the vsock ones are run by
// fastpath-bench itself because netperf has no AF_VSOCK (issue 6).
const (
	TCPStream   = "TCP_STREAM"
	TCPRR       = "TCP_RR"
	VSockStream = "VSOCK_STREAM"
	VSockRR     = "VSOCK_RR"
	// TCPMaerts is TCP_STREAM in the receive direction: the server sends.
	TCPMaerts = "TCP_MAERTS"
	// UDPStream is a UDP bulk stream; its throughput is what arrived and
	// its loss is reported (Run.LossPercent).
	UDPStream = "UDP_STREAM"
	// TCPCRR is a request/response test with a new TCP connection per
	// transaction: the connection rate.
	TCPCRR = "TCP_CRR"
)

// IsRR reports whether test is a request/response test (name ends in "_RR",
// or TCP_CRR): its messageBytes is the request and response size, it reports
// transactions and latency, and its throughput is the payload rate of both
// directions.
func IsRR(test string) bool {
	return test == TCPCRR || len(test) > 3 && test[len(test)-3:] == "_RR"
}

// MeasuresCPU reports whether the runner measures CPU (netperf -c -C) for
// test: every netperf test (TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR,
// UDP_STREAM), not the vsock tests.
func MeasuresCPU(test string) bool {
	switch test {
	case TCPStream, TCPMaerts, TCPRR, TCPCRR, UDPStream:
		return true
	}
	return false
}

// CPU scopes (Session.CPUScope, Run.CPUScope).
const (
	// CPUScopeHost: client and server share one host (network namespaces,
	// pods on one node); netperf's local and remote figures are the same
	// host-wide /proc/stat measurement, so it is reported once.
	CPUScopeHost = "host"
	// CPUScopeEndpoints: client and server are separate machines or guests;
	// the service demand is the client's plus the server's.
	CPUScopeEndpoints = "endpoints"
)

// SchemaVersion is the version of the results.json schema this package
// writes (Document.SchemaVersion; docs/benchmarks.md, "results.json"). It
// changes only when a field is renamed, removed or changes its meaning or
// unit; adding a field keeps it, since readers ignore fields they do not
// know.
const SchemaVersion = 1

// Document is the whole output of one benchmark run, printed by
// `fastpath-bench run` and stored in the FastPathBenchmark's ConfigMap.
type Document struct {
	// SchemaVersion is the schema the document follows: SchemaVersion when
	// Encode wrote it; 0 (absent) in documents written before the field
	// existed, which have the shape of version 1.
	SchemaVersion int     `json:"schemaVersion,omitempty"`
	Machine       Machine `json:"machine"`
	Runs          []Run   `json:"runs"`
	// GuestChecks are what real guests' virtio-net drivers report for their
	// fast-path NICs, read inside the guests (local environment with real
	// guests only).
	GuestChecks []GuestCheck `json:"guestChecks,omitempty"`
	// VsockChecks are vsock connections tried between real guests (through
	// the relay in mode Relay, directly in mode Sibling), with what the
	// allow-list says and whether that happened.
	VsockChecks []VsockCheck `json:"vsockChecks,omitempty"`
}

// GuestCheck is one NIC as a real guest's driver reports it (sysfs MTU,
// ethtool -g current ring sizes, ethtool -l combined queues, ethtool -k
// tcp-segmentation-offload).
type GuestCheck struct {
	// VM is the VM name; Interface the guest's NIC name, e.g. "eth1".
	VM        string `json:"vm"`
	Interface string `json:"interface"`
	// MTU in bytes.
	MTU int `json:"mtu"`
	// RxQueueSize and TxQueueSize are the virtio ring sizes in descriptors.
	RxQueueSize int `json:"rxQueueSize"`
	TxQueueSize int `json:"txQueueSize"`
	// Queues is the number of combined queue pairs.
	Queues int `json:"queues"`
	// TSO is "on" or "off".
	TSO string `json:"tso"`
}

// VsockCheck is one vsock connection from a guest to a service.
type VsockCheck struct {
	// Mode is the attachment's vsock mode: "Relay" (the guest dials the
	// relay at CID 2) or "Sibling" (it dials the target's CID directly).
	Mode string `json:"mode"`
	// From and To are VM names; CID and Port what From dialled (CID 2 and
	// the relay port in mode Relay, the target's CID and the service port
	// in mode Sibling).
	From string `json:"from"`
	To   string `json:"to"`
	CID  uint32 `json:"cid"`
	Port uint32 `json:"port"`
	// Allowed is whether the allow-list admits From; OK whether what
	// happened matches (answered when allowed, refused when not).
	Allowed bool `json:"allowed"`
	OK      bool `json:"ok"`
}

// Machine describes where the benchmark ran.
type Machine struct {
	// Hostname of the machine that ran the runner.
	Hostname string `json:"hostname"`
	// Kernel is the kernel release (uname -r), e.g. "6.1.0-18-amd64".
	Kernel string `json:"kernel"`
	// CPUs is the number of logical CPUs the runner saw.
	CPUs int `json:"cpus"`
	// GoVersion of the runner binary, e.g. "go1.26.0".
	GoVersion string `json:"goVersion"`
	// Timestamp is when the run started (UTC, RFC 3339 in JSON).
	Timestamp time.Time `json:"timestamp"`
	// Netperf is the first line of `netperf -V` on the first client, e.g.
	// "Netperf version 2.7.0"; empty when no netperf test ran.
	Netperf string `json:"netperf,omitempty"`
	// Emulated explains what was emulated (e.g. "VMs emulated as network
	// namespaces; vsock emulated over UNIX sockets"); empty when every path
	// is the real thing. `fastpath-bench run` builds it with JoinEmulated
	// from $FASTPATH_EMULATED (EmulatedEnv), --emulated and its vsock
	// transport.
	Emulated string `json:"emulated,omitempty"`
	// Guests is what the VMs were: "qemu-tcg" or "qemu-kvm" for real guests
	// (e2e/localenv/guests), empty otherwise.
	Guests string `json:"guests,omitempty"`
}

// Run is one point of the matrix on one path: all repetitions, summarised.
//
// Zero-valued latency and transaction fields are omitted from JSON: they are
// only measured by *_RR tests. A measured value is never zero; a test that
// produced nothing is an error, not a Run.
type Run struct {
	// Path names the datapath, e.g. "fastpath-linux-bridge" or "baseline-untuned".
	Path string `json:"path"`
	// Test is TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR,
	// VSOCK_STREAM or VSOCK_RR.
	Test string `json:"test"`
	// SocketBytes is the requested send and receive socket buffer size
	// (netperf -s/-S); 0 means the kernel default with autotuning.
	SocketBytes int `json:"socketBytes"`
	// MessageBytes is the send size for stream tests (netperf -m) and the
	// request and response size for RR tests (netperf -r n,n).
	MessageBytes int `json:"messageBytes"`
	// Sessions is the number of concurrent sessions per client/server pair.
	Sessions int `json:"sessions"`
	// Pairs is the number of client/server pairs driving traffic at once
	// (the multi-VM paper's scale-out test); 1 for a plain run.
	Pairs int `json:"pairs"`
	// MTU of the client's interface on this path in bytes; 0 when unknown.
	MTU int `json:"mtu,omitempty"`
	// Interface is the client's interface on this path, e.g. "net1"; empty
	// when unknown.
	Interface string `json:"interface,omitempty"`
	// Offloads are what the client's interface on this path negotiated,
	// read on the client before the run as `ethtool -k` reads them: each
	// offload name of api/wellknown.Offloads ("tso", "gso", "gro",
	// "txChecksum", "rxChecksum") to "on" or "off". Empty when they were not
	// read (VM mode, vsock paths, or the read failed: the runner logs why).
	// The tuning sweep compares them with the offloads its candidate asked
	// for (docs/design.md §5.5).
	Offloads map[string]string `json:"offloads,omitempty"`

	// ThroughputMbps is the median over repetitions of the aggregate
	// throughput of all sessions of all pairs, in 10^6 bit/s.
	ThroughputMbps float64 `json:"throughputMbps"`
	// ThroughputMinMbps and ThroughputMaxMbps bound the repetitions.
	ThroughputMinMbps float64 `json:"throughputMinMbps"`
	ThroughputMaxMbps float64 `json:"throughputMaxMbps"`
	// PerPairThroughputMbps[i] is the median over repetitions of pair i+1's
	// throughput (sum over its sessions), in 10^6 bit/s; set when Pairs > 1.
	PerPairThroughputMbps []float64 `json:"perPairThroughputMbps,omitempty"`

	// TransactionsPerSec is the median aggregate transaction rate (RR only).
	TransactionsPerSec float64 `json:"transactionsPerSec,omitempty"`
	// MeanLatencyUs is the median over repetitions of the mean round-trip
	// latency in microseconds (RR only).
	MeanLatencyUs    float64 `json:"meanLatencyUs,omitempty"`
	MeanLatencyMinUs float64 `json:"meanLatencyMinUs,omitempty"`
	MeanLatencyMaxUs float64 `json:"meanLatencyMaxUs,omitempty"`
	// P99LatencyUs is the median over repetitions of the 99th percentile
	// round-trip latency in microseconds (RR only). See Sample.P99LatencyUs
	// for how sessions are combined.
	P99LatencyUs    float64 `json:"p99LatencyUs,omitempty"`
	P99LatencyMinUs float64 `json:"p99LatencyMinUs,omitempty"`
	P99LatencyMaxUs float64 `json:"p99LatencyMaxUs,omitempty"`

	// ServiceDemandUsPerKB is the median over repetitions of the CPU time
	// the run cost per KiB of payload moved, in microseconds (netperf's
	// service demand, usec/KB with KB = 1024 bytes; for RR tests the payload
	// of both directions); set for the tests MeasuresCPU names. Lower is
	// better. See Sample.ServiceDemandUsPerKB and CPUScope.
	ServiceDemandUsPerKB    float64 `json:"serviceDemandUsPerKB,omitempty"`
	ServiceDemandMinUsPerKB float64 `json:"serviceDemandMinUsPerKB,omitempty"`
	ServiceDemandMaxUsPerKB float64 `json:"serviceDemandMaxUsPerKB,omitempty"`
	// CPUUtilPercent is the median over repetitions of the CPU utilisation
	// netperf measured, in percent of all CPUs of the machine (0-100); with
	// CPUScope "host" that is the whole host's, not only the benchmark's.
	CPUUtilPercent float64 `json:"cpuUtilPercent,omitempty"`
	// CPUScope says what the CPU figures cover: CPUScopeHost or
	// CPUScopeEndpoints; empty when no CPU was measured.
	CPUScope string `json:"cpuScope,omitempty"`
	// ProcessServiceDemandUsPerKB is the median over repetitions of the CPU
	// time of the benchmark's own processes per KiB of payload, in
	// microseconds (Sample.ProcessServiceDemandUsPerKB); set by the local
	// benchmark, where those processes are this host's.
	ProcessServiceDemandUsPerKB    float64 `json:"processServiceDemandUsPerKB,omitempty"`
	ProcessServiceDemandMinUsPerKB float64 `json:"processServiceDemandMinUsPerKB,omitempty"`
	ProcessServiceDemandMaxUsPerKB float64 `json:"processServiceDemandMaxUsPerKB,omitempty"`
	// HostCPUSecondsPerGB is the median over repetitions of the host CPU
	// seconds per 10^9 bytes of payload (Sample.HostCPUSecondsPerGB), with
	// its minimum and maximum; set in VM mode when the node agent was asked.
	HostCPUSecondsPerGB    float64 `json:"hostCPUSecondsPerGB,omitempty"`
	HostCPUSecondsPerGBMin float64 `json:"hostCPUSecondsPerGBMin,omitempty"`
	HostCPUSecondsPerGBMax float64 `json:"hostCPUSecondsPerGBMax,omitempty"`
	// GbpsPerHostCore is the median over repetitions of 10^9 bits of
	// payload per host CPU second (Sample.GbpsPerHostCore), with its
	// minimum and maximum.
	GbpsPerHostCore    float64 `json:"gbpsPerHostCore,omitempty"`
	GbpsPerHostCoreMin float64 `json:"gbpsPerHostCoreMin,omitempty"`
	GbpsPerHostCoreMax float64 `json:"gbpsPerHostCoreMax,omitempty"`
	// LossPercent is the median over repetitions of the share of UDP
	// messages sent that did not arrive (UDP_STREAM only; 0 is omitted);
	// LossMaxPercent the largest.
	LossPercent    float64 `json:"lossPercent,omitempty"`
	LossMaxPercent float64 `json:"lossMaxPercent,omitempty"`

	// Samples holds one entry per repetition, in the order they ran.
	Samples []Sample `json:"samples"`
}

// Sample is one repetition of a Run: all sessions of all pairs, started at once.
type Sample struct {
	// Repetition counts from 1.
	Repetition int `json:"repetition"`
	// ThroughputMbps is the sum over all sessions, in 10^6 bit/s.
	ThroughputMbps float64 `json:"throughputMbps"`
	// PerPairThroughputMbps[i] is the sum over pair i+1's sessions.
	PerPairThroughputMbps []float64 `json:"perPairThroughputMbps,omitempty"`
	// TransactionsPerSec is the sum over all sessions (RR only).
	TransactionsPerSec float64 `json:"transactionsPerSec,omitempty"`
	// MeanLatencyUs is the mean of the sessions' mean latencies weighted by
	// their transaction rates, i.e. the mean over all transactions (RR only).
	MeanLatencyUs float64 `json:"meanLatencyUs,omitempty"`
	// P99LatencyUs is the largest P99 of any session (RR only): netperf
	// reports no histogram, so the true P99 of the combined transactions is
	// not known; the largest per-session P99 is an upper bound of it.
	P99LatencyUs float64 `json:"p99LatencyUs,omitempty"`
	// ServiceDemandUsPerKB is the CPU time per KiB of all sessions' payload,
	// in microseconds: sessions that share a machine share its CPU figure,
	// so their CPU time is counted once (CombineCPU).
	ServiceDemandUsPerKB float64 `json:"serviceDemandUsPerKB,omitempty"`
	// CPUUtilPercent is the sessions' mean (client or host-wide) CPU
	// utilisation in percent of all CPUs.
	CPUUtilPercent float64 `json:"cpuUtilPercent,omitempty"`
	// ProcessServiceDemandUsPerKB is the CPU time the repetition's own
	// processes used (the netperf clients, netserver's test processes and,
	// on fastpath-ovs, ovs-vswitchd; user plus system time, which includes
	// the softirq work run in their context) per KiB of payload, in
	// microseconds. Unlike ServiceDemandUsPerKB it leaves out the other
	// processes of a shared host, and the softirq work ksoftirqd does.
	ProcessServiceDemandUsPerKB float64 `json:"processServiceDemandUsPerKB,omitempty"`
	// HostCPU is what the node agent read before and after the
	// repetition (VM mode): the launchers' cgroup CPU time and the node's
	// /proc/stat cpu line, the raw readings HostCPUSecondsPerGB and
	// GbpsPerHostCore are derived from (HostCPUWindow.Figures).
	HostCPU *HostCPUWindow `json:"hostCPU,omitempty"`
	// HostCPUSecondsPerGB is the CPU time of the VMs' launcher pods and of
	// the node's softirq work per 10^9 bytes of payload, in seconds
	// (HostCPUFigures).
	HostCPUSecondsPerGB float64 `json:"hostCPUSecondsPerGB,omitempty"`
	// GbpsPerHostCore is 10^9 bits of payload per second of that CPU time:
	// the Gbit/s one host core carries at this cost.
	GbpsPerHostCore float64 `json:"gbpsPerHostCore,omitempty"`
	// LossPercent is 100 × (1 - messages received / messages sent) over all
	// sessions (UDP_STREAM only).
	LossPercent float64 `json:"lossPercent,omitempty"`
	// Source is the path this repetition was measured on when its run is
	// the best of several paths per repetition (BestOf: the local node
	// benchmark's ceiling, the better of "ceiling-veth" and
	// "ceiling-loopback"); empty when the run's own path measured it.
	Source string `json:"source,omitempty"`
	// PerSession holds what each session reported.
	PerSession []Session `json:"perSession"`
}

// Session is what one client process (one netperf) reported.
type Session struct {
	// Pair counts from 1; Session counts from 1 within its pair.
	Pair    int `json:"pair"`
	Session int `json:"session"`
	// Endpoint is the server's address, e.g. "10.250.0.3:12865".
	Endpoint string `json:"endpoint"`
	// ThroughputMbps in 10^6 bit/s; for RR tests the payload rate of both
	// directions, transactions/s × (request + response bytes) × 8.
	ThroughputMbps float64 `json:"throughputMbps"`
	// TransactionsPerSec, MeanLatencyUs and P99LatencyUs are set by RR tests.
	TransactionsPerSec float64 `json:"transactionsPerSec,omitempty"`
	MeanLatencyUs      float64 `json:"meanLatencyUs,omitempty"`
	P99LatencyUs       float64 `json:"p99LatencyUs,omitempty"`
	// ElapsedSec is the measured test duration in seconds.
	ElapsedSec float64 `json:"elapsedSec"`
	// LocalSocketBytes and RemoteSocketBytes are the socket buffer sizes at
	// the end of the test (netperf LSS_SIZE_END and RSR_SIZE_END): Linux
	// doubles a requested size, and autotuning grows an unset one.
	LocalSocketBytes  int `json:"localSocketBytes,omitempty"`
	RemoteSocketBytes int `json:"remoteSocketBytes,omitempty"`
	// MSSBytes is the TCP maximum segment size of the data connection.
	MSSBytes int `json:"mssBytes,omitempty"`

	// CPUUtilPercent is netperf's LOCAL_CPU_UTIL: the client machine's CPU
	// utilisation in percent of all its CPUs, or, with CPUScope "host", the
	// host's (measured once for client and server).
	CPUUtilPercent float64 `json:"cpuUtilPercent,omitempty"`
	// RemoteCPUUtilPercent is netperf's REMOTE_CPU_UTIL, the server's; set
	// only with CPUScope "endpoints".
	RemoteCPUUtilPercent float64 `json:"remoteCPUUtilPercent,omitempty"`
	// ServiceDemandUsPerKB is microseconds of CPU per KiB of payload:
	// LOCAL_SD with CPUScope "host", LOCAL_SD + REMOTE_SD with "endpoints".
	ServiceDemandUsPerKB float64 `json:"serviceDemandUsPerKB,omitempty"`
	// CPUScope is CPUScopeHost or CPUScopeEndpoints; empty when CPU was not
	// measured.
	CPUScope string `json:"cpuScope,omitempty"`
	// MessagesSent and MessagesReceived count UDP datagrams
	// (LOCAL_SEND_CALLS, REMOTE_RECV_CALLS; UDP_STREAM only).
	MessagesSent     int64 `json:"messagesSent,omitempty"`
	MessagesReceived int64 `json:"messagesReceived,omitempty"`
}

// Decode reads a Document from r and checks it with Validate. Unknown
// fields are ignored so that older readers accept documents with fields
// added since; a schemaVersion above SchemaVersion is an error (a field may
// have changed its meaning), and a document without one is read as
// version 1.
func Decode(r io.Reader) (Document, error) {
	var doc Document
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return Document{}, fmt.Errorf("failed to decode results document: %w", err)
	}
	if err := doc.Validate(); err != nil {
		return Document{}, err
	}
	return doc, nil
}

// Encode writes doc to w as indented JSON followed by a newline, with
// schemaVersion set to SchemaVersion whatever doc holds: this package
// writes only the schema it knows.
func Encode(w io.Writer, doc Document) error {
	doc.SchemaVersion = SchemaVersion
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("failed to encode results document: %w", err)
	}
	return nil
}

// Validate checks that every run names its path and test, has at least one
// sample, at least one session and pair, and a positive throughput: a
// document with a zero in it was produced by a broken runner.
//
// It also refuses a SchemaVersion above SchemaVersion or below 0.
func (d Document) Validate() error {
	if d.SchemaVersion > SchemaVersion || d.SchemaVersion < 0 {
		return fmt.Errorf("failed to validate results document: schemaVersion %d is not one this reader knows (0 or absent through %d): read it with a newer kubectl-fastpath or fastpath-operator", d.SchemaVersion, SchemaVersion)
	}
	for i, r := range d.Runs {
		switch {
		case r.Path == "" || r.Test == "":
			return fmt.Errorf("failed to validate run %d: path and test must be set", i)
		case r.Sessions < 1 || r.Pairs < 1:
			return fmt.Errorf("failed to validate run %d (%s %s): sessions and pairs must be at least 1, got %d and %d", i, r.Path, r.Test, r.Sessions, r.Pairs)
		case len(r.Samples) == 0:
			return fmt.Errorf("failed to validate run %d (%s %s): no samples", i, r.Path, r.Test)
		case !(r.ThroughputMbps > 0):
			return fmt.Errorf("failed to validate run %d (%s %s): throughputMbps must be positive, got %v", i, r.Path, r.Test, r.ThroughputMbps)
		case IsRR(r.Test) && !(r.MeanLatencyUs > 0):
			return fmt.Errorf("failed to validate run %d (%s %s): meanLatencyUs must be positive, got %v", i, r.Path, r.Test, r.MeanLatencyUs)
		}
	}
	return nil
}
