package benchmark

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// errCompareToNotReady says the run of spec.compareTo is not there yet:
// the object is missing or the benchmark has not finished.
var errCompareToNotReady = errors.New("compareTo not ready")

// reference is the run of spec.compareTo, read.
type reference struct {
	// name says what it is, for status.comparedTo and messages, e.g.
	// "FastPathBenchmark ci-1 (run ci-1-1)".
	name string
	doc  results.Document
}

// readReference reads the results of b's spec.compareTo. Its errors wrap
// errCompareToNotReady when the object is missing or the benchmark has not
// finished; any other error means it holds no usable results.
func (r *Reconciler) readReference(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark) (reference, error) {
	ref := b.Spec.CompareTo
	switch {
	case ref.Benchmark == b.Name:
		return reference{}, fmt.Errorf("spec.compareTo.benchmark names this benchmark itself: compare with an earlier run")
	case ref.Benchmark != "":
		return r.readBenchmarkReference(ctx, b.Namespace, ref.Benchmark)
	}
	cm := &corev1.ConfigMap{}
	key := types.NamespacedName{Namespace: b.Namespace, Name: ref.ConfigMap}
	if err := r.Client.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return reference{}, fmt.Errorf("ConfigMap %s not found: %w", key, errCompareToNotReady)
		}
		return reference{}, fmt.Errorf("failed to get ConfigMap %s: %w", key, err)
	}
	raw, ok := cm.Data[benchjob.ResultsKey]
	if !ok {
		return reference{}, fmt.Errorf("ConfigMap %s has no key %s", key, benchjob.ResultsKey)
	}
	doc, err := results.Decode(strings.NewReader(raw))
	if err != nil {
		return reference{}, fmt.Errorf("%s of ConfigMap %s: %w", benchjob.ResultsKey, key, err)
	}
	return reference{name: "ConfigMap " + ref.ConfigMap, doc: doc}, nil
}

func (r *Reconciler) readBenchmarkReference(ctx context.Context, ns, name string) (reference, error) {
	other := &fastpathv1alpha1.FastPathBenchmark{}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if err := r.Client.Get(ctx, key, other); err != nil {
		if apierrors.IsNotFound(err) {
			return reference{}, fmt.Errorf("FastPathBenchmark %s not found: %w", key, errCompareToNotReady)
		}
		return reference{}, fmt.Errorf("failed to get FastPathBenchmark %s: %w", key, err)
	}
	if !finished(other) {
		phase := other.Status.Phase
		if phase == "" {
			phase = "not started"
		}
		return reference{}, fmt.Errorf("FastPathBenchmark %s has not finished (%s): %w", key, phase, errCompareToNotReady)
	}
	doc, err := benchjob.ReadResults(ctx, r.Client, other)
	if err == nil {
		cm := other.Status.ResultsConfigMap
		if cm == "" {
			cm = benchjob.ResultsConfigMapName(other.Name)
		}
		run := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: cm}, run); err == nil && run.Data[benchjob.RunIDKey] != other.Status.JobName {
			return reference{}, fmt.Errorf("FastPathBenchmark %s: its results ConfigMap %s holds run %q, not %q of its status", key, cm, run.Data[benchjob.RunIDKey], other.Status.JobName)
		}
	}
	if err != nil {
		return reference{}, fmt.Errorf("FastPathBenchmark %s (%s) has no results: %w", key, other.Status.Phase, err)
	}
	return reference{name: fmt.Sprintf("FastPathBenchmark %s (run %s)", name, other.Status.JobName), doc: doc}, nil
}

// reconcileCompareTo holds a run that has not started until the run of
// spec.compareTo can be read: Pending with WaitingForCompareTo while it is
// missing or unfinished (the watches bring the benchmark back), Failed with
// CompareToInvalid when it has no usable results. A started run is judged
// against it when its results arrive (reconcileResults).
func (r *Reconciler) reconcileCompareTo(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.spec.CompareTo == nil || s.job != nil {
		return ctrl.Result{}, nil
	}
	_, err := r.readReference(ctx, s.bench)
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case errors.Is(err, errCompareToNotReady):
		setPending(s.bench, fastpathv1alpha1.ReasonWaitingForCompareTo, "Waiting for spec.compareTo: "+strings.TrimSuffix(err.Error(), ": "+errCompareToNotReady.Error()))
		s.stop = true
		return ctrl.Result{}, nil
	case isAPIError(err) && !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	setFailed(s.bench, fastpathv1alpha1.ReasonCompareToInvalid, "spec.compareTo: "+err.Error())
	s.stop = true
	return ctrl.Result{}, nil
}

// isAPIError reports whether err came from the API server (a Get that
// failed for another reason than NotFound): a retry may fix it.
func isAPIError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}
