package gate_test

import (
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

var update = flag.Bool("update", false, "rewrite the golden files testdata/*.xml with the current output")

var (
	started   = metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 5, 0, time.UTC))
	completed = metav1.NewTime(time.Date(2026, 11, 28, 12, 21, 9, 500_000_000, time.UTC))
)

// finished gives b the status figures of a run that produced results: the
// summary and four points (a stream with CPU figures, a two-pair stream,
// an RR point, a UDP point), as summary.Summarize writes them.
func finished(b *fastpathv1alpha1.FastPathBenchmark) *fastpathv1alpha1.FastPathBenchmark {
	b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000)), MinSpeedupPercent: ptr(int32(300)), MaxCPURatio: "0.80"}
	st := &b.Status
	st.JobName, st.ResultsConfigMap = "ci-run-1", "ci-results"
	st.StartTime, st.CompletionTime = &started, &completed
	st.BestGbps, st.Speedup, st.CPURatio = "13.52", "2.95x", "0.62"
	st.Points = []fastpathv1alpha1.BenchmarkPoint{
		{Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1, FastPathMbps: 13520, BaselineMbps: 4590, SpeedupPercent: 295,
			FastPathServiceDemandUsPerKB: "0.710", BaselineServiceDemandUsPerKB: "1.145", CPURatio: "0.62"},
		{Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 2, FastPathMbps: 20100, FastPathPerPairMbps: []int64{10200, 9900}, BaselineMbps: 8800, SpeedupPercent: 228},
		{Test: fastpathv1alpha1.TestTCPRR, SocketBytes: 262144, MessageBytes: 1, Sessions: 1, Pairs: 1,
			FastPathLatency: &metav1.Duration{Duration: 24100 * time.Nanosecond}, BaselineLatency: &metav1.Duration{Duration: 41200 * time.Nanosecond}, SpeedupPercent: 171},
		{Test: fastpathv1alpha1.TestUDPStream, SocketBytes: 262144, MessageBytes: 1472, Sessions: 1, Pairs: 1, FastPathMbps: 3100, BaselineMbps: 2900, SpeedupPercent: 107,
			FastPathLossPercent: "0.00", BaselineLossPercent: "1.25"},
	}
	return b
}

const (
	metMessage    = "best fast path 13.52 Gbps at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, 2.95x the baseline, CPU per byte 0.62 [0.55-0.70] of the baseline's: minThroughputMbps 10000 met, minSpeedupPercent 250 met, maxCPURatio 0.80 met (0.62)"
	missedMessage = "best fast path 13.52 Gbps at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, 2.95x the baseline: minThroughputMbps 10000 met, minSpeedupPercent 300 not met (294.5%), maxCPURatio 0.80 not met: no service demand of both the fast path and the baseline at the best point"
)

