package gate_test

import (
	"context"
	"os"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// The results are read only from the run the status describes.
func TestReadRunResults(t *testing.T) {
	g := gomega.NewWithT(t)
	doc, err := os.ReadFile("../../controllers/benchmark/summary/testdata/results-pod.json")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	b := finished(succeeded("ok"))
	cm := func(run string) map[string]*corev1.ConfigMap {
		return map[string]*corev1.ConfigMap{"ci-results": {Data: map[string]string{benchjob.RunIDKey: run, benchjob.ResultsKey: string(doc)}}}
	}
	got, err := gate.ReadRunResults(context.Background(), &script{configMaps: cm("ci-run-1")}, b)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got.Runs).NotTo(gomega.BeEmpty())

	_, err = gate.ReadRunResults(context.Background(), &script{configMaps: cm("ci-run-2")}, b)
	g.Expect(err).To(gomega.MatchError(`results ConfigMap apps/ci-results holds run "ci-run-2", not "ci-run-1" of the status`))

	_, err = gate.ReadRunResults(context.Background(), &script{}, b)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to get results ConfigMap apps/ci-results")))

	broken := map[string]*corev1.ConfigMap{"ci-results": {Data: map[string]string{benchjob.RunIDKey: "ci-run-1", benchjob.ErrorKey: "boom", benchjob.ErrorReasonKey: fastpathv1alpha1.ReasonRunnerFailed}}}
	_, err = gate.ReadRunResults(context.Background(), &script{configMaps: broken}, b)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("the runner failed (RunnerFailed): boom")))
}

// Criteria that contradict the outcome are refused.
func TestCheckCriteria(t *testing.T) {
	g := gomega.NewWithT(t)
	met := []gate.Criterion{{Name: "minThroughputMbps", Met: true}}
	missed := []gate.Criterion{{Name: "minThroughputMbps", Met: true}, {Name: "minSpeedupPercent"}}
	ok := gate.Outcome{Code: gate.ExitSucceeded}
	notMet := gate.Outcome{Code: gate.ExitCriteriaNotMet, Reason: fastpathv1alpha1.ReasonThresholdNotMet}
	g.Expect(gate.CheckCriteria(ok, nil)).To(gomega.Succeed())
	g.Expect(gate.CheckCriteria(ok, met)).To(gomega.Succeed())
	g.Expect(gate.CheckCriteria(notMet, missed)).To(gomega.Succeed())
	g.Expect(gate.CheckCriteria(ok, missed)).NotTo(gomega.Succeed())
	g.Expect(gate.CheckCriteria(notMet, met)).NotTo(gomega.Succeed())
	g.Expect(gate.CheckCriteria(gate.Outcome{Code: gate.ExitTimeout, Reason: gate.ReasonTimeout}, met)).NotTo(gomega.Succeed())
}
