package localbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// Path names of docs/design.md §5.2. results.IsReference treats the baselines and
// the ceiling as the references the fast paths are compared with.
const (
	PathBaselineUntuned     = "baseline-untuned"
	PathBaselineMasquerade  = "baseline-masquerade"
	PathFastPathLinuxBridge = "fastpath-linux-bridge"
	PathFastPathOVS         = "fastpath-ovs"
	PathFastPathMacvtap     = "fastpath-macvtap"
	PathCeiling             = "ceiling"
	// PathCeilingVeth and PathCeilingLoopback are the ceiling's candidates,
	// built and measured in its place: one veth pair between two
	// namespaces (buildCeilingVeth) and TCP over lo inside one namespace
	// (buildLoopback). Per repetition the ceiling is the better of the two
	// (CeilingOf).
	PathCeilingVeth     = "ceiling-veth"
	PathCeilingLoopback = "ceiling-loopback"
)

// CeilingCandidates are the paths the ceiling is the best of.
var CeilingCandidates = []string{PathCeilingVeth, PathCeilingLoopback}

// CeilingOf returns the ceiling's runs: for each point and MTU both
// candidates were measured at, per repetition the better of the two
// (results.BestOf, Sample.Source naming the candidate). The candidates'
// own runs stay in the results, so the report shows both and which won.
func CeilingOf(runs []results.Run) []results.Run {
	return results.BestOf(PathCeiling, runs, CeilingCandidates...)
}

// AllPaths are the paths Build makes by default, in measuring order.
var AllPaths = []string{PathBaselineUntuned, PathBaselineMasquerade, PathFastPathLinuxBridge, PathFastPathOVS, PathFastPathMacvtap, PathCeiling}

// FastPaths are the fast paths of AllPaths: the candidates of the
// "<best fast path>/ceiling" target.
var FastPaths = []string{PathFastPathLinuxBridge, PathFastPathOVS, PathFastPathMacvtap}

// MTUs of the paths in bytes.
const (
	// BaselineMTU is the common cluster MTU without an overlay; both
	// baselines use it (docs/design.md §5.2).
	BaselineMTU = 1500
	// CeilingMTU is the largest MTU a veth takes (ETH_MAX_MTU, Linux
	// include/uapi/linux/if_ether.h), the bound of the fast-path MTUs. The
	// ceiling path itself is built at each fast-path MTU, so that it bounds
	// the fast paths at the MTU they have.
	CeilingMTU = 65535
)

// DefaultFastPathMTUs are the MTUs each fast path is measured at: jumbo
// frames and the "super-jumbo" 65520 of docs/design.md §5.2 (same-node frames never
// touch a wire; 65520 is also the largest MTU of a Linux tap device, which
// OVS's userspace datapath uses for its bridge port).
var DefaultFastPathMTUs = []int{9000, 65520}

// IsFastPath reports whether path is one of FastPaths (measured at each
// fast-path MTU).
func IsFastPath(path string) bool { return slices.Contains(FastPaths, path) }

// UsesPlugin reports whether path is wired by EXECUTING the fastpath CNI
// binary (fastpath-macvtap is wired by the benchmark itself: the CNI plugin
// has no Macvtap datapath yet).
func UsesPlugin(path string) bool {
	return path == PathFastPathLinuxBridge || path == PathFastPathOVS
}

// AtFastPathMTUs reports whether path is built once per fast-path MTU: the
// fast paths and the ceiling that bounds them.
func AtFastPathMTUs(path string) bool { return IsFastPath(path) || path == PathCeiling }

// ValidatePaths checks that every name is one of AllPaths, once.
func ValidatePaths(paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("failed to validate paths: none given (known: %s)", strings.Join(AllPaths, ", "))
	}
	for i, p := range paths {
		if !slices.Contains(AllPaths, p) {
			return fmt.Errorf("failed to validate paths: unknown path %q (known: %s)", p, strings.Join(AllPaths, ", "))
		}
		if slices.Contains(paths[:i], p) {
			return fmt.Errorf("failed to validate paths: %s given twice", p)
		}
	}
	return nil
}

// MinRepetitions is the fewest repetitions the targets are judged on: each
// target ratio is the median of paired per-repetition ratios (issue 13).
const MinRepetitions = 5

// QuickTests are the tests of QuickMatrix: both directions of the bulk
// stream (TCP_STREAM, TCP_MAERTS), UDP_STREAM, latency (TCP_RR) and
// connection rate (TCP_CRR); every one measures CPU.
var QuickTests = []string{results.TCPStream, results.TCPMaerts, results.UDPStream, results.TCPRR, results.TCPCRR}

// QuickMatrix is the default matrix of the local benchmark: the point the
// targets of issue 6 are stated at (single session TCP_STREAM with 256 KiB
// socket buffers and 64 KiB messages, the VMCI paper's best case), the same
// point received (TCP_MAERTS), UDP_STREAM with 1472-byte datagrams (they
// fit the baselines' 1500-byte MTU), and TCP_RR and TCP_CRR with 1-byte
// messages for latency and connection rate, MinRepetitions repetitions of d each.
func QuickMatrix(d time.Duration) bench.Matrix {
	return bench.Matrix{
		Tests:        append([]string(nil), QuickTests...),
		SocketSizes:  []int{256 << 10},
		MessageSizes: []int{64 << 10},
		RRSizes:      []int{1},
		Sessions:     []int{1},
		Pairs:        []int{1},
		Duration:     d,
		Repetitions:  MinRepetitions,
	}
}

// DefaultCPUs pins netperf and netserver's test process both to CPU 0 on
// every path (netperf -T 0,0), so that no path gets a placement the others
// do not. One CPU for both ends, not one each: on the 2-CPU development
// machine (2026-11-29, MTU 65520, docs/benchmarks.md §13) a veth pair
// carried 6-10 Gbit/s with the ends on CPUs 0 and 1, where the sender's
// CPU ran all of the receive softirq work (veth hands each packet to the
// backlog of the CPU that sent it) while the receiver woke on the other,
// 29-30 unpinned and 34-42 with both on CPU 0; on one CPU the paths differ
// only by the work they do per byte, so no path can gain from a placement
// the ceiling does not get.
const DefaultCPUs = "0,0"

// Tools are the tools a local benchmark runs its tests with: netperf for
// every netperf test, told that client and server share this host, so its
// host-wide CPU figure is reported once (bench.Netperf.SameHost), with the
// client and the server's test process pinned to cpus on every path alike
// (nil: unpinned).
func Tools(cpus *netperf.CPUPair) map[string]bench.Tool {
	np := bench.Netperf{SameHost: true, CPUs: cpus}
	tools := map[string]bench.Tool{}
	for _, t := range netperf.Tests {
		tools[t] = np
	}
	return tools
}

// FullMatrix is the papers' matrix (bench.DefaultMatrix) with runs of d,
// plus TCP_MAERTS over the same points (the papers put transmit and receive
// side by side), UDP_STREAM and TCP_CRR.
func FullMatrix(d time.Duration) bench.Matrix {
	m := bench.DefaultMatrix()
	m.Tests = append([]string(nil), QuickTests...)
	m.Duration = d
	return m
}