func reports() map[string][]gate.Report {
	ok := finished(succeeded(metMessage))
	ok.Spec.SuccessCriteria.MinSpeedupPercent = ptr(int32(250))
	okCriteria := []gate.Criterion{
		{Name: "minThroughputMbps", Required: "10000", Measured: "13520", Unit: "Mbps", Met: true, Text: "minThroughputMbps 10000 met"},
		{Name: "minSpeedupPercent", Required: "250", Measured: "294.5", Unit: "%", Met: true, Text: "minSpeedupPercent 250 met"},
		{Name: "maxCPURatio", Required: "0.80", Measured: "0.62", Max: true, Met: true, Text: "maxCPURatio 0.80 met (0.62)"},
	}
	missed := finished(failed(fastpathv1alpha1.ReasonThresholdNotMet, missedMessage))
	missedCriteria := []gate.Criterion{
		{Name: "minThroughputMbps", Required: "10000", Measured: "13520", Unit: "Mbps", Met: true, Text: "minThroughputMbps 10000 met"},
		{Name: "minSpeedupPercent", Required: "300", Measured: "294.5", Unit: "%", Text: "minSpeedupPercent 300 not met (294.5%)"},
		{Name: "maxCPURatio", Required: "0.80", Max: true, Why: "no service demand of both the fast path and the baseline at the best point",
			Text: "maxCPURatio 0.80 not met: no service demand of both the fast path and the baseline at the best point"},
	}
	runnerMsg := "Runner ci-run-1 failed: netperf to 10.250.0.7 (pair 1): connection refused"
	couldNot := failed(fastpathv1alpha1.ReasonRunnerFailed, runnerMsg)
	couldNot.Name = "ci-broken"
	couldNot.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000))}
	couldNot.Status.JobName, couldNot.Status.StartTime, couldNot.Status.CompletionTime = "ci-run-1", &started, &completed
	slow := running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running: 20 points × 3 repetitions on fastpath, baseline (120 runs), 1m0s per run")
	slow.Status.StartTime = &started
	timeoutMsg := "no outcome within 30m0s: still Running (JobRunning: Job ci-run-1 is running: 20 points × 3 repetitions on fastpath, baseline (120 runs), 1m0s per run)"
	noAttachment := pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link not found")
	noAttachment.CreationTimestamp = started

	regressedMessage := "best fast path 10.01 Gbps at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1: minThroughputMbps 10000 met, " +
		"maxRegressionPercent 10 not met (26.0%: throughput 0.74x of the compared run's at fastpath TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, beyond the noise)"
	regressed := finished(failed(fastpathv1alpha1.ReasonThresholdNotMet, regressedMessage))
	regressed.Name = "ci-2"
	regressed.Spec.CompareTo = &fastpathv1alpha1.CompareTo{Benchmark: "ci-1"}
	regressed.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000)), MaxRegressionPercent: ptr(int32(10))}
	regressed.Status.Points = regressed.Status.Points[:1]
	regressed.Status.BestGbps, regressed.Status.Points[0].FastPathMbps = "10.01", 10010
	regressed.Status.ComparedTo = "FastPathBenchmark ci-1 (run ci-1-1)"
	regressed.Status.Comparison = []fastpathv1alpha1.ComparedPoint{
		{Path: "fastpath", Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1, Mbps: 10010, ComparedMbps: 13520,
			ThroughputRatio: "0.74", ThroughputNoise: fastpathv1alpha1.BeyondNoise, CPURatio: "1.02", CPUNoise: fastpathv1alpha1.WithinNoise},
		{Path: "baseline", Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1, Mbps: 4500, ComparedMbps: 4590,
			ThroughputRatio: "0.98", ThroughputNoise: fastpathv1alpha1.WithinNoise},
	}
	regressedCriteria := []gate.Criterion{
		{Name: "minThroughputMbps", Required: "10000", Measured: "10010", Unit: "Mbps", Met: true, Text: "minThroughputMbps 10000 met"},
		{Name: "maxRegressionPercent", Required: "10", Measured: "26.0", Unit: "%", Max: true,
			Text: "maxRegressionPercent 10 not met (26.0%: throughput 0.74x of the compared run's at fastpath TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, beyond the noise)"},
	}

	succeededReport := gate.Report{Benchmark: ok, Outcome: gate.Decide(ok, gate.Facts{}), Criteria: okCriteria, Elapsed: 21 * time.Minute}
	couldNotRunReport := gate.Report{Benchmark: couldNot, Outcome: gate.Decide(couldNot, gate.Facts{}), Elapsed: 3 * time.Minute}
	return map[string][]gate.Report{
		"succeeded":       {succeededReport},
		"criteria-missed": {{Benchmark: missed, Outcome: gate.Decide(missed, gate.Facts{}), Criteria: missedCriteria, Elapsed: 21 * time.Minute}},
		// The results ConfigMap could not be read: the condition stands for the criteria.
		"criteria-not-judged": {{Benchmark: missed, Outcome: gate.Decide(missed, gate.Facts{})}},
		"could-not-run":       {couldNotRunReport},
		"attachment-missing": {{Benchmark: noAttachment, Elapsed: 2 * time.Minute, Outcome: gate.Outcome{State: gate.Done, Code: gate.ExitCouldNotRun,
			Phase: fastpathv1alpha1.BenchmarkPending, Reason: fastpathv1alpha1.ReasonWaitingForAttachment, Message: "FastPathAttachment db-link not found (still WaitingForAttachment after 2m0s)"}}},
		"timeout": {{Benchmark: slow, Elapsed: 30 * time.Minute, Outcome: gate.Outcome{State: gate.Done, Code: gate.ExitTimeout,
			Phase: fastpathv1alpha1.BenchmarkRunning, Reason: gate.ReasonTimeout, Message: timeoutMsg}}},
		"two-benchmarks": {succeededReport, couldNotRunReport},
		"regressed":      {{Benchmark: regressed, Outcome: gate.Decide(regressed, gate.Facts{}), Criteria: regressedCriteria, Elapsed: 21 * time.Minute}},
	}
}

