package attachment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/benchfig"
	"github.com/fastpath-io/fastpath/controllers/attachment"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
)

// scaleVMs is the number of VMs one attachment selects in the scale benchmark.
const scaleVMs = 500

// scaleResult is one run of the scale scenario.
type scaleResult struct {
	wireSeconds, unwireSeconds     float64
	wireRequests, unwireRequests   int64
	wireWrites, unwireWrites       int64
	wireConflicts, unwireConflicts float64
}

// BenchmarkOperatorScale measures how one FastPathAttachment selecting 500 VMs
// (each with the user's own interfaces, networks, annotations and affinity)
// reaches VMsWired=True, and how its deletion unwires them: wall-clock seconds
// and API requests per VM sent by the operator's manager (counted on its
// rest.Config transport, informer list/watch included). It runs against the
// embedded control plane (real kube-apiserver and etcd on this machine), once
// with the operator's default client rate limit (--kube-api-qps 50, --kube-api-burst
// 100) and once unthrottled. Run with `make bench` (-benchtime=1x).
func BenchmarkOperatorScale(b *testing.B) {
	logf.SetLogger(logr.Discard())
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := createKubeVirtCR(context.Background(), env.Client); err != nil {
		b.Fatal(err)
	}
	var figures []benchfig.Figure
	for _, limits := range []struct {
		name  string
		qps   float32
		burst int
	}{
		{"default-qps", attachment.DefaultKubeAPIQPS, attachment.DefaultKubeAPIBurst},
		{"unthrottled", -1, 0},
	} {
		b.Run(limits.name, func(b *testing.B) {
			var r scaleResult
			for range b.N {
				r = runScale(b, env, limits.qps, limits.burst)
			}
			perVM := func(n int64) float64 { return float64(n) / scaleVMs }
			b.ReportMetric(r.wireSeconds, "wire-s")
			b.ReportMetric(perVM(r.wireRequests), "wire-requests/VM")
			b.ReportMetric(r.unwireSeconds, "unwire-s")
			b.ReportMetric(perVM(r.unwireRequests), "unwire-requests/VM")
			b.Logf("%s: %d VMs wired in %.2f s with %d requests (%.2f/VM, %d writes, %.0f conflicts); unwired in %.2f s with %d requests (%.2f/VM, %d writes, %.0f conflicts)",
				limits.name, scaleVMs, r.wireSeconds, r.wireRequests, perVM(r.wireRequests), r.wireWrites, r.wireConflicts,
				r.unwireSeconds, r.unwireRequests, perVM(r.unwireRequests), r.unwireWrites, r.unwireConflicts)
			figures = append(figures,
				benchfig.Figure{Name: limits.name + " wire 500 VMs", Value: r.wireSeconds, Unit: "s"},
				benchfig.Figure{Name: limits.name + " wire API requests per VM", Value: perVM(r.wireRequests), Unit: "requests"},
				benchfig.Figure{Name: limits.name + " wire API writes per VM", Value: perVM(r.wireWrites), Unit: "requests"},
				benchfig.Figure{Name: limits.name + " wire patch conflicts", Value: r.wireConflicts, Unit: "count"},
				benchfig.Figure{Name: limits.name + " unwire 500 VMs", Value: r.unwireSeconds, Unit: "s"},
				benchfig.Figure{Name: limits.name + " unwire API requests per VM", Value: perVM(r.unwireRequests), Unit: "requests"},
			)
		})
	}
	path, err := benchfig.Write(benchfig.File{
		Benchmark: "operator-scale",
		Description: fmt.Sprintf("One FastPathAttachment selecting %d VirtualMachines on the embedded control plane (kube-apiserver + etcd, "+
			"fixture KubeVirt CRDs, no KubeVirt running): time to VMsWired=True and to deletion, API requests per VM sent by the operator", scaleVMs),
		Figures: figures,
	})
	if err != nil {
		b.Fatal(err)
	}
	if path != "" {
		b.Logf("figures written to %s", path)
	}
}

