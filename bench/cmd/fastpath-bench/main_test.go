package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func startNetserver(t *testing.T) *netperf.Netserver {
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
	return n
}

func TestUsage(t *testing.T) {
	g := gomega.NewWithT(t)
	code, _, stderr := run()
	g.Expect(code).To(gomega.Equal(2))
	g.Expect(stderr).To(gomega.ContainSubstring("  report "))
	g.Expect(stderr).To(gomega.ContainSubstring("  run "))
	code, _, stderr = run("frobnicate")
	g.Expect(code).To(gomega.Equal(2))
	g.Expect(stderr).To(gomega.ContainSubstring(`unknown subcommand "frobnicate"`))
	code, _, _ = run("run", "-h")
	g.Expect(code).To(gomega.Equal(0))
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		message string
	}{
		{[]string{"run"}, "no paths"},
		{[]string{"run", "--path", "nohost"}, `failed to parse path "nohost"`},
		{[]string{"run", "--path", "a=10.0.0.1", "--socket-sizes", "big"}, `failed to parse size "big"`},
		{[]string{"run", "--path", "a=10.0.0.1", "--pairs", "2"}, "has 1 endpoints, pairs up to 2"},
		{[]string{"run", "--path", "a=10.0.0.1", "--duration", "500ms"}, "whole seconds"},
		{[]string{"run", "--path", "a=10.0.0.1", "--mtu", "a"}, `failed to parse "a"`},
		{[]string{"run", "--path", "a=10.0.0.1", "stray"}, "unexpected arguments"},
		{[]string{"report"}, "want one results file"},
		// Command lines outside the runner contract (benchjob.ParseRunnerArgs
		// rejects them) are usage errors too.
		{[]string{"run", "--path", "a=10.0.0.1", "--results-configmap", "apps"}, `failed to parse --results-configmap "apps": want namespace/name`},
		{[]string{"run", "--path", "a=10.0.0.1", "--ssh-user", "u"}, "need --ssh-clients"},
		{[]string{"run", "--path", "a=10.0.0.1", "--cid", "3"}, "--cid applies to --transport unix:<dir> only"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := gomega.NewWithT(t)
			code, stdout, stderr := run(tc.args...)
			g.Expect(code).To(gomega.Equal(2))
			g.Expect(stdout).To(gomega.BeEmpty())
			g.Expect(stderr).To(gomega.ContainSubstring(tc.message))
		})
	}
}

// A short real run over loopback, then a report from its output: checks
// structure, not speed.
func TestRunThenReport(t *testing.T) {
	g := gomega.NewWithT(t)
	t.Setenv(results.EmulatedEnv, "") // as outside the emulation, whatever ran the test
	a, b := startNetserver(t), startNetserver(t)
	code, stdout, stderr := run("run", "--tests", "TCP_STREAM,TCP_RR", "--socket-sizes", "64K", "--message-sizes", "4K", "--rr-sizes", "1",
		"--sessions", "1", "--duration", "1s", "--repetitions", "1", "--emulated", "both paths are loopback",
		"--path", "baseline-lo="+a.Endpoint(), "--path", "fastpath-lo="+b.Endpoint(), "--mtu", "fastpath-lo=9000")
	g.Expect(code).To(gomega.Equal(0), stderr)
	g.Expect(stderr).To(gomega.ContainSubstring(`"msg"="Measured" "path"="fastpath-lo"`))
	doc, err := results.Decode(strings.NewReader(stdout))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Machine.Emulated).To(gomega.Equal("both paths are loopback"))
	g.Expect(doc.Machine.Netperf).To(gomega.HavePrefix("Netperf version"))
	g.Expect(doc.Runs).To(gomega.HaveLen(4))
	lo, err := net.InterfaceByName("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Runs[0].MTU).To(gomega.Equal(lo.MTU), "detected from the route to 127.0.0.1")
	g.Expect(doc.Runs[1].MTU).To(gomega.Equal(9000), "given with --mtu")
	g.Expect(doc.Runs[3].Test).To(gomega.Equal(results.TCPRR))
	g.Expect(doc.Runs[3].MeanLatencyUs).To(gomega.BeNumerically(">", 0))

	dir := t.TempDir()
	in := filepath.Join(dir, "results.json")
	g.Expect(os.WriteFile(in, []byte(stdout), 0o644)).To(gomega.Succeed())
	out := filepath.Join(dir, "report")
	code, stdout, stderr = run("report", in, "-o", out)
	g.Expect(code).To(gomega.Equal(0), stderr)
	want := doc.Runs[1].ThroughputMbps / doc.Runs[0].ThroughputMbps
	g.Expect(stdout).To(gomega.HavePrefix(fmt.Sprintf("ratio fastpath-lo/baseline-lo %.2f\nlatency fastpath-lo/baseline-lo ", want)))
	for _, f := range []string{"report.md", "report.html", "throughput-tcp-stream-1-session.svg", "latency-tcp-rr.svg"} {
		g.Expect(filepath.Join(out, f)).To(gomega.BeAnExistingFile())
		g.Expect(stderr).To(gomega.ContainSubstring("wrote " + filepath.Join(out, f)))
	}
}

