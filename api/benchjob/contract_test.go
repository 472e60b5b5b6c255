package benchjob_test

import (
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench"
)

func ptr[T any](v T) *T { return &v }

func podParams() benchjob.Params {
	spec := fastpathv1alpha1.DefaultBenchmarkSpec(fastpathv1alpha1.FastPathBenchmarkSpec{
		AttachmentRef: fastpathv1alpha1.LocalObjectReference{Name: "db-link"},
		Mode:          fastpathv1alpha1.BenchmarkModePod,
	})
	return benchjob.Params{Name: "quick", Namespace: "apps", Generation: 2, Spec: spec, Image: "fastpath/bench:dev", NetworkAttachment: "apps/db-link", MTU: 9000}
}

func vmParams() benchjob.Params {
	spec := fastpathv1alpha1.DefaultBenchmarkSpec(fastpathv1alpha1.FastPathBenchmarkSpec{
		AttachmentRef:   fastpathv1alpha1.LocalObjectReference{Name: "db-link"},
		Mode:            fastpathv1alpha1.BenchmarkModeVM,
		Client:          fastpathv1alpha1.BenchmarkEndpoint{VM: "db-1"},
		Server:          fastpathv1alpha1.BenchmarkEndpoint{VM: "db-0"},
		SSHKeySecretRef: &fastpathv1alpha1.LocalObjectReference{Name: "bench-ssh"},
		Tests:           []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream},
		SocketSizes:     []int32{262144},
		MessageSizes:    []int32{65536},
		Sessions:        []int32{1},
		Duration:        &metav1.Duration{Duration: 1500 * time.Millisecond},
		Repetitions:     ptr(int32(1)),
		Pairs:           ptr(int32(2)),
		Baseline:        fastpathv1alpha1.BaselinePodNetwork,
		SSHUser:         "cloud",
	})
	return benchjob.Params{Name: "vmb", Namespace: "apps", Generation: 1, Spec: spec, Image: "img", MTU: 65000}
}

// vsockParams is vmParams with one pair and the given tests.
func vsockParams(tests ...fastpathv1alpha1.BenchmarkTest) benchjob.Params {
	p := vmParams()
	p.Spec.Pairs = ptr(int32(1))
	p.Spec.Tests = tests
	return p
}

// vsockRun is the contract vsockParams renders for tests, then rest.
func vsockRun(tests string, rest ...string) []string {
	return append([]string{"run",
		"--tests", tests,
		"--socket-sizes", "262144",
		"--message-sizes", "65536",
		"--rr-sizes", "1",
		"--sessions", "1",
		"--pairs", "1",
		"--duration", "2s",
		"--repetitions", "1",
	}, rest...)
}

// vsockOnlyArgs is the contract vsockParams(VSOCK_STREAM) renders with one
// SSH client, one server and the fast-path vsock address cidPort.
func vsockOnlyArgs(cidPort string) []string {
	return vsockRun("VSOCK_STREAM",
		"--ssh-clients", "10.244.1.5",
		"--ssh-user", "cloud",
		"--ssh-key", "/etc/fastpath-bench/ssh/ssh-privatekey",
		"--vsock-path", "fastpath-vsock="+cidPort,
		"--ssh-servers", "10.244.1.7",
		"--vsock-server-port", "5432",
		"--results-configmap", "apps/vmb-results",
		"--run-id", "vmb-run-1",
	)
}