// parsed is what a JUnit reader takes from the document.
type parsed struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Cases    []struct {
			Name      string    `xml:"name,attr"`
			Classname string    `xml:"classname,attr"`
			Failure   *struct{} `xml:"failure"`
			Error     *struct{} `xml:"error"`
			Skipped   *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestJUnitGolden compares the JUnit XML of each report with
// testdata/<name>.xml (go test ./bench/gate -run TestJUnitGolden -update
// rewrites them), and checks what a JUnit reader relies on: the document
// parses, the counts add up, and a benchmark fails (failures + errors)
// exactly when its exit code is not 0.
func TestJUnitGolden(t *testing.T) {
	for name, rs := range reports() {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			out, err := gate.JUnit(rs)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			path := filepath.Join("testdata", name+".xml")
			if *update {
				g.Expect(os.WriteFile(path, out, 0o644)).To(gomega.Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "run with -update to create it")
			g.Expect(string(out)).To(gomega.Equal(string(want)), "%s differs; -update rewrites it", path)

			var doc parsed
			g.Expect(xml.Unmarshal(out, &doc)).To(gomega.Succeed())
			g.Expect(doc.Suites).To(gomega.HaveLen(len(rs)))
			total := 0
			for i, s := range doc.Suites {
				g.Expect(s.Name).To(gomega.Equal(rs[i].Benchmark.Namespace + "/" + rs[i].Benchmark.Name))
				g.Expect(s.Tests).To(gomega.Equal(len(s.Cases)))
				fails, errs := 0, 0
				for _, c := range s.Cases {
					if c.Failure != nil {
						fails++
					}
					if c.Error != nil {
						errs++
					}
				}
				g.Expect([]int{s.Failures, s.Errors}).To(gomega.Equal([]int{fails, errs}))
				g.Expect(fails+errs > 0).To(gomega.Equal(rs[i].Outcome.Code != gate.ExitSucceeded), "fails exactly when the exit code is not 0")
				total += s.Tests
			}
			g.Expect(doc.Tests).To(gomega.Equal(total))
		})
	}
}

// The testcases' names do not carry figures, so a CI server tracks the
// same test across runs.
func TestJUnitNamesAreStable(t *testing.T) {
	g := gomega.NewWithT(t)
	rs := reports()
	a, err := gate.JUnit(rs["succeeded"])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	b, err := gate.JUnit(rs["criteria-missed"])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	names := func(out []byte) []string {
		var doc parsed
		g.Expect(xml.Unmarshal(out, &doc)).To(gomega.Succeed())
		var ns []string
		for _, c := range doc.Suites[0].Cases {
			ns = append(ns, c.Classname+" "+c.Name)
		}
		return ns
	}
	g.Expect(names(a)).To(gomega.Equal(names(b)))
	g.Expect(names(a)).To(gomega.Equal([]string{
		"apps/ci.benchmark run",
		"apps/ci.successCriteria minThroughputMbps",
		"apps/ci.successCriteria minSpeedupPercent",
		"apps/ci.successCriteria maxCPURatio",
		"apps/ci.points TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1",
		"apps/ci.points TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=2",
		"apps/ci.points TCP_RR sock=256KiB msg=1B sessions=1 pairs=1",
		"apps/ci.points UDP_STREAM sock=256KiB msg=1472B sessions=1 pairs=1",
	}))
}
