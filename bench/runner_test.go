package bench_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
)

// toolFunc adapts a function to bench.Tool.
type toolFunc func(ctx context.Context, ep bench.Endpoint, pt results.Point, d time.Duration) (results.Session, error)

func (f toolFunc) RunSession(ctx context.Context, ep bench.Endpoint, pt results.Point, d time.Duration) (results.Session, error) {
	return f(ctx, ep, pt, d)
}

func path(name string, hosts ...string) bench.Path {
	p := bench.Path{Name: name}
	for _, h := range hosts {
		p.Endpoints = append(p.Endpoints, bench.Endpoint{Host: h})
	}
	return p
}

func smallMatrix() bench.Matrix {
	return bench.Matrix{Tests: []string{results.TCPStream}, SocketSizes: []int{0}, MessageSizes: []int{512, 4096}, Sessions: []int{1}, Pairs: []int{1}, Duration: time.Second, Repetitions: 3}
}

func TestRunnerAlternatesPathsAndTakesMedians(t *testing.T) {
	g := gomega.NewWithT(t)
	var (
		mu    sync.Mutex
		order []string
		calls = map[string]int{}
	)
	// Each host reports 10, 30, 20 Mbps on its 1st, 2nd and 3rd call at a point;
	// host b reports twice as much.
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, pt results.Point, _ time.Duration) (results.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, fmt.Sprintf("%s/%d", ep.Host, pt.MessageBytes))
		k := fmt.Sprintf("%s/%d", ep.Host, pt.MessageBytes)
		v := []float64{10, 30, 20}[calls[k]]
		calls[k]++
		if ep.Host == "b" {
			v *= 2
		}
		return results.Session{ThroughputMbps: v, Endpoint: ep.Host}, nil
	})
	r := &bench.Runner{Matrix: smallMatrix(), Paths: []bench.Path{path("A", "a"), path("B", "b")}, Tools: map[string]bench.Tool{results.TCPStream: tool}}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(order).To(gomega.Equal([]string{"a/512", "b/512", "b/512", "a/512", "a/512", "b/512", "a/4096", "b/4096", "b/4096", "a/4096", "a/4096", "b/4096"}))
	g.Expect(runs).To(gomega.HaveLen(4))
	g.Expect(runs[0].Path).To(gomega.Equal("A"))
	g.Expect(runs[1].Path).To(gomega.Equal("B"))
	g.Expect(runs[2].MessageBytes).To(gomega.Equal(4096))
	g.Expect(runs[0].ThroughputMbps).To(gomega.Equal(20.0))
	g.Expect(runs[0].ThroughputMinMbps).To(gomega.Equal(10.0))
	g.Expect(runs[0].ThroughputMaxMbps).To(gomega.Equal(30.0))
	g.Expect(runs[1].ThroughputMbps).To(gomega.Equal(40.0))
	g.Expect(runs[0].Samples).To(gomega.HaveLen(3))
	g.Expect(runs[0].Samples[1].Repetition).To(gomega.Equal(2))
	g.Expect(runs[0].Samples[1].PerSession[0].Pair).To(gomega.Equal(1))
	g.Expect(results.Document{Runs: runs}.Validate()).To(gomega.Succeed())
}

func TestRunnerStartsAllSessionsOfAllPairsTogether(t *testing.T) {
	g := gomega.NewWithT(t)
	const pairs, sessions = 2, 3
	// A barrier: every session waits until all have started, which only
	// happens if the runner runs them at the same time.
	var started atomic.Int32
	allStarted := make(chan struct{})
	tool := toolFunc(func(ctx context.Context, ep bench.Endpoint, _ results.Point, _ time.Duration) (results.Session, error) {
		if started.Add(1) == pairs*sessions {
			close(allStarted)
		}
		select {
		case <-allStarted:
		case <-ctx.Done():
			return results.Session{}, ctx.Err()
		case <-time.After(30 * time.Second): // a hang guard: a runner that runs sessions one by one never fills the barrier
			return results.Session{}, fmt.Errorf("sessions did not run at the same time: %d of %d started", started.Load(), pairs*sessions)
		}
		v := map[string]float64{"h1": 1, "h2": 2}[ep.Host]
		return results.Session{ThroughputMbps: v, TransactionsPerSec: 100 * v, MeanLatencyUs: 10 * v}, nil
	})
	m := smallMatrix()
	m.Tests, m.RRSizes, m.Sessions, m.Pairs, m.Repetitions = []string{results.TCPRR}, []int{1}, []int{sessions}, []int{pairs}, 1
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{path("fast", "h1", "h2")}, Tools: map[string]bench.Tool{results.TCPRR: tool}}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(runs).To(gomega.HaveLen(1))
	run := runs[0]
	g.Expect(run.Pairs).To(gomega.Equal(2))
	g.Expect(run.ThroughputMbps).To(gomega.Equal(9.0))
	g.Expect(run.PerPairThroughputMbps).To(gomega.Equal([]float64{3, 6}))
	g.Expect(run.TransactionsPerSec).To(gomega.Equal(900.0))
	// (10*100*3 + 20*200*3) / 900
	g.Expect(run.MeanLatencyUs).To(gomega.BeNumerically("~", 50.0/3, 1e-9))
	var ids []string
	for _, s := range run.Samples[0].PerSession {
		ids = append(ids, fmt.Sprintf("%d.%d", s.Pair, s.Session))
	}
	g.Expect(ids).To(gomega.Equal([]string{"1.1", "1.2", "1.3", "2.1", "2.2", "2.3"}))
}

