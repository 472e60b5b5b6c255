package bench_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/vsockbench"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// startVSockServer serves vsockbench on CID 7, port 5000 of the UNIX-socket
// vsock EMULATION under a temporary root and returns the client transport of
// CID 3.
func startVSockServer(t *testing.T) vsock.Transport {
	t.Helper()
	root := t.TempDir()
	ln, err := vsock.NewUnixTransport(root, 7).Listen(5000)
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vsockbench.Serve(ctx, ln, testr.New(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vsock server failed: %v", err)
		}
	})
	return vsock.NewUnixTransport(root, 3)
}

func TestVSockToolInTheRunner(t *testing.T) {
	g := gomega.NewWithT(t)
	tr := startVSockServer(t)
	m := bench.Matrix{Tests: []string{results.VSockStream, results.VSockRR}, SocketSizes: []int{65536, 262144}, MessageSizes: []int{4096},
		RRSizes: []int{1}, Sessions: []int{2}, Pairs: []int{1}, Duration: time.Second, Repetitions: 1}
	// Socket sizes do not apply to vsock: one point per test, at size 0.
	g.Expect(m.Points()).To(gomega.Equal([]results.Point{
		{Test: results.VSockStream, SocketBytes: 0, MessageBytes: 4096, Sessions: 2, Pairs: 1},
		{Test: results.VSockRR, SocketBytes: 0, MessageBytes: 1, Sessions: 2, Pairs: 1},
	}))
	tool := bench.VSock{Transport: tr}
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{{Name: "vsock", VSock: true, Endpoints: []bench.Endpoint{{Host: "7", Port: 5000}}}},
		Tools: map[string]bench.Tool{results.VSockStream: tool, results.VSockRR: tool}}
	doc, err := bench.Document(context.Background(), r, "vsock emulated over UNIX sockets")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Validate()).To(gomega.Succeed())
	g.Expect(doc.Machine.Netperf).To(gomega.BeEmpty(), "no netperf test ran")
	g.Expect(doc.Runs).To(gomega.HaveLen(2))
	stream, rr := doc.Runs[0], doc.Runs[1]
	g.Expect(stream.Test).To(gomega.Equal(results.VSockStream))
	g.Expect(stream.Samples[0].PerSession).To(gomega.HaveLen(2))
	for _, s := range stream.Samples[0].PerSession {
		g.Expect(s.Endpoint).To(gomega.Equal("7:5000"))
		g.Expect(s.ThroughputMbps).To(gomega.BeNumerically(">", 0))
		g.Expect(s.ElapsedSec).To(gomega.BeNumerically(">=", 1))
	}
	g.Expect(rr.Test).To(gomega.Equal(results.VSockRR))
	g.Expect(rr.MeanLatencyUs).To(gomega.BeNumerically(">", 0))
	g.Expect(rr.P99LatencyUs).To(gomega.BeNumerically(">", 0))
	g.Expect(rr.TransactionsPerSec).To(gomega.BeNumerically(">", 0))
	g.Expect(rr.ThroughputMbps).To(gomega.BeNumerically("~", rr.TransactionsPerSec*16/1e6, 1e-6), "2 bytes per transaction")
}

func TestVSockToolRejectsBadEndpointsAndSizes(t *testing.T) {
	tr := startVSockServer(t)
	tool := bench.VSock{Transport: tr}
	for _, tc := range []struct {
		name string
		ep   bench.Endpoint
		pt   results.Point
		want string
	}{
		{"host is not a CID", bench.Endpoint{Host: "10.0.0.1", Port: 5000}, results.Point{Test: results.VSockStream, MessageBytes: 1}, "must be a context ID"},
		{"no port", bench.Endpoint{Host: "7"}, results.Point{Test: results.VSockStream, MessageBytes: 1}, "needs a vsock port"},
		{"RR size 2", bench.Endpoint{Host: "7", Port: 5000}, results.Point{Test: results.VSockRR, MessageBytes: 2}, "1-byte transactions only"},
		{"TCP test", bench.Endpoint{Host: "7", Port: 5000}, results.Point{Test: results.TCPStream, MessageBytes: 1}, "runs VSOCK_STREAM and VSOCK_RR only"},
		{"nobody listens", bench.Endpoint{Host: "8", Port: 5000}, results.Point{Test: results.VSockStream, MessageBytes: 1}, "failed to run VSOCK_STREAM against 8:5000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, err := tool.RunSession(context.Background(), tc.ep, tc.pt, time.Second)
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}

func TestRunnerMeasuresOnePathAtSeveralMTUs(t *testing.T) {
	g := gomega.NewWithT(t)
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, _ results.Point, _ time.Duration) (results.Session, error) {
		return results.Session{ThroughputMbps: map[string]float64{"a": 1, "b": 2}[ep.Host]}, nil
	})
	m := smallMatrix()
	m.MessageSizes, m.Repetitions = []int{512}, 1
	a, b := path("fast", "a"), path("fast", "b")
	a.MTU, b.MTU = 9000, 65520
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{a, b}, Tools: map[string]bench.Tool{results.TCPStream: tool}}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(runs).To(gomega.HaveLen(2))
	g.Expect([]int{runs[0].MTU, runs[1].MTU}).To(gomega.Equal([]int{9000, 65520}))
	g.Expect(results.Best(runs)["fast"][runs[0].Point()].MTU).To(gomega.Equal(65520))
}