func TestRunnerArgsRendersTheContract(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    benchjob.Params
		ep   benchjob.Endpoints
		want []string
	}{
		{
			name: "Pod mode, default matrix",
			p:    podParams(),
			ep:   benchjob.Endpoints{FastPath: []string{"10.250.0.3"}, Baseline: []string{"10.244.0.7"}},
			want: []string{"run",
				"--tests", "TCP_STREAM,TCP_RR",
				"--socket-sizes", "65536,262144",
				"--message-sizes", "512,4096,16384,65536",
				"--rr-sizes", "1",
				"--sessions", "1,5",
				"--pairs", "1",
				"--duration", "1m0s",
				"--repetitions", "3",
				"--path", "fastpath=10.250.0.3",
				"--path", "baseline=10.244.0.7",
				"--mtu", "fastpath=9000",
				"--results-configmap", "apps/quick-results",
				"--run-id", "quick-run-2",
			},
		},
		{
			name: "VM mode, two pairs, fractional duration rounded up",
			p:    vmParams(),
			ep: benchjob.Endpoints{
				FastPath: []string{"10.250.0.3", "fd00::4"}, Baseline: []string{"10.244.1.7", "10.244.1.8"},
				SSHClients: []string{"10.244.1.5", "10.244.1.9"},
				HostCPU:    &benchjob.RunnerHostCPU{Agent: "10.0.0.7:9446", Launchers: [][2]string{{"c1", "s1"}, {"c2", "s2"}}},
			},
			want: []string{"run",
				"--tests", "TCP_STREAM",
				"--socket-sizes", "262144",
				"--message-sizes", "65536",
				"--rr-sizes", "1",
				"--sessions", "1",
				"--pairs", "1,2",
				"--duration", "2s",
				"--repetitions", "1",
				"--path", "fastpath=10.250.0.3,fd00::4",
				"--path", "baseline=10.244.1.7,10.244.1.8",
				"--mtu", "fastpath=65000",
				"--ssh-clients", "10.244.1.5,10.244.1.9",
				"--ssh-user", "cloud",
				"--ssh-key", "/etc/fastpath-bench/ssh/ssh-privatekey",
				"--host-cpu-agent", "10.0.0.7:9446",
				"--launcher-pods", "c1/s1,c2/s2",
				"--results-configmap", "apps/vmb-results",
				"--run-id", "vmb-run-1",
			},
		},
		{
			name: "VM mode, TCP and vsock tests",
			p:    vsockParams(fastpathv1alpha1.TestTCPStream, fastpathv1alpha1.TestVSOCKStream, fastpathv1alpha1.TestVSOCKRR),
			ep: benchjob.Endpoints{
				FastPath: []string{"10.250.0.3"}, Baseline: []string{"10.244.1.7"}, SSHClients: []string{"10.244.1.5"},
				VSock: &benchjob.RunnerVSock{CID: 2, Port: 20001, ServicePort: 5432, Servers: []string{"10.244.1.7"}},
			},
			want: vsockRun("TCP_STREAM,VSOCK_STREAM,VSOCK_RR",
				"--path", "fastpath=10.250.0.3",
				"--path", "baseline=10.244.1.7",
				"--mtu", "fastpath=65000",
				"--ssh-clients", "10.244.1.5",
				"--ssh-user", "cloud",
				"--ssh-key", "/etc/fastpath-bench/ssh/ssh-privatekey",
				"--vsock-path", "fastpath-vsock=2:20001",
				"--ssh-servers", "10.244.1.7",
				"--vsock-server-port", "5432",
				"--results-configmap", "apps/vmb-results",
				"--run-id", "vmb-run-1",
			),
		},
		{
			name: "VM mode, vsock tests only: no IP paths",
			p:    vsockParams(fastpathv1alpha1.TestVSOCKStream),
			ep: benchjob.Endpoints{
				SSHClients: []string{"10.244.1.5"},
				VSock:      &benchjob.RunnerVSock{CID: 2, Port: 20001, ServicePort: 5432, Servers: []string{"10.244.1.7"}},
			},
			want: vsockOnlyArgs("2:20001"),
		},
		{
			name: "VM mode, vsock mode Sibling: the client dials the server's CID",
			p:    vsockParams(fastpathv1alpha1.TestVSOCKStream),
			ep: benchjob.Endpoints{
				SSHClients: []string{"10.244.1.5"},
				VSock:      &benchjob.RunnerVSock{CID: 3, Port: 5432, ServicePort: 5432, Servers: []string{"10.244.1.7"}},
			},
			want: vsockOnlyArgs("3:5432"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			args, err := benchjob.RunnerArgsFor(tc.p, tc.ep).Args()
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(args).To(gomega.Equal(tc.want))
		})
	}
}