// The demo's emulated kubelet starts the runner with FASTPATH_EMULATED
// (e2e/localenv/emulation); the results document and its report must say so,
// followed by what --emulated adds.
func TestRunRecordsEmulatedFromEnvironment(t *testing.T) {
	const kubelet = "VMs emulated as network namespaces (set by the test as the emulated kubelet would)"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"env only", nil, kubelet},
		{"env and --emulated", []string{"--emulated", "the path is loopback"}, kubelet + "; the path is loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			t.Setenv(results.EmulatedEnv, kubelet)
			a := startNetserver(t)
			args := append([]string{"run", "--tests", "TCP_RR", "--rr-sizes", "1", "--sessions", "1", "--duration", "1s",
				"--repetitions", "1", "--quiet", "--path", "lo=" + a.Endpoint()}, tc.args...)
			code, stdout, stderr := run(args...)
			g.Expect(code).To(gomega.Equal(0), stderr)
			doc, err := results.Decode(strings.NewReader(stdout))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(doc.Machine.Emulated).To(gomega.Equal(tc.want))

			dir := t.TempDir()
			in := filepath.Join(dir, "results.json")
			g.Expect(os.WriteFile(in, []byte(stdout), 0o644)).To(gomega.Succeed())
			out := filepath.Join(dir, "report")
			code, _, stderr = run("report", in, "-o", out)
			g.Expect(code).To(gomega.Equal(0), stderr)
			md, err := os.ReadFile(filepath.Join(out, "report.md"))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(string(md)).To(gomega.ContainSubstring("> **Emulated:** " + tc.want))
			page, err := os.ReadFile(filepath.Join(out, "report.html"))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(string(page)).To(gomega.ContainSubstring(`<p class="emulated"><strong>Emulated:</strong> ` + tc.want))
		})
	}
}

func TestRunFailsClearlyWithoutNetserver(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ep := l.Addr().String()
	l.Close()
	code, stdout, stderr := run("run", "--tests", "TCP_STREAM", "--socket-sizes", "0", "--message-sizes", "4K", "--sessions", "1",
		"--duration", "1s", "--repetitions", "1", "--quiet", "--path", "gone="+ep)
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stdout).To(gomega.BeEmpty(), "no results document, in particular no zeros")
	g.Expect(stderr).To(gomega.ContainSubstring("failed to run netperf against " + ep + " via local (netperf -H 127.0.0.1"))
	g.Expect(stderr).To(gomega.ContainSubstring("netserver is not answering"))
}

func TestReportRejectsMissingAndBrokenFiles(t *testing.T) {
	g := gomega.NewWithT(t)
	code, _, stderr := run("report", filepath.Join(t.TempDir(), "nope.json"))
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stderr).To(gomega.ContainSubstring("failed to open results"))
	bad := filepath.Join(t.TempDir(), "bad.json")
	g.Expect(os.WriteFile(bad, []byte(`{"runs":[{"path":"p","test":"TCP_STREAM","sessions":1,"pairs":1,"throughputMbps":0,"samples":[{}]}]}`), 0o644)).To(gomega.Succeed())
	code, _, stderr = run("report", bad)
	g.Expect(code).To(gomega.Equal(1))
	g.Expect(stderr).To(gomega.ContainSubstring("throughputMbps must be positive"))
}
