package bench_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/internal/node/hostcpu"
)

const (
	clientPod = "6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01"
	serverPod = "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"
)

func TestParseHostCPU(t *testing.T) {
	cases := []struct {
		agent, launchers string
		want             *bench.HostCPU
		wantErr          string
	}{
		{"", "", nil, ""},
		{"10.0.0.7:9446", clientPod + "/" + serverPod, &bench.HostCPU{Agent: netip.MustParseAddrPort("10.0.0.7:9446"), Launchers: [][2]string{{clientPod, serverPod}}}, ""},
		{"[fd00::7]:9446", clientPod + "/" + serverPod + "," + serverPod + "/" + clientPod, &bench.HostCPU{Agent: netip.MustParseAddrPort("[fd00::7]:9446"), Launchers: [][2]string{{clientPod, serverPod}, {serverPod, clientPod}}}, ""},
		{"node-1:9446", clientPod + "/" + serverPod, nil, "want <IP address>:<port>"},
		{"10.0.0.7:9446", clientPod, nil, "want <client pod uid>/<server pod uid>"},
		{"10.0.0.7:9446", clientPod + "/../../etc", nil, "each a lower-case UUID"},
		{"10.0.0.7:9446", "", nil, "go together"},
	}
	for _, c := range cases {
		g := gomega.NewWithT(t)
		got, err := bench.ParseHostCPU(c.agent, c.launchers)
		if c.wantErr != "" {
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(c.wantErr)), c.agent+" "+c.launchers)
			continue
		}
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(got).To(gomega.Equal(c.want))
	}
}

// fakeNode is a node's cgroup tree and /proc/stat whose counters the
// sessions advance, served by the agent's real handler.
type fakeNode struct {
	mu                     sync.Mutex
	dir                    string
	client, server, ticks  uint64
	clientCgroup, serverCg string
}

func newFakeNode(t *testing.T) *fakeNode {
	n := &fakeNode{dir: t.TempDir(), client: 5_000_000, server: 7_000_000, ticks: 1000}
	n.clientCgroup = filepath.Join(n.dir, "kubepods.slice", "kubepods-pod"+underscores(clientPod)+".slice")
	n.serverCg = filepath.Join(n.dir, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+underscores(serverPod)+".slice")
	for _, d := range []string{n.clientCgroup, n.serverCg} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(n.dir, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.write(t)
	return n
}

func underscores(uid string) string {
	b := []byte(uid)
	for i := range b {
		if b[i] == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}

func (n *fakeNode) write(t *testing.T) {
	for _, f := range []struct {
		path string
		body string
	}{
		{filepath.Join(n.clientCgroup, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 2\n", n.client)},
		{filepath.Join(n.serverCg, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 2\n", n.server)},
		{filepath.Join(n.dir, "stat"), fmt.Sprintf("cpu  100 0 200 5000 0 0 %d 0 0 0\ncpu0 50 0 100 2500 0 0 0 0 0 0\n", n.ticks)},
	} {
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// In VM mode each repetition records the agent's readings before and
// after its sessions, and its figures follow from them: a session that
// costs the client's launcher 0.4 s, the server's 0.3 s and the node 10
// ticks of softirq for 10^6 bytes is 800 s/GB, 0.01 Gbit/s per core.
func TestRunnerRecordsHostCPU(t *testing.T) {
	g := gomega.NewWithT(t)
	node := newFakeNode(t)
	srv := httptest.NewServer(hostcpu.Handler{Reader: hostcpu.Reader{Node: "node-1", CgroupRoot: node.dir, ProcStat: filepath.Join(node.dir, "stat")}, Log: logr.Discard()})
	defer srv.Close()
	h, err := bench.ParseHostCPU(srv.Listener.Addr().String(), clientPod+"/"+serverPod)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, _ results.Point, _ time.Duration) (results.Session, error) {
		node.mu.Lock()
		defer node.mu.Unlock()
		node.client += 400_000
		node.server += 300_000
		node.ticks += 10
		node.write(t)
		return results.Session{ThroughputMbps: 8, ElapsedSec: 1, Endpoint: ep.Host}, nil
	})
	m := smallMatrix()
	m.MessageSizes = []int{65536}
	r := &bench.Runner{Matrix: m, Paths: []bench.Path{path("fastpath", "a"), path("baseline", "b")}, Tools: map[string]bench.Tool{results.TCPStream: tool},
		HostCPU: func(ctx context.Context, pairs int) (results.HostCPUReading, error) {
			return h.Read(ctx, h.Pods(pairs))
		}}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(runs).To(gomega.HaveLen(2))
	for _, run := range runs {
		g.Expect(run.HostCPUSecondsPerGB).To(gomega.BeNumerically("~", 800, 1e-6), run.Path)
		g.Expect(run.GbpsPerHostCore).To(gomega.BeNumerically("~", 0.01, 1e-9), run.Path)
		for _, s := range run.Samples {
			g.Expect(s.HostCPU).NotTo(gomega.BeNil())
			g.Expect(s.HostCPU.PayloadBytes).To(gomega.BeNumerically("~", 1e6, 1e-6))
			g.Expect(s.HostCPU.After.Pods[0].UsageUsec-s.HostCPU.Before.Pods[0].UsageUsec).To(gomega.Equal(uint64(400_000)), "the client's launcher first")
			g.Expect(s.HostCPU.Before.Node).To(gomega.Equal("node-1"))
		}
	}
	again, err := results.RecomputeHostCPU(runs)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(again[0].HostCPUSecondsPerGB).To(gomega.Equal(runs[0].HostCPUSecondsPerGB))
}

// An agent that refuses (here: a launcher it does not know) leaves the
// figures out and the benchmark measured.
func TestRunnerWithoutHostCPU(t *testing.T) {
	g := gomega.NewWithT(t)
	node := newFakeNode(t)
	srv := httptest.NewServer(hostcpu.Handler{Reader: hostcpu.Reader{Node: "node-1", CgroupRoot: node.dir, ProcStat: filepath.Join(node.dir, "stat")}, Log: logr.Discard()})
	defer srv.Close()
	h, err := bench.ParseHostCPU(srv.Listener.Addr().String(), clientPod+"/99999999-8888-4777-8666-555555555555")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = h.Read(context.Background(), h.Pods(1))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("404 Not Found")))
	tool := toolFunc(func(_ context.Context, ep bench.Endpoint, _ results.Point, _ time.Duration) (results.Session, error) {
		return results.Session{ThroughputMbps: 8, ElapsedSec: 1, Endpoint: ep.Host}, nil
	})
	r := &bench.Runner{Matrix: smallMatrix(), Paths: []bench.Path{path("fastpath", "a")}, Tools: map[string]bench.Tool{results.TCPStream: tool},
		HostCPU: func(ctx context.Context, pairs int) (results.HostCPUReading, error) {
			return h.Read(ctx, h.Pods(pairs))
		}}
	runs, err := r.Run(context.Background())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(runs[0].HostCPUSecondsPerGB).To(gomega.BeZero())
	g.Expect(runs[0].Samples[0].HostCPU).To(gomega.BeNil())
}
