package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// Endpoint is one client/server pair of a path: where the client runs and
// the server it drives.
type Endpoint struct {
	// Executor runs the client; nil means netperf.Local{}.
	Executor netperf.Executor
	// Host is the server's address (netserver, or the vsock tool's target).
	Host string
	// Port is the server's control port; 0 means the tool's default.
	Port int
}

func (e Endpoint) executor() netperf.Executor {
	if e.Executor == nil {
		return netperf.Local{}
	}
	return e.Executor
}

// Path is one datapath under test, e.g. "fastpath-linux-bridge". A Runner
// may measure one name at several MTUs (each a Path of its own); results
// compare a path at its best MTU (results.Best).
type Path struct {
	// Name is reported as results.Run.Path.
	Name string
	// MTU of the client's interface on this path in bytes; 0 when unknown.
	MTU int
	// Interface and Offloads are the client's interface on this path and
	// the offloads it negotiated (results.Run.Interface, Offloads); empty
	// when unknown.
	Interface string
	Offloads  map[string]string
	// Endpoints[i] is pair i+1; a matrix with Pairs {1, 4} needs 4.
	Endpoints []Endpoint
	// VSock marks a vsock path: its endpoints are "cid" hosts with vsock
	// ports, and it is measured with the VSOCK_* tests only, while the other
	// paths are measured with the other tests only.
	VSock bool
	// ServerCPU, when set with Runner.ClientCPU, returns the cumulative CPU
	// time of the processes serving this path besides the clients (netserver
	// and its finished test processes, a userspace switch); the Runner
	// takes its difference over each repetition
	// (Sample.ProcessServiceDemandUsPerKB).
	ServerCPU func() (time.Duration, error)
	// Skip maps a test this path is not measured with to why, e.g. a test
	// the path's emulation cannot carry; the caller reports it.
	Skip map[string]string
}

// runs reports whether p is measured with test.
func (p Path) runs(test string) bool {
	_, skip := p.Skip[test]
	return p.VSock == IsVSock(test) && !skip
}

// Tool runs one session of one test point against one endpoint and returns
// what it measured. It must return an error, never a zero result, when the
// session measured nothing; the Runner fills in Pair and Session.
type Tool interface {
	RunSession(ctx context.Context, ep Endpoint, pt results.Point, duration time.Duration) (results.Session, error)
}

// Netperf is the Tool for the netperf tests (netperf.Tests: TCP_STREAM,
// TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR); every run measures CPU (-c -C).
type Netperf struct {
	// Binary is the netperf client; empty means netperf from PATH.
	Binary string
	// SameHost says every client shares a host with its server (network
	// namespaces, pods on one node): the CPU figure is host-wide and
	// reported once (netperf.Spec.SameHost).
	SameHost bool
	// CPUs pins every client and server test process (netperf.Spec.CPUs);
	// nil leaves them to the scheduler.
	CPUs *netperf.CPUPair
}

// RunSession implements Tool with one netperf run (netperf.Run).
func (n Netperf) RunSession(ctx context.Context, ep Endpoint, pt results.Point, duration time.Duration) (results.Session, error) {
	spec := netperf.Spec{Binary: n.Binary, Host: ep.Host, Port: ep.Port, Test: pt.Test, Duration: duration, SocketBytes: pt.SocketBytes, MessageBytes: pt.MessageBytes, SameHost: n.SameHost, CPUs: n.CPUs}
	res, err := netperf.Run(ctx, ep.executor(), spec)
	if err != nil {
		return results.Session{}, err
	}
	return res.Session(0, 0, spec.Endpoint()), nil
}

// Runner measures a Matrix on Paths.
type Runner struct {
	Matrix Matrix
	Paths  []Path
	// Tools maps test names to the tool that runs them; the netperf tests
	// default to Netperf{}.
	Tools map[string]Tool
	// ClientCPU, when set, returns the cumulative CPU time of the clients
	// that have finished (FinishedChildrenCPU when they are this process's
	// children); with Path.ServerCPU it gives each repetition's process
	// service demand.
	ClientCPU func() (time.Duration, error)
	// HostCPU, when set, reads the host's CPU counters for the VMs of
	// pairs 1..pairs (VM mode: the node agent, HostCPU.Read); the Runner
	// reads them just before each repetition's sessions start and just
	// after they end and records both (Sample.HostCPU). A read that fails
	// leaves that repetition without host figures and is logged.
	HostCPU func(ctx context.Context, pairs int) (results.HostCPUReading, error)
}

