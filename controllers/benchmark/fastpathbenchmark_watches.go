package benchmark

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Field indexes on FastPathBenchmark, so attachment, VMI, ConfigMap and
// FastPathBenchmark events find the benchmarks that wait for them.
const (
	indexAttachment = "spec.attachmentRef.name"
	indexVM         = "spec.vms"
	// indexCompareToBenchmark and indexCompareToConfigMap hold
	// spec.compareTo's benchmark and configMap.
	indexCompareToBenchmark = "spec.compareTo.benchmark"
	indexCompareToConfigMap = "spec.compareTo.configMap"
)

// indexFields registers the field indexes above on FastPathBenchmarks with
// idx.
func indexFields(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &fastpathv1alpha1.FastPathBenchmark{}, indexAttachment, func(o client.Object) []string {
		return []string{o.(*fastpathv1alpha1.FastPathBenchmark).Spec.AttachmentRef.Name}
	}); err != nil {
		return fmt.Errorf("failed to index FastPathBenchmarks by %s: %w", indexAttachment, err)
	}
	if err := idx.IndexField(ctx, &fastpathv1alpha1.FastPathBenchmark{}, indexVM, func(o client.Object) []string {
		return benchmarkVMs(o.(*fastpathv1alpha1.FastPathBenchmark).Spec)
	}); err != nil {
		return fmt.Errorf("failed to index FastPathBenchmarks by %s: %w", indexVM, err)
	}
	for index, field := range map[string]func(*fastpathv1alpha1.CompareTo) string{
		indexCompareToBenchmark: func(c *fastpathv1alpha1.CompareTo) string { return c.Benchmark },
		indexCompareToConfigMap: func(c *fastpathv1alpha1.CompareTo) string { return c.ConfigMap },
	} {
		if err := idx.IndexField(ctx, &fastpathv1alpha1.FastPathBenchmark{}, index, func(o client.Object) []string {
			if c := o.(*fastpathv1alpha1.FastPathBenchmark).Spec.CompareTo; c != nil && field(c) != "" {
				return []string{field(c)}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to index FastPathBenchmarks by %s: %w", index, err)
		}
	}
	return nil
}

// mapConfigMap maps a ConfigMap to the benchmarks whose runner objects
// have its name (mapRunnerObject) and to those that compare with it
// (spec.compareTo.configMap).
func (r *Reconciler) mapConfigMap(ctx context.Context, o client.Object) []reconcile.Request {
	return append(r.mapRunnerObject(ctx, o), r.mapBy(indexCompareToConfigMap)(ctx, o)...)
}

// mapBy maps an attachment, VMI, ConfigMap or benchmark to the benchmarks
// in its namespace whose index field holds its name.
func (r *Reconciler) mapBy(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list fastpathv1alpha1.FastPathBenchmarkList
		if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "Failed to list FastPathBenchmarks", "index", index, "object", klog.KObj(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, b := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
		return reqs
	}
}

// mapRunnerObject maps a ConfigMap, ServiceAccount, Role or RoleBinding to
// the benchmarks of its namespace whose results ConfigMap
// (benchjob.ResultsConfigMapName) or runner objects (benchjob.RunnerName)
// have its name, whoever controls it: a benchmark stopped by
// RunnerObjectConflict goes on when the object it refused is deleted. Other
// names map to nothing without a list.
func (r *Reconciler) mapRunnerObject(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetName()
	if !strings.HasSuffix(name, "-runner") && !strings.HasSuffix(name, "-results") {
		return nil
	}
	var list fastpathv1alpha1.FastPathBenchmarkList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Failed to list FastPathBenchmarks", "object", klog.KObj(o))
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range list.Items {
		if benchjob.RunnerName(b.Name) == name || benchjob.ResultsConfigMapName(b.Name) == name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
	}
	return reqs
}

// benchmarkVMs lists every VM a spec names: client and server of each pair.
func benchmarkVMs(spec fastpathv1alpha1.FastPathBenchmarkSpec) []string {
	var vms []string
	for _, p := range vmPairs(spec) {
		vms = append(vms, p.Client, p.Server)
	}
	return vms
}

// vmPairs is pair 1 (spec.client/spec.server) followed by spec.additionalPairs.
func vmPairs(spec fastpathv1alpha1.FastPathBenchmarkSpec) []fastpathv1alpha1.BenchmarkPair {
	if spec.Mode != fastpathv1alpha1.BenchmarkModeVM && spec.Mode != "" {
		return nil
	}
	return append([]fastpathv1alpha1.BenchmarkPair{{Client: spec.Client.VM, Server: spec.Server.VM}}, spec.AdditionalPairs...)
}