func TestRunnerStopsAtTheFirstFailure(t *testing.T) {
	g := gomega.NewWithT(t)
	var calls atomic.Int32
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, _ results.Point, _ time.Duration) (results.Session, error) {
		calls.Add(1)
		if ep.Host == "b" {
			return results.Session{}, netperf.ErrNetserverUnreachable
		}
		return results.Session{ThroughputMbps: 1}, nil
	})
	r := &bench.Runner{Matrix: smallMatrix(), Paths: []bench.Path{path("A", "a"), path("B", "b")}, Tools: map[string]bench.Tool{results.TCPStream: tool}}
	runs, err := r.Run(context.Background())
	g.Expect(runs).To(gomega.BeNil())
	g.Expect(err).To(gomega.MatchError(netperf.ErrNetserverUnreachable))
	g.Expect(err.Error()).To(gomega.ContainSubstring("failed to measure path B at TCP_STREAM sock=default msg=512B sessions=1 pairs=1, repetition 1 (1 of 1 sessions failed)"))
	g.Expect(calls.Load()).To(gomega.Equal(int32(2)))
}

func TestRunnerValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(*bench.Runner)
		message string
	}{
		"no paths":          {func(r *bench.Runner) { r.Paths = nil }, "no paths"},
		"duplicate path":    {func(r *bench.Runner) { r.Paths = append(r.Paths, r.Paths[0]) }, "named twice"},
		"too few endpoints": {func(r *bench.Runner) { r.Matrix.Pairs = []int{1, 2} }, "has 1 endpoints, pairs up to 2"},
		"no host":           {func(r *bench.Runner) { r.Paths[0].Endpoints[0].Host = "" }, "has no host"},
		"vsock without tool": {func(r *bench.Runner) { r.Matrix.Tests = []string{results.VSockStream} },
			`failed to find a tool for test "VSOCK_STREAM"`},
		"RR without sizes": {func(r *bench.Runner) { r.Matrix.Tests = []string{results.TCPRR}; r.Matrix.RRSizes = nil }, "no RR sizes"},
		"zero sessions":    {func(r *bench.Runner) { r.Matrix.Sessions = []int{0} }, "session counts 0 must be at least 1"},
		"half seconds":     {func(r *bench.Runner) { r.Matrix.Duration = 1500 * time.Millisecond }, "whole seconds"},
		"no repetitions":   {func(r *bench.Runner) { r.Matrix.Repetitions = 0 }, "repetitions 0"},
	} {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			r := &bench.Runner{Matrix: smallMatrix(), Paths: []bench.Path{path("A", "a")}}
			g.Expect(r.Validate()).To(gomega.Succeed())
			tc.mutate(r)
			g.Expect(r.Validate()).To(gomega.MatchError(gomega.ContainSubstring(tc.message)))
		})
	}
}

func TestDefaultMatrixIsThePapers(t *testing.T) {
	g := gomega.NewWithT(t)
	m := bench.DefaultMatrix()
	g.Expect(m.Validate()).To(gomega.Succeed())
	// 2 sockets × 4 messages × 2 session counts of TCP_STREAM, 2 × 1 × 2 of TCP_RR.
	g.Expect(m.Points()).To(gomega.HaveLen(16 + 4))
	g.Expect(m.Points()[0]).To(gomega.Equal(results.Point{Test: results.TCPStream, SocketBytes: 65536, MessageBytes: 512, Sessions: 1, Pairs: 1}))
	g.Expect(m.Estimate(2)).To(gomega.Equal(20 * 3 * 2 * time.Minute))
}

// startNetserver starts a netserver on a free loopback port for the test.
func startNetserver(t *testing.T) bench.Endpoint {
	t.Helper()
	n, err := netperf.StartNetserver(context.Background(), netperf.NetserverOptions{Addr: "127.0.0.1"})
	if err != nil {
		t.Fatalf("failed to start netserver: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("failed to stop netserver: %v", err)
		}
	})
	return bench.Endpoint{Host: n.Addr, Port: n.Port}
}