// The rendered values must parse with the runner's own parsers
// (bench), so the contract cannot drift from what the runner reads.
func TestRunnerArgsParseWithTheRunnersParsers(t *testing.T) {
	g := gomega.NewWithT(t)
	p := vmParams()
	p.Spec.SocketSizes = []int32{65536, 262144}
	p.Spec.MessageSizes = []int32{512, 4096}
	args, err := benchjob.RunnerArgsFor(p, benchjob.Endpoints{
		FastPath: []string{"10.250.0.3", "fd00::4"}, Baseline: []string{"10.244.1.7", "10.244.1.8"}, SSHClients: []string{"a", "b"},
	}).Args()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	flags := map[string][]string{}
	for i := 1; i+1 < len(args); i += 2 {
		g.Expect(args[i]).To(gomega.HavePrefix("--"))
		flags[args[i]] = append(flags[args[i]], args[i+1])
	}
	sizes, err := bench.ParseSizes(flags["--socket-sizes"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(sizes).To(gomega.Equal([]int{65536, 262144}))
	msgs, err := bench.ParseSizes(flags["--message-sizes"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(msgs).To(gomega.Equal([]int{512, 4096}))
	pairs, err := bench.ParseCounts(flags["--pairs"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(pairs).To(gomega.Equal([]int{1, 2}))
	d, err := time.ParseDuration(flags["--duration"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(d).To(gomega.Equal(2 * time.Second))
	g.Expect(flags["--path"]).To(gomega.HaveLen(2))
	fast, err := bench.ParsePath(flags["--path"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(fast.Name).To(gomega.Equal(benchjob.PathFastPath))
	g.Expect(fast.Endpoints).To(gomega.HaveLen(2))
	g.Expect(fast.Endpoints[1].Host).To(gomega.Equal("fd00::4"))
	base, err := bench.ParsePath(flags["--path"][1])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(base.Name).To(gomega.Equal(benchjob.PathBaseline))
	name, mtu, err := bench.ParseNameInt(flags["--mtu"][0])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(name).To(gomega.Equal(benchjob.PathFastPath))
	g.Expect(mtu).To(gomega.Equal(65000))
	ns, cm, ok := strings.Cut(flags["--results-configmap"][0], "/")
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(ns + "/" + cm).To(gomega.Equal("apps/" + benchjob.ResultsConfigMapName("vmb")))
}

func TestRunnerArgsRejectsMissingEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    benchjob.Params
		ep   benchjob.Endpoints
		want string
	}{
		{"one fast-path server for two pairs", vmParams(), benchjob.Endpoints{FastPath: []string{"a"}, Baseline: []string{"b", "c"}, SSHClients: []string{"d", "e"}}, "path fastpath has 1 servers, pairs up to 2"},
		{"no baseline server", podParams(), benchjob.Endpoints{FastPath: []string{"a"}}, "path baseline has 0 servers"},
		{"one SSH client for two pairs", vmParams(), benchjob.Endpoints{FastPath: []string{"a", "b"}, Baseline: []string{"b", "c"}, SSHClients: []string{"d"}}, "1 SSH clients, pairs up to 2"},
		{"vsock without an address", vsockParams(fastpathv1alpha1.TestVSOCKRR), benchjob.Endpoints{SSHClients: []string{"d"}, VSock: &benchjob.RunnerVSock{ServicePort: 5432, Servers: []string{"e"}}}, "needs a CID of 2 or more, a port and a service port, got 0, 0 and 5432"},
		{"vsock to a reserved CID", vsockParams(fastpathv1alpha1.TestVSOCKRR), benchjob.Endpoints{SSHClients: []string{"d"}, VSock: &benchjob.RunnerVSock{CID: 1, Port: 5432, ServicePort: 5432, Servers: []string{"e"}}}, "got 1, 5432 and 5432"},
		{"host CPU of one pair for two", vmParams(), benchjob.Endpoints{FastPath: []string{"a", "b"}, Baseline: []string{"b", "c"}, SSHClients: []string{"d", "e"}, HostCPU: &benchjob.RunnerHostCPU{Agent: "10.0.0.7:9446", Launchers: [][2]string{{"c1", "s1"}}}}, "host CPU needs VM mode and the launcher pods of every pair, got 1 for pairs up to 2"},
		{"vsock without endpoints", vsockParams(fastpathv1alpha1.TestVSOCKRR), benchjob.Endpoints{SSHClients: []string{"d"}}, "no paths"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, err := benchjob.RunnerArgsFor(tc.p, tc.ep).Args()
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}

func TestWholeSeconds(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{60 * time.Second, 60 * time.Second},
	} {
		gomega.NewWithT(t).Expect(benchjob.WholeSeconds(tc.in)).To(gomega.Equal(tc.want), tc.in.String())
	}
}

func TestMatrixSize(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*fastpathv1alpha1.FastPathBenchmarkSpec)
		points   int
		paths    int
		deadline time.Duration
	}{
		// TCP_STREAM 2 sockets × 4 messages × 2 sessions + TCP_RR 2 × 1 × 2 = 20.
		{"papers' default matrix", func(*fastpathv1alpha1.FastPathBenchmarkSpec) {}, 20, 2, 20*3*2*65*time.Second + 10*time.Minute},
		{"pairs 4 doubles the points (1 and 4 pairs)", func(s *fastpathv1alpha1.FastPathBenchmarkSpec) { s.Pairs = ptr(int32(4)) }, 40, 2, 40*3*2*65*time.Second + 10*time.Minute},
		{"no baseline halves the runs", func(s *fastpathv1alpha1.FastPathBenchmarkSpec) { s.Baseline = fastpathv1alpha1.BaselineNone }, 20, 1, 20*3*1*65*time.Second + 10*time.Minute},
		// VSOCK_STREAM 4 messages × 2 sessions (no socket sizes) + VSOCK_RR 1 × 2 = 10 points, on the vsock path alone.
		{"vsock tests only", func(s *fastpathv1alpha1.FastPathBenchmarkSpec) {
			s.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestVSOCKStream, fastpathv1alpha1.TestVSOCKRR}
		}, 10, 1, 10*3*1*65*time.Second + 10*time.Minute},
		// 20 TCP points on fastpath and baseline, 8 VSOCK_STREAM points on the vsock path.
		{"TCP and vsock tests", func(s *fastpathv1alpha1.FastPathBenchmarkSpec) {
			s.Tests = append(s.Tests, fastpathv1alpha1.TestVSOCKStream)
		}, 28, 3, (20*2+8)*3*65*time.Second + 10*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			spec := podParams().Spec
			tc.mutate(&spec)
			g.Expect(benchjob.PointCount(spec)).To(gomega.Equal(tc.points))
			g.Expect(benchjob.Paths(spec)).To(gomega.HaveLen(tc.paths))
			g.Expect(benchjob.Deadline(spec)).To(gomega.Equal(tc.deadline))
		})
	}
}