// runScale creates scaleVMs VMs in a fresh namespace, starts an operator with
// the given client rate limit, creates one attachment selecting them all, waits
// for VMsWired=True with every VM wired, then deletes the attachment and waits
// until it is gone.
func runScale(b *testing.B, env *testenv.Env, qps float32, burst int) scaleResult {
	b.Helper()
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.NewNamespace(ctx, "scale")
	if err != nil {
		b.Fatal(err)
	}
	if err := createScaleVMs(ctx, env, ns); err != nil {
		b.Fatal(err)
	}

	// Since issue 17 an attachment needs a FastPathNetwork (an admin's) that
	// admits its namespace.
	fpnet := &v1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + ns},
		Spec: v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathLinuxBridge, Bridge: "fastpath0",
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
	}
	if err := env.Client.Create(ctx, fpnet); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), fpnet) }()

	counter := &apiCounter{}
	cfg := counter.wrap(env.Config)
	cfg.QPS, cfg.Burst = qps, burst
	stop, err := startBenchManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()

	var r scaleResult
	reads, writes := counter.reads.Load(), counter.writes.Load()
	conflicts := patchConflicts()
	b.StartTimer()
	start := time.Now()
	att := &v1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scale"},
		Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "scale"}},
			NetworkRef: &v1alpha1.NetworkReference{Name: fpnet.Name},
			Network:    &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/22"}},
		},
	}
	if err := env.Client.Create(ctx, att); err != nil {
		b.Fatal(err)
	}
	// A hang guard, not a speed target: the last status is in the error.
	last := "no status yet"
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &v1alpha1.FastPathAttachment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "scale"}, cur); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.VMsWiredCondition)
		if c != nil {
			last = fmt.Sprintf("VMsWired=%s/%s (%s), %d of %d VMs wired", c.Status, c.Reason, c.Message, cur.Status.WiredVMs, scaleVMs)
		}
		return c != nil && c.Status == metav1.ConditionTrue && cur.Status.WiredVMs == scaleVMs, nil
	})
	if err != nil {
		b.Fatalf("failed to wait for VMsWired=True with %d VMs wired: %v; last: %s", scaleVMs, err, last)
	}
	r.wireSeconds = time.Since(start).Seconds()
	r.wireRequests = counter.reads.Load() - reads + counter.writes.Load() - writes
	r.wireWrites = counter.writes.Load() - writes
	r.wireConflicts = patchConflicts() - conflicts
	if err := checkAllWired(ctx, env, ns); err != nil {
		b.Fatal(err)
	}

	reads, writes = counter.reads.Load(), counter.writes.Load()
	conflicts = patchConflicts()
	start = time.Now()
	if err := env.Client.Delete(ctx, att); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "scale"}, &v1alpha1.FastPathAttachment{})
		return err != nil, nil
	})
	if err != nil {
		b.Fatalf("failed to wait for the attachment to go: %v", err)
	}
	r.unwireSeconds = time.Since(start).Seconds()
	r.unwireRequests = counter.reads.Load() - reads + counter.writes.Load() - writes
	r.unwireWrites = counter.writes.Load() - writes
	r.unwireConflicts = patchConflicts() - conflicts
	b.StopTimer()
	return r
}

// createScaleVMs creates scaleVMs copies of the busy VM with 8 writers.
func createScaleVMs(ctx context.Context, env *testenv.Env, ns string) error {
	labels, err := json.Marshal(map[string]string{"app": "scale"})
	if err != nil {
		return err
	}
	names := make(chan string)
	errs := make(chan error, scaleVMs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				vm := &unstructured.Unstructured{}
				if err := vm.UnmarshalJSON([]byte(fmt.Sprintf(busyVM, name, labels))); err != nil {
					errs <- err
					continue
				}
				vm.SetNamespace(ns)
				if err := env.Client.Create(ctx, vm); err != nil {
					errs <- fmt.Errorf("failed to create VM %s: %w", name, err)
				}
			}
		}()
	}
	for i := range scaleVMs {
		names <- fmt.Sprintf("vm-%03d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	return <-errs
}

// checkAllWired verifies on the API server that every VM carries the wiring.
func checkAllWired(ctx context.Context, env *testenv.Env, ns string) error {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("kubevirt.io/v1")
	list.SetKind("VirtualMachineList")
	if err := env.Client.List(ctx, list, &client.ListOptions{Namespace: ns}); err != nil {
		return err
	}
	if len(list.Items) != scaleVMs {
		return fmt.Errorf("listed %d VMs, want %d", len(list.Items), scaleVMs)
	}
	for _, vm := range list.Items {
		labels, _, _ := unstructured.NestedStringMap(vm.Object, "spec", "template", "metadata", "labels")
		if labels[v1alpha1.AttachmentLabel] != "scale" {
			return fmt.Errorf("VM %s is not wired", vm.GetName())
		}
	}
	return nil
}

// startBenchManager starts a manager with the attachment reconciler at the
// operator's default concurrency and returns its stop function.
func startBenchManager(cfg *rest.Config) (func(), error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 fpscheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := (&attachment.Reconciler{}).SetupWithManager(context.Background(), mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Every kind the controller watches (SetupWithManager), registered before
	// the manager starts so that WaitForCacheSync below covers each of them:
	// the informers list and watch before the clock starts, not during it.
	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
	for _, obj := range []client.Object{&v1alpha1.FastPathAttachment{}, &nadv1.NetworkAttachmentDefinition{}, vm, kv,
		&kubevirtv1.VirtualMachineInstance{}, &v1alpha1.FastPathNode{}, &v1alpha1.FastPathNetwork{}, &corev1.Namespace{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			cancel()
			return nil, fmt.Errorf("failed to register the informer for %T: %w", obj, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() { cancel(); <-done }
	// A hang guard, not a speed target: the informers sync in seconds.
	syncCtx, syncCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		stop()
		return nil, errors.New("failed to sync the operator's informers within 2m")
	}
	return stop, nil
}

// patchConflicts reads fastpath_vm_patches_total{result="conflict"}.
func patchConflicts() float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() != "fastpath_vm_patches_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "conflict" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