func (r *Runner) tool(test string) (Tool, error) {
	if t, ok := r.Tools[test]; ok {
		return t, nil
	}
	if slices.Contains(netperf.Tests, test) {
		return Netperf{}, nil
	}
	return nil, fmt.Errorf("failed to find a tool for test %q: known are %s and those in Runner.Tools", test, strings.Join(netperf.Tests, ", "))
}

// Validate checks the matrix, that every test has a tool, and that paths
// have unique names and enough endpoints for the largest pair count.
func (r *Runner) Validate() error {
	if err := r.Matrix.Validate(); err != nil {
		return err
	}
	for _, t := range r.Matrix.Tests {
		if _, err := r.tool(t); err != nil {
			return err
		}
	}
	if len(r.Paths) == 0 {
		return fmt.Errorf("failed to validate benchmark: no paths")
	}
	for _, t := range r.Matrix.Tests {
		if !slices.ContainsFunc(r.Paths, func(p Path) bool { return p.runs(t) }) {
			kind := "an IP (netperf)"
			if IsVSock(t) {
				kind = "a vsock"
			}
			return fmt.Errorf("failed to validate benchmark: test %s needs %s path, and there is none", t, kind)
		}
	}
	// A path may be measured at several MTUs (the local node benchmark runs
	// fastpath-linux-bridge at 9000 and 65520); each (name, MTU) once.
	type key struct {
		name string
		mtu  int
	}
	seen := map[key]bool{}
	for _, p := range r.Paths {
		k := key{p.Name, p.MTU}
		switch {
		case p.Name == "":
			return fmt.Errorf("failed to validate benchmark: a path has no name")
		case seen[k]:
			return fmt.Errorf("failed to validate benchmark: path %s (MTU %d) named twice", p.Name, p.MTU)
		case len(p.Endpoints) < r.Matrix.MaxPairs():
			return fmt.Errorf("failed to validate benchmark: path %s has %d endpoints, pairs up to %d need as many", p.Name, len(p.Endpoints), r.Matrix.MaxPairs())
		}
		for i, ep := range p.Endpoints {
			if ep.Host == "" {
				return fmt.Errorf("failed to validate benchmark: path %s endpoint %d has no host", p.Name, i+1)
			}
		}
		seen[k] = true
	}
	return nil
}

// Run measures every point on every path of its kind (vsock tests on vsock
// paths, the others on the others; Path.VSock), alternating paths within
// each repetition, the order reversed every other repetition (A B, B A),
// and returns one Run per (point, path) in the order of Paths.
// The first failed session stops the benchmark: its error names the path,
// point and repetition and wraps the tool's error (for netperf a
// *netperf.RunError). Progress is logged to the logr.Logger in ctx.
func (r *Runner) Run(ctx context.Context) ([]results.Run, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	log := logr.FromContextOrDiscard(ctx)
	var out []results.Run
	for _, pt := range r.Matrix.Points() {
		tool, _ := r.tool(pt.Test)
		var paths []Path
		for _, p := range r.Paths {
			if p.runs(pt.Test) {
				paths = append(paths, p)
			}
		}
		runs := make([]results.Run, len(paths))
		for i, p := range paths {
			runs[i] = results.Run{Path: p.Name, Test: pt.Test, SocketBytes: pt.SocketBytes, MessageBytes: pt.MessageBytes, Sessions: pt.Sessions, Pairs: pt.Pairs, MTU: p.MTU,
				Interface: p.Interface, Offloads: p.Offloads}
		}
		for rep := 1; rep <= r.Matrix.Repetitions; rep++ {
			for j := range paths {
				// Every other repetition runs the paths in reverse (A B, B A),
				// so no path always runs first or last after a change of
				// machine load; paired ratios see both orders.
				i := j
				if rep%2 == 0 {
					i = len(paths) - 1 - j
				}
				p := paths[i]
				s, err := r.measure(ctx, tool, p, pt, rep)
				if err != nil {
					return nil, err
				}
				runs[i].Samples = append(runs[i].Samples, s)
				kv := []any{"path", p.Name, "mtu", p.MTU, "point", pt.String(), "repetition", rep, "throughputMbps", round(s.ThroughputMbps)}
				if s.TransactionsPerSec > 0 {
					kv = append(kv, "transactionsPerSec", round(s.TransactionsPerSec), "meanLatencyUs", round(s.MeanLatencyUs))
				}
				if s.ServiceDemandUsPerKB > 0 {
					kv = append(kv, "serviceDemandUsPerKB", round(s.ServiceDemandUsPerKB), "cpuUtilPercent", round(s.CPUUtilPercent))
				}
				if s.LossPercent > 0 {
					kv = append(kv, "lossPercent", round(s.LossPercent))
				}
				if s.HostCPUSecondsPerGB > 0 {
					kv = append(kv, "hostCPUSecondsPerGB", round(s.HostCPUSecondsPerGB), "gbpsPerHostCore", round(s.GbpsPerHostCore))
				}
				log.Info("Measured", kv...)
			}
		}
		for i := range runs {
			runs[i].Summarize()
		}
		out = append(out, runs...)
	}
	return out, nil
}