// A short real benchmark over loopback: checks the structure of the
// document, not the speed.
func TestDocumentOverLoopback(t *testing.T) {
	g := gomega.NewWithT(t)
	a, b := startNetserver(t), startNetserver(t)
	r := &bench.Runner{
		Matrix: bench.Matrix{Tests: []string{results.TCPStream, results.TCPRR}, SocketSizes: []int{65536}, MessageSizes: []int{4096}, RRSizes: []int{1},
			Sessions: []int{2}, Pairs: []int{1}, Duration: time.Second, Repetitions: 2},
		Paths: []bench.Path{{Name: "baseline-lo", MTU: 65536, Endpoints: []bench.Endpoint{a}},
			{Name: "fastpath-lo", Interface: "lo", Offloads: map[string]string{"tso": "on", "gro": "off"}, Endpoints: []bench.Endpoint{b}}},
	}
	doc, err := bench.Document(context.Background(), r, "both paths are the loopback interface")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Validate()).To(gomega.Succeed())
	g.Expect(doc.Machine.Netperf).To(gomega.HavePrefix("Netperf version"))
	g.Expect(doc.Machine.Kernel).NotTo(gomega.BeEmpty())
	g.Expect(doc.Machine.CPUs).To(gomega.BeNumerically(">", 0))
	g.Expect(doc.Machine.Emulated).To(gomega.Equal("both paths are the loopback interface"))
	g.Expect(doc.Runs).To(gomega.HaveLen(4))
	for i, run := range doc.Runs {
		g.Expect(run.Path).To(gomega.Equal([]string{"baseline-lo", "fastpath-lo"}[i%2]))
		g.Expect(run.Test).To(gomega.Equal([]string{results.TCPStream, results.TCPRR}[i/2]))
		g.Expect(run.Samples).To(gomega.HaveLen(2))
		g.Expect(run.ThroughputMinMbps).To(gomega.BeNumerically("<=", run.ThroughputMbps))
		g.Expect(run.ThroughputMaxMbps).To(gomega.BeNumerically(">=", run.ThroughputMbps))
		for _, s := range run.Samples {
			g.Expect(s.PerSession).To(gomega.HaveLen(2))
			sum := 0.0
			for _, ss := range s.PerSession {
				g.Expect(ss.ThroughputMbps).To(gomega.BeNumerically(">", 0))
				g.Expect(ss.Endpoint).To(gomega.Equal(net.JoinHostPort("127.0.0.1", fmt.Sprint([]int{a.Port, b.Port}[i%2]))))
				g.Expect(ss.LocalSocketBytes).To(gomega.Equal(2 * 65536))
				sum += ss.ThroughputMbps
			}
			g.Expect(s.ThroughputMbps).To(gomega.BeNumerically("~", sum, 1e-9))
		}
		if run.Test == results.TCPRR {
			g.Expect(run.MessageBytes).To(gomega.Equal(1))
			g.Expect(run.MeanLatencyUs).To(gomega.BeNumerically(">", 0))
			g.Expect(run.P99LatencyUs).To(gomega.BeNumerically(">", 0))
			g.Expect(run.TransactionsPerSec).To(gomega.BeNumerically(">", 0))
		} else {
			g.Expect(run.MeanLatencyUs).To(gomega.BeZero())
		}
	}
	g.Expect(doc.Runs[0].MTU).To(gomega.Equal(65536))
	g.Expect(doc.Runs[0].Offloads).To(gomega.BeNil())
	g.Expect(doc.Runs[1].Interface).To(gomega.Equal("lo"))
	g.Expect(doc.Runs[1].Offloads).To(gomega.Equal(map[string]string{"tso": "on", "gro": "off"}), "each run carries its path's negotiated offloads")
}

func TestDocumentFailsWhenNetserverIsGone(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	m := smallMatrix()
	m.Repetitions, m.MessageSizes = 1, []int{512}
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{{Name: "gone", Endpoints: []bench.Endpoint{{Host: "127.0.0.1", Port: port}}}}}
	doc, err := bench.Document(context.Background(), r, "")
	g.Expect(err).To(gomega.MatchError(netperf.ErrNetserverUnreachable))
	g.Expect(doc.Runs).To(gomega.BeEmpty())
	g.Expect(err.Error()).To(gomega.ContainSubstring(fmt.Sprintf("failed to run netperf against 127.0.0.1:%d via local", port)))
}

func TestLocalInterfaceAndOffloads(t *testing.T) {
	g := gomega.NewWithT(t)
	lo, err := net.InterfaceByName("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ifc, err := bench.LocalInterface("127.0.0.1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(ifc.Name).To(gomega.Equal("lo"))
	g.Expect(ifc.MTU).To(gomega.Equal(lo.MTU))

	// Every offload of the table is reported, as the kernel has it.
	got, err := bench.LocalOffloads("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	on, err := offload.Read("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.HaveLen(len(wellknown.Offloads)))
	for _, name := range wellknown.OffloadNames() {
		want := "off"
		if on[name] {
			want = "on"
		}
		g.Expect(got).To(gomega.HaveKeyWithValue(name, want))
	}
	_, err = bench.LocalOffloads("fpnosuchif0")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to read the offloads of fpnosuchif0")))
}
