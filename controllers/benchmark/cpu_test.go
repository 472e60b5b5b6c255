package benchmark_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// withServiceDemand is fixtureDoc() with service demands on the best point
// (TCP_STREAM 256 KiB / 64 KiB): per repetition the fast path's over the
// baseline's is 0.50, 0.55 and 0.60.
func withServiceDemand() results.Document {
	doc := fixtureDoc()
	sds := map[string][]float64{benchjob.PathFastPath: {2.0, 2.2, 1.8}, benchjob.PathBaseline: {4.0, 4.0, 3.0}}
	for i := range doc.Runs {
		r := &doc.Runs[i]
		if r.Test != results.TCPStream || r.SocketBytes != 262144 || r.MessageBytes != 65536 || r.Pairs != 1 {
			continue
		}
		for j := range r.Samples {
			sd := sds[r.Path][j%3]
			r.Samples[j].ServiceDemandUsPerKB, r.Samples[j].CPUUtilPercent = sd, 100
			for k := range r.Samples[j].PerSession {
				r.Samples[j].PerSession[k].CPUScope = results.CPUScopeHost
			}
		}
		r.Summarize()
	}
	return doc
}

var _ = Describe("FastPathBenchmark CPU cost", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("rejects a maxCPURatio that is not a positive decimal, naming the field", func() {
		for _, bad := range []string{"fast", "0", "-0.5", "1e3", "0.8x"} {
			b := podBenchmark(ns, "badcpu", "db-link")
			b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: bad}
			err := k8s.Create(ctx, b)
			Expect(err).To(HaveOccurred(), bad)
			Expect(err.Error()).To(ContainSubstring("spec.successCriteria.maxCPURatio must be a decimal number greater than 0"), bad)
		}
		b := podBenchmark(ns, "nobase", "db-link")
		b.Spec.Baseline = fastpathv1alpha1.BaselineNone
		b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.80"}
		err := k8s.Create(ctx, b)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.successCriteria.maxCPURatio needs a baseline"))
	})

	It("accepts TCP_MAERTS, UDP_STREAM and TCP_CRR and passes them to the runner", func() {
		b := podBenchmark(ns, "directions", "db-link")
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPMaerts, fastpathv1alpha1.TestUDPStream, fastpathv1alpha1.TestTCPCRR}
		job := startPodRun(ctx, b)
		Expect(flagValues(job.Spec.Template.Spec.Containers[0].Args, "--tests")).To(Equal([]string{"TCP_MAERTS,UDP_STREAM,TCP_CRR"}))
	})

	It("puts the CPU ratio into status and fails the benchmark when maxCPURatio is missed", func() {
		b := podBenchmark(ns, "cpu", "db-link")
		b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxCPURatio: "0.50"}
		job := startPodRun(ctx, b)
		_, err := runnerSink(ns, "cpu", job.Name).Write(ctx, withServiceDemand(), nil)
		Expect(err).NotTo(HaveOccurred())

		Eventually(getBenchmark(ctx, ns, "cpu")).Should(And(havePhase(failed),
			haveCondition(fastpathv1alpha1.FailedCondition, "True", fastpathv1alpha1.ReasonThresholdNotMet)))
		b = getBenchmark(ctx, ns, "cpu")()
		Expect(conditionMessage(b, fastpathv1alpha1.FailedCondition)).To(ContainSubstring("CPU per byte 0.55 [0.50-0.60] of the baseline's: maxCPURatio 0.50 not met (0.55)"))
		Expect(b.Status.CPURatio).To(Equal("0.55"))
		Expect(b.Status.Points[3].FastPathServiceDemandUsPerKB).To(Equal("2.000"))
		Expect(b.Status.Points[3].BaselineServiceDemandUsPerKB).To(Equal("4.000"))
		Expect(b.Status.Points[3].CPURatio).To(Equal("0.55"))
		Eventually(func() float64 {
			v, _ := gauge("fastpath_benchmark_cpu_ratio", map[string]string{"namespace": ns, "benchmark": "cpu"})
			return v
		}).Should(Equal(0.55))
		v, ok := gauge("fastpath_benchmark_service_demand_us_per_kib", map[string]string{"namespace": ns, "benchmark": "cpu", "path": "baseline"})
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(4.0))
	})
})