// measure runs pt.Pairs × pt.Sessions sessions of pt on p at once.
func (r *Runner) measure(ctx context.Context, tool Tool, p Path, pt results.Point, rep int) (results.Sample, error) {
	n := pt.Pairs * pt.Sessions
	sessions := make([]results.Session, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for pair := 1; pair <= pt.Pairs; pair++ {
		for sess := 1; sess <= pt.Sessions; sess++ {
			i := (pair-1)*pt.Sessions + sess - 1
			ep := p.Endpoints[pair-1]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s, err := tool.RunSession(ctx, ep, pt, r.Matrix.Duration)
				s.Pair, s.Session = pair, sess
				sessions[i], errs[i] = s, err
			}()
		}
	}
	cpu0, cpuErr := r.processCPU(p)
	host0, hostErr := r.readHostCPU(ctx, pt.Pairs)
	// Release all sessions together so they overlap for the whole test.
	close(start)
	wg.Wait()
	var host1 results.HostCPUReading
	if hostErr == nil {
		host1, hostErr = r.readHostCPU(ctx, pt.Pairs)
	}
	failed, first := 0, error(nil)
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return results.Sample{}, fmt.Errorf("failed to measure path %s at %s, repetition %d (%d of %d sessions failed): %w", p.Name, pt, rep, failed, n, first)
	}
	s, err := results.NewSample(rep, pt.Pairs, sessions)
	if err != nil {
		return results.Sample{}, fmt.Errorf("failed to measure path %s at %s: %w", p.Name, pt, err)
	}
	if cpuErr == nil && cpu0 >= 0 && results.MeasuresCPU(pt.Test) {
		cpu1, err := r.processCPU(p)
		if err != nil {
			return results.Sample{}, fmt.Errorf("failed to measure the CPU time of path %s at %s: %w", p.Name, pt, err)
		}
		if kib := results.PayloadKiB(sessions); cpu1 > cpu0 && kib > 0 {
			s.ProcessServiceDemandUsPerKB = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / kib
		}
	} else if cpuErr != nil {
		return results.Sample{}, fmt.Errorf("failed to measure the CPU time of path %s at %s: %w", p.Name, pt, cpuErr)
	}
	if hostErr == nil {
		hostErr = s.SetHostCPU(results.HostCPUWindow{Before: host0, After: host1, PayloadBytes: results.PayloadKiB(sessions) * 1024})
	}
	if hostErr != nil && !errors.Is(hostErr, errNoHostCPU) {
		logr.FromContextOrDiscard(ctx).Info("Host CPU not measured", "path", p.Name, "point", pt.String(), "repetition", rep, "error", hostErr.Error())
	}
	return s, nil
}

// errNoHostCPU: the Runner has no HostCPU.
var errNoHostCPU = errors.New("no host CPU reader")

// readHostCPU calls r.HostCPU; errNoHostCPU when it is nil.
func (r *Runner) readHostCPU(ctx context.Context, pairs int) (results.HostCPUReading, error) {
	if r.HostCPU == nil {
		return results.HostCPUReading{}, errNoHostCPU
	}
	return r.HostCPU(ctx, pairs)
}

// processCPU sums Runner.ClientCPU and p.ServerCPU; -1 when either is unset.
func (r *Runner) processCPU(p Path) (time.Duration, error) {
	if r.ClientCPU == nil || p.ServerCPU == nil {
		return -1, nil
	}
	c, err := r.ClientCPU()
	if err != nil {
		return 0, err
	}
	s, err := p.ServerCPU()
	if err != nil {
		return 0, err
	}
	return c + s, nil
}

// round keeps three decimals for logs.
func round(v float64) float64 { return math.Round(v*1000) / 1000 }
