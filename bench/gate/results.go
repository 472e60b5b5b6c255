package gate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Criterion is the verdict on one success criterion: the fields of the
// operator's summary.Verdict, which the CLI's main copies (bench/
// imports none of the operator's packages).
type Criterion struct {
	// Name is the field of spec.successCriteria, e.g. "minThroughputMbps".
	Name string
	// Required is the threshold as the spec gives it; Measured the figure
	// compared with it ("" when none, Why says why); both in Unit ("Mbps",
	// "%", or "" for a ratio). Max marks an upper bound.
	Required, Measured, Unit string
	Max                      bool
	Met                      bool
	Why                      string
	// Text is the operator's wording, e.g. "minSpeedupPercent 300 not met (294.5%)".
	Text string
}

// ReadRunResults reads the results.json of the run b's status describes
// from its results ConfigMap (status.resultsConfigMap), refusing one that
// holds another run's (its runID is not status.jobName): a benchmark edited
// since would otherwise be reported with the figures of the next run.
func ReadRunResults(ctx context.Context, c client.Reader, b *fastpathv1alpha1.FastPathBenchmark) (results.Document, error) {
	name := b.Status.ResultsConfigMap
	if name == "" {
		name = benchjob.ResultsConfigMapName(b.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, cm); err != nil {
		return results.Document{}, fmt.Errorf("failed to get results ConfigMap %s/%s: %w", b.Namespace, name, err)
	}
	if run := cm.Data[benchjob.RunIDKey]; run != b.Status.JobName {
		return results.Document{}, fmt.Errorf("results ConfigMap %s/%s holds run %q, not %q of the status", b.Namespace, name, run, b.Status.JobName)
	}
	doc, err := benchjob.ReadOutcome(cm.Data)
	if err != nil {
		return results.Document{}, fmt.Errorf("failed to read results ConfigMap %s/%s: %w", b.Namespace, name, err)
	}
	return doc, nil
}

// CheckCriteria reports an error when criteria contradict o: a criterion
// not met in a benchmark that succeeded, or every one met in a benchmark
// that missed one. Judged from the same results.json as the operator's,
// they agree; the check keeps a report from ever saying both.
func CheckCriteria(o Outcome, criteria []Criterion) error {
	if len(criteria) == 0 {
		return nil
	}
	allMet := true
	for _, c := range criteria {
		allMet = allMet && c.Met
	}
	switch {
	case o.Code == ExitSucceeded && !allMet:
		return fmt.Errorf("a criterion is not met by the results, yet the benchmark Succeeded")
	case o.Code == ExitCriteriaNotMet && allMet:
		return fmt.Errorf("every criterion is met by the results, yet the benchmark failed with %s", o.Reason)
	case o.Code != ExitSucceeded && o.Code != ExitCriteriaNotMet:
		return fmt.Errorf("the benchmark has no results to judge (%s)", o.Reason)
	}
	return nil
}