// In one run, vsock tests go to vsock paths only and the others to the
// others; a test without a path of its kind is rejected up front.
func TestRunnerMeasuresEachTestOnItsKindOfPath(t *testing.T) {
	g := gomega.NewWithT(t)
	var mu sync.Mutex
	seen := map[string][]string{}
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, pt results.Point, _ time.Duration) (results.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		seen[pt.Test] = append(seen[pt.Test], ep.Host)
		return results.Session{ThroughputMbps: 100, TransactionsPerSec: 10, MeanLatencyUs: 50}, nil
	})
	m := bench.Matrix{Tests: []string{results.TCPStream, results.VSockStream, results.VSockRR}, SocketSizes: []int{0}, MessageSizes: []int{4096},
		RRSizes: []int{1}, Sessions: []int{1}, Pairs: []int{1}, Duration: time.Second, Repetitions: 2}
	tools := map[string]bench.Tool{results.TCPStream: tool, results.VSockStream: tool, results.VSockRR: tool}
	vs := bench.Path{Name: "fastpath-vsock", VSock: true, Endpoints: []bench.Endpoint{{Host: "2", Port: 20000}}}
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{path("fastpath", "10.250.0.3"), path("baseline", "10.244.0.7"), vs}, Tools: tools}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(seen).To(gomega.Equal(map[string][]string{
		results.TCPStream:   {"10.250.0.3", "10.244.0.7", "10.244.0.7", "10.250.0.3"},
		results.VSockStream: {"2", "2"},
		results.VSockRR:     {"2", "2"},
	}))
	var got []string
	for _, run := range runs {
		got = append(got, run.Test+"@"+run.Path)
	}
	g.Expect(got).To(gomega.Equal([]string{"TCP_STREAM@fastpath", "TCP_STREAM@baseline", "VSOCK_STREAM@fastpath-vsock", "VSOCK_RR@fastpath-vsock"}))

	r.Paths = r.Paths[:2]
	_, err = r.Run(context.Background())
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("test VSOCK_STREAM needs a vsock path, and there is none")))
	r.Paths = []bench.Path{vs}
	_, err = r.Run(context.Background())
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("test TCP_STREAM needs an IP (netperf) path, and there is none")))
}

// GuestVSock runs vsock-client through the endpoint's executor and reads
// its JSON; a failed client or output without a result is an error.
func TestGuestVSock(t *testing.T) {
	g := gomega.NewWithT(t)
	exe := &fakeExecutor{stdout: `{"test":"VSOCK_STREAM","messageBytes":65536,"session":{"pair":1,"session":1,"endpoint":"2:20000","throughputMbps":812.5,"elapsedSec":2}}`}
	tool := bench.GuestVSock{Binary: "/tmp/fastpath-bench"}
	ep := bench.Endpoint{Executor: exe, Host: "2", Port: 20000}
	pt := results.Point{Test: results.VSockStream, MessageBytes: 65536, Sessions: 1, Pairs: 1}
	s, err := tool.RunSession(context.Background(), ep, pt, 2*time.Second)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(s.ThroughputMbps).To(gomega.Equal(812.5))
	g.Expect(exe.argv).To(gomega.Equal([]string{"/tmp/fastpath-bench", "vsock-client", "--server", "2:20000", "--test", "VSOCK_STREAM", "--duration", "2s", "--message-size", "65536"}))

	exe.stdout = `{"test":"VSOCK_STREAM","messageBytes":65536,"session":{"pair":1,"session":1}}`
	_, err = tool.RunSession(context.Background(), ep, pt, 2*time.Second)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("with no result")))

	exe.stdout, exe.stderr, exe.err = "", "failed to dial CID 2 port 20000: connection reset", errors.New("exit status 1")
	_, err = tool.RunSession(context.Background(), ep, pt, 2*time.Second)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("via fake: exit status 1: failed to dial CID 2 port 20000")))

	_, err = tool.RunSession(context.Background(), ep, results.Point{Test: results.VSockRR, MessageBytes: 64, Sessions: 1, Pairs: 1}, time.Second)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("1-byte transactions only")))
}

type fakeExecutor struct {
	argv           []string
	stdout, stderr string
	err            error
}

func (f *fakeExecutor) Run(_ context.Context, argv []string) ([]byte, []byte, error) {
	f.argv = argv
	return []byte(f.stdout), []byte(f.stderr), f.err
}

func (f *fakeExecutor) String() string { return "fake" }
