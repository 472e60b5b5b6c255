package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/benchfig"
	"github.com/fastpath-io/fastpath/bench/localbench"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// `local` end to end on two paths that need no CNI binary (1 s runs): the
// files, the medians, the targets it cannot judge without the fast path,
// the other benchmarks' figures, and nothing left behind.
func TestLocalCommand(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	out := t.TempDir()
	t.Setenv(benchfig.EnvDir, out)
	_, err := benchfig.Write(benchfig.File{Benchmark: "relay", Description: "relay cost", Figures: []benchfig.Figure{{Name: "relay/direct", Value: 0.93, Unit: "ratio"}},
		Targets: []benchfig.Target{{Kind: "throughput", Name: "relay/direct msg=64KiB", Value: 0.93, Goal: 0.8, Detail: "paired"}}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	junit := filepath.Join(out, "junit.xml")
	code, stdout, stderr := run("local", "--paths", "baseline-untuned,ceiling", "--duration", "1s", "--repetitions", "1", "--out", out, "--prefix", "fpbc", "--junit-file", junit)
	g.Expect(code).To(gomega.Equal(0), "targets not measurable here do not fail the run: %s", stderr)
	f, err := os.Open(filepath.Join(out, "results.json"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	doc, err := results.Decode(f)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Runs).To(gomega.HaveLen(35), "5 tests on baseline-untuned, on the ceiling's two candidates at each fast-path MTU, and on the ceiling derived from them")
	for _, r := range doc.Runs {
		g.Expect(r.ServiceDemandUsPerKB).To(gomega.BeNumerically(">", 0), "%s %s measured CPU", r.Path, r.Test)
		g.Expect(r.CPUScope).To(gomega.Equal(results.CPUScopeHost), "one host: the figure is reported once")
	}
	g.Expect(doc.Machine.Emulated).To(gomega.Equal(localbench.Emulation))
	for _, name := range []string{"report.md", "report.html"} {
		g.Expect(filepath.Join(out, name)).To(gomega.BeAnExistingFile())
	}
	g.Expect(stdout).To(gomega.ContainSubstring("emulated: VMs emulated as network namespaces"))
	g.Expect(stdout).To(gomega.MatchRegexp(`median TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1 baseline-untuned mtu=1500: \d+\.\d\d Gbps`))
	g.Expect(stdout).To(gomega.MatchRegexp(`median TCP_RR sock=256KiB msg=1B sessions=1 pairs=1 ceiling mtu=65520: mean latency \d+\.\d µs`))
	g.Expect(stdout).To(gomega.MatchRegexp(`median TCP_MAERTS sock=256KiB msg=64KiB sessions=1 pairs=1 ceiling mtu=65520: \d+\.\d\d Gbps \[[^]]+\], CPU \d+\.\d{3} µs/KiB \[[^]]+\] at \d+% host-wide`))
	g.Expect(stdout).To(gomega.MatchRegexp(`median UDP_STREAM sock=256KiB msg=1472B sessions=1 pairs=1 baseline-untuned mtu=1500: \d+\.\d\d Gbps \[[^]]+\], loss \d+\.\d% \[max \d+\.\d%\], CPU`))
	g.Expect(stdout).To(gomega.MatchRegexp(`median TCP_CRR sock=256KiB msg=1B sessions=1 pairs=1 ceiling mtu=65520: mean latency \d+\.\d µs`))
	g.Expect(stdout).To(gomega.MatchRegexp(`ceiling TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1 mtu=9000: best per repetition: ceiling-(veth|loopback) \(ceiling-veth \d of 1, ceiling-loopback \d of 1\)`))
	g.Expect(stdout).To(gomega.ContainSubstring("netperf on CPU 0, netserver's test process on CPU 0, on every path (netperf -T 0,0)"))
	g.Expect(strings.Count(stdout, "target SKIP ")).To(gomega.Equal(7), "no fast path measured")
	g.Expect(stdout).To(gomega.ContainSubstring("target SKIP cpu fastpath-linux-bridge/baseline-masquerade <= 0.80"))
	g.Expect(stdout).To(gomega.ContainSubstring("target PASS throughput relay/direct msg=64KiB 0.93 >= 0.80 (paired)\n"))
	g.Expect(stdout).To(gomega.ContainSubstring("figures relay: relay cost\n  relay relay/direct 0.93 ratio\n"))
	g.Expect(stderr).To(gomega.ContainSubstring("Removed everything the run made"))
	x := readJUnit(t, junit)
	g.Expect([]int{x.Tests, x.Failures, x.Errors, x.Skipped}).To(gomega.Equal([]int{9, 0, 0, 7}), "the run, 7 targets skipped, the relay target passed")
	left, err := localbench.FindLeftovers("fpbc", func(string) bool { return false })
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(left.Empty()).To(gomega.BeTrue(), left.String())
}

// A run that cannot start exits 2 and still writes its JUnit XML: the run
// an <error>, every target skipped as not judged. Without root it fails for
// want of root, as root for want of the CNI binary; either way before it
// builds anything.
func TestLocalCouldNotRun(t *testing.T) {
	g := gomega.NewWithT(t)
	junit := filepath.Join(t.TempDir(), "reports", "junit.xml")
	code, _, stderr := run("local", "--paths", "fastpath-linux-bridge", "--plugin", "/nonexistent/fastpath", "--prefix", "fpbc", "--nice", "0", "--out", t.TempDir(), "--junit-file", junit)
	g.Expect(code).To(gomega.Equal(2), stderr)
	want := "failed to find the fastpath CNI binary /nonexistent/fastpath (run make build"
	if os.Geteuid() != 0 {
		want = "failed to run the local benchmark: it needs root"
	}
	g.Expect(stderr).To(gomega.ContainSubstring("fastpath-bench local: " + want))
	x := readJUnit(t, junit)
	g.Expect([]int{x.Tests, x.Failures, x.Errors, x.Skipped}).To(gomega.Equal([]int{8, 0, 1, 7}))
	g.Expect(x.Suites[0].Cases[0].Error.Message).To(gomega.ContainSubstring(want))
}

// junitCounts is what a CI reader counts in a JUnit document.
type junitCounts struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
	Suites   []struct {
		Cases []struct {
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitCounts {
	t.Helper()
	g := gomega.NewWithT(t)
	raw, err := os.ReadFile(path)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	var x junitCounts
	g.Expect(xml.Unmarshal(raw, &x)).To(gomega.Succeed())
	g.Expect(x.Suites).To(gomega.HaveLen(1))
	return x
}

func TestLocalRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"local", "--paths", "fastpath-vdpa"}, 2, `unknown path "fastpath-vdpa"`},
		{[]string{"local", "--duration", "1500ms"}, 2, "whole seconds"},
		{[]string{"local", "--mtus", "0"}, 2, `failed to parse count "0"`},
		{[]string{"local", "--tests", "TCP_STREAM,SCTP_STREAM"}, 2, `--tests: unknown test "SCTP_STREAM"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := gomega.NewWithT(t)
			code, _, stderr := run(tc.args...)
			g.Expect(code).To(gomega.Equal(tc.code))
			g.Expect(stderr).To(gomega.ContainSubstring(tc.want))
		})
	}
	g := gomega.NewWithT(t)
	code, _, stderr := run("local", "--help")
	g.Expect(code).To(gomega.Equal(0), "make bench probes `local --help`")
	for _, e := range localbench.ExitCodes {
		g.Expect(stderr).To(gomega.ContainSubstring(fmt.Sprintf("\n  %d  %s: %s\n", e.Code, e.Code, e.When)), "the help lists exit code %d", e.Code)
	}
	code, _, stderr = run("local", "--strict", "--help")
	g.Expect(code).To(gomega.Equal(0), "--strict is still accepted")
	g.Expect(stderr).To(gomega.ContainSubstring("a missed target always exits 1"))
}
