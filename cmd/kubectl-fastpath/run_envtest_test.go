package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/benchmark"
	"github.com/fastpath-io/fastpath/controllers/benchmark/summary"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// bench run against a real kube-apiserver (internal/testing/testenv): the
// CRD's validation, the status subresource, the results ConfigMap and, in
// one spec, the benchmark controller itself. Finished benchmarks get their
// status written here as the controller would, so the command's first read
// is final and nothing waits on time; the specs that follow a benchmark
// wait the few seconds of their --grace or --timeout.
var _ = Describe("bench run", Ordered, func() {
	var (
		env        *testenv.Env
		k8s        client.Client
		kubeconfig string
		ns         string
		ctx        = context.Background()
	)

	BeforeAll(func() {
		var err error
		env, err = testenv.Start(testenv.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		k8s = env.Client
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.KubeconfigFile(kubeconfig)).To(Succeed())
	})

	BeforeEach(func() {
		var err error
		ns, err = env.NewNamespace(ctx, "bench-run")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		})
	})

	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append(args, "--kubeconfig", kubeconfig), &out, &errb, func(string, []string) error { return nil })
		GinkgoWriter.Printf("bench run %q: exit %d\nstdout:\n%s\nstderr:\n%s\n", args, code, out.String(), errb.String())
		return code, out.String(), errb.String()
	}
	file := func(content string) string {
		p := filepath.Join(GinkgoT().TempDir(), "benchmark.yaml")
		Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
		return p
	}
	manifest := func(meta, criteria string) string {
		return "apiVersion: fastpath.io/v1alpha1\nkind: FastPathBenchmark\nmetadata: {" + meta + "}\n" +
			"spec:\n  attachmentRef: {name: db-link}\n  mode: Pod\n  duration: 10s\n  repetitions: 1\n" + criteria
	}
	// finish writes b's status as the controller's finish does, with the
	// summary of testdata results-pod.json, and (when withResults) the
	// results ConfigMap of the run.
	finish := func(b *fastpathv1alpha1.FastPathBenchmark, withResults bool) {
		raw, err := os.ReadFile("../../controllers/benchmark/summary/testdata/results-pod.json")
		Expect(err).NotTo(HaveOccurred())
		doc, err := results.Decode(bytes.NewReader(raw))
		Expect(err).NotTo(HaveOccurred())
		sum := summary.Summarize(doc)
		met, msg := summary.Evaluate(sum, b.Spec.SuccessCriteria)
		job := benchjob.JobName(b.Name, b.Generation)
		if withResults {
			Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: benchjob.ResultsConfigMapName(b.Name)},
				Data: map[string]string{benchjob.RunIDKey: job, benchjob.ResultsKey: string(raw)}})).To(Succeed())
		}
		phase, reason := fastpathv1alpha1.BenchmarkSucceeded, fastpathv1alpha1.ReasonCriteriaMet
		if !met {
			phase, reason = fastpathv1alpha1.BenchmarkFailed, fastpathv1alpha1.ReasonThresholdNotMet
		}
		now := metav1.Now()
		b.Status = fastpathv1alpha1.FastPathBenchmarkStatus{ObservedGeneration: b.Generation, Phase: phase, JobName: job,
			ResultsConfigMap: benchjob.ResultsConfigMapName(b.Name), StartTime: &now, CompletionTime: &now,
			BestGbps: sum.BestGbps, Speedup: sum.Speedup, CPURatio: sum.CPURatio, Paths: sum.Paths, Points: sum.Points}
		for _, t := range []string{fastpathv1alpha1.RunningCondition, fastpathv1alpha1.SucceededCondition, fastpathv1alpha1.FailedCondition} {
			s := metav1.ConditionFalse
			if t == fastpathv1alpha1.SucceededCondition && met || t == fastpathv1alpha1.FailedCondition && !met {
				s = metav1.ConditionTrue
			}
			b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: b.Generation})
		}
		Expect(k8s.Status().Update(ctx, b)).To(Succeed())
	}
	create := func(criteria string) *fastpathv1alpha1.FastPathBenchmark {
		code, out, _ := run("bench", "run", "-f", file(manifest("generateName: ci-, namespace: "+ns, criteria)))
		Expect(code).To(Equal(0))
		b := &fastpathv1alpha1.FastPathBenchmark{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: strings.TrimSpace(out)}, b)).To(Succeed())
		return b
	}

	It("creates the benchmark of -f in the file's namespace and prints its generated name", func() {
		code, out, errb := run("bench", "run", "-f", file(manifest("generateName: ci-, namespace: "+ns, "")))
		Expect(code).To(Equal(0), errb)
		Expect(out).To(MatchRegexp(`^ci-[a-z0-9]{5}\n$`))
		b := &fastpathv1alpha1.FastPathBenchmark{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: strings.TrimSpace(out)}, b)).To(Succeed())
		Expect(b.Spec.AttachmentRef.Name).To(Equal("db-link"))

		// No namespace in the file: -n's.
		code, out, errb = run("bench", "run", "-f", file(manifest("name: from-flag", "")), "-n", ns)
		Expect(code).To(Equal(0), errb)
		Expect(out).To(Equal("from-flag\n"))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "from-flag"}, b)).To(Succeed())
	})

	It("exits 2 quoting the API server when it refuses the benchmark", func() {
		code, out, errb := run("bench", "run", "-f", file(manifest("name: slow, namespace: "+ns, "  successCriteria: {minSpeedupPercent: 50}\n")), "--wait")
		Expect(code).To(Equal(2))
		Expect(out).To(BeEmpty())
		Expect(errb).To(ContainSubstring("failed to create FastPathBenchmark " + ns + "/slow from"))
		Expect(errb).To(ContainSubstring("spec.successCriteria.minSpeedupPercent must be at least 100"))

		Expect(k8s.Create(ctx, &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
			Spec: fastpathv1alpha1.FastPathBenchmarkSpec{AttachmentRef: fastpathv1alpha1.LocalObjectReference{Name: "db-link"}, Mode: fastpathv1alpha1.BenchmarkModePod}})).To(Succeed())
		code, _, errb = run("bench", "run", "-f", file(manifest("name: taken, namespace: "+ns, "")))
		Expect(code).To(Equal(2))
		Expect(errb).To(ContainSubstring("already exists"))

		code, _, errb = run("bench", "run", "nope", "-n", ns)
		Expect(code).To(Equal(2))
		Expect(errb).To(ContainSubstring("FastPathBenchmark " + ns + "/nope not found"))
	})

	It("exits 1 for a benchmark that missed a criterion, with a JUnit testcase per criterion judged from its results", func() {
		b := create("  successCriteria: {minThroughputMbps: 20000, minSpeedupPercent: 150}\n")
		finish(b, true)
		junitFile := filepath.Join(GinkgoT().TempDir(), "junit.xml")
		csvFile := filepath.Join(GinkgoT().TempDir(), "results.csv")
		code, out, errb := run("bench", "run", b.Name, "-n", ns, "-o", "junit", "--junit-file", junitFile, "--csv-file", csvFile)
		Expect(code).To(Equal(1))
		csvData, err := os.ReadFile(csvFile)
		Expect(err).NotTo(HaveOccurred())
		csvLines := strings.Split(strings.TrimSpace(string(csvData)), "\n")
		Expect(csvLines).To(HaveLen(13), "the header and a row per run of results-pod.json")
		Expect(csvLines[0]).To(HavePrefix("Driver,Profile,Same node,Host Network,"))
		Expect(csvLines[1]).To(HavePrefix("netperf,TCP_STREAM,true,false,false,5,1,3,16384,"))
		Expect(errb).To(ContainSubstring("Failed ThresholdNotMet: best fast path 13.52 Gbps"))
		Expect(errb).To(ContainSubstring("kubectl fastpath bench run: exit 1, criteria not met: ThresholdNotMet: "))
		written, err := os.ReadFile(junitFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(written)).To(Equal(out))

		var doc struct {
			Failures int `xml:"failures,attr"`
			Suites   []struct {
				Name  string `xml:"name,attr"`
				Cases []struct {
					Name    string `xml:"name,attr"`
					Failure *struct {
						Message string `xml:"message,attr"`
					} `xml:"failure"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		Expect(xml.Unmarshal([]byte(out), &doc)).To(Succeed())
		Expect(doc.Failures).To(Equal(1))
		Expect(doc.Suites).To(HaveLen(1))
		Expect(doc.Suites[0].Name).To(Equal(ns + "/" + b.Name))
		cases := doc.Suites[0].Cases
		Expect(cases).To(HaveLen(3 + len(b.Status.Points)))
		Expect(cases[1].Name).To(Equal("minThroughputMbps"))
		Expect(cases[1].Failure.Message).To(Equal("minThroughputMbps: measured 13520 Mbps, required at least 20000 Mbps"))
		Expect(cases[2].Name).To(Equal("minSpeedupPercent"))
		Expect(cases[2].Failure).To(BeNil())
	})

	It("compares two finished benchmarks by name, point by point", func() {
		old, now := create(""), create("")
		finish(old, true)
		finish(now, true)
		code, out, errb := run("bench", "compare", old.Name, now.Name, "-n", ns, "--max-regression-percent", "1")
		Expect(code).To(Equal(0), errb)
		Expect(out).To(HavePrefix("now: FastPathBenchmark " + now.Name + " (run " + now.Name + "-run-1)\nthen: FastPathBenchmark " + old.Name + " (run " + old.Name + "-run-1)\n"))
		Expect(out).To(MatchRegexp(`(?m)^fastpath\s+TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1\s+13520\s+13520\s+1\.00\s+13403-13611\s+13403-13611\s+within noise`))

		code, _, errb = run("bench", "compare", old.Name, "nope", "-n", ns)
		Expect(code).To(Equal(1))
		Expect(errb).To(ContainSubstring("failed to get FastPathBenchmark " + ns + "/nope (and no file nope)"))
	})

	It("exits 0 for a benchmark that succeeded, the condition standing for the criteria when the results are gone", func() {
		b := create("  successCriteria: {minThroughputMbps: 10000}\n")
		finish(b, false)
		code, out, errb := run("bench", "run", b.Name, "-n", ns)
		Expect(code).To(Equal(0), errb)
		Expect(out).To(MatchRegexp(`(?m)^` + ns + `\s+` + b.Name + `\s+Succeeded\s+13\.52\s+2\.95x\s+-$`))
		Expect(out).To(ContainSubstring("Succeeded (CriteriaMet): best fast path 13.52 Gbps"))
		Expect(out).To(HaveSuffix("exit 0: succeeded\n"))
		Expect(errb).To(ContainSubstring("Success criteria not judged one by one"))
	})

	It("exits 2 at once with --grace 0 when no operator observes the benchmark", func() {
		code, _, errb := run("bench", "run", "-f", file(manifest("name: orphan, namespace: "+ns, "")), "--wait", "--grace", "0s", "-o", "json")
		Expect(code).To(Equal(2))
		Expect(errb).To(ContainSubstring("NotObserved: fastpath-operator has not observed generation 1 yet"))
	})

	It("exits 3 when the timeout passes first", func() {
		b := create("")
		b.Status = fastpathv1alpha1.FastPathBenchmarkStatus{ObservedGeneration: b.Generation, Phase: fastpathv1alpha1.BenchmarkRunning,
			Conditions: []metav1.Condition{{Type: fastpathv1alpha1.RunningCondition, Status: metav1.ConditionTrue, Reason: fastpathv1alpha1.ReasonJobRunning,
				Message: "Job is running", LastTransitionTime: metav1.Now()}}}
		Expect(k8s.Status().Update(ctx, b)).To(Succeed())
		code, out, errb := run("bench", "run", b.Name, "-n", ns, "--timeout", "1s", "-o", "junit")
		Expect(code).To(Equal(3))
		Expect(errb).To(ContainSubstring("Timeout: no outcome within 1s: still Running (JobRunning: Job is running)"))
		Expect(out).To(ContainSubstring(`<error message="timeout (Timeout): no outcome within 1s`))
	})

	It("exits 2 after the grace when the controller waits for an attachment that does not exist", func() {
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme:                 env.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
			Controller:             config.Controller{SkipNameValidation: ptr(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		mgrCtx, stop := context.WithCancel(ctx)
		Expect((&benchmark.Reconciler{RunnerImage: "registry.example/fastpath-bench:test", KubeVirtAbsent: true}).SetupWithManager(mgrCtx, mgr, controller.Options{})).To(Succeed())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mgrCtx) }()
		DeferCleanup(func() {
			stop()
			Eventually(done, time.Minute).Should(Receive(BeNil()))
		})

		start := time.Now()
		code, _, errb := run("bench", "run", "-f", file(manifest("name: lost, namespace: "+ns, "")), "--wait", "--grace", "3s")
		Expect(code).To(Equal(2))
		Expect(errb).To(ContainSubstring("Pending WaitingForAttachment: FastPathAttachment db-link not found (exit 2 unless that changes within 3s)"))
		Expect(errb).To(ContainSubstring("kubectl fastpath bench run: exit 2, could not run: WaitingForAttachment: FastPathAttachment db-link not found (still WaitingForAttachment after"))
		Expect(time.Since(start)).To(BeNumerically("<", time.Minute), "the grace, not the timeout of the spec")
	})
})

func ptr[T any](v T) *T { return &v }
