package bench_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
)

// Each repetition gets the CPU time the clients and the path's server
// processes used in it per KiB; a path skips the tests it cannot carry.
func TestRunnerMeasuresProcessCPUAndSkips(t *testing.T) {
	g := gomega.NewWithT(t)
	var mu sync.Mutex
	var client, server time.Duration
	// 8.192 Mbit/s for 1 s is 1000 KiB; every session costs the clients
	// 2 ms and the server 3 ms of CPU: 5 µs per KiB.
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, pt results.Point, _ time.Duration) (results.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		client += 2 * time.Millisecond
		server += 3 * time.Millisecond
		return results.Session{ThroughputMbps: 8.192, ElapsedSec: 1, Endpoint: ep.Host}, nil
	})
	a := path("A", "a")
	a.ServerCPU = func() (time.Duration, error) { mu.Lock(); defer mu.Unlock(); return server, nil }
	b := path("B", "b")
	b.Skip = map[string]string{results.UDPStream: "cannot"}
	m := smallMatrix()
	m.Tests, m.MessageSizes = []string{results.TCPStream, results.UDPStream}, []int{512}
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{a, b}, Tools: map[string]bench.Tool{results.TCPStream: tool, results.UDPStream: tool},
		ClientCPU: func() (time.Duration, error) { mu.Lock(); defer mu.Unlock(); return client, nil }}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var got []string
	for _, run := range runs {
		got = append(got, run.Path+" "+run.Test)
	}
	g.Expect(got).To(gomega.Equal([]string{"A TCP_STREAM", "B TCP_STREAM", "A UDP_STREAM"}))
	g.Expect(runs[0].ProcessServiceDemandUsPerKB).To(gomega.BeNumerically("~", 5, 1e-9))
	// B has no ServerCPU: not measured rather than half measured.
	g.Expect(runs[1].ProcessServiceDemandUsPerKB).To(gomega.BeZero())
}
