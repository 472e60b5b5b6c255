package benchmark

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/bench/benchjob"
	"github.com/fastpath-io/fastpath/internal/bench/benchresults"
	"github.com/fastpath-io/fastpath/internal/bench/results"
)

// Field indexes on FastPathBenchmark, so attachment and VMI events find the
// benchmarks that wait for them.
const (
	indexAttachment = "spec.attachmentRef.name"
	indexVM         = "spec.vms"
)

// DefaultSSHKeyRetry is how often a VM-mode benchmark looks for its SSH key
// Secret while it is missing (Secrets are read uncached and not watched, so the
// operator does not cache every Secret of the cluster).
const DefaultSSHKeyRetry = 30 * time.Second

// ControllerName names the controller (metrics, logs) and its event recorder
// (the source of its Events).
const ControllerName = "fastpathbenchmark"

// maxReasons bounds how many waiting endpoints a Pending message lists.
const maxReasons = 3

// Reconciler reconciles FastPathBenchmark objects.
type Reconciler struct {
	// Client is the manager's cached client; SetupWithManager fills it when nil.
	Client client.Client
	// APIReader reads uncached: the SSH key Secret, and the results ConfigMap
	// once the Job has ended (so a lagging cache is not taken for "no results").
	// SetupWithManager fills it when nil.
	APIReader client.Reader
	// Scheme sets owner references; SetupWithManager fills it when nil.
	Scheme *runtime.Scheme
	// Recorder records Events; SetupWithManager fills it when nil.
	Recorder record.EventRecorder
	// RunnerImage is the image of the runner Job and the netserver pods: it has
	// fastpath-bench, netperf, netserver and an OpenSSH client (the operator's
	// --runner-image flag). Required.
	RunnerImage string
	// RunnerPullPolicy of RunnerImage; empty leaves the Kubernetes default.
	RunnerPullPolicy corev1.PullPolicy
	// SSHKeyRetry overrides DefaultSSHKeyRetry when positive.
	SSHKeyRetry time.Duration
}

// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathbenchmarks,verbs=get;list;watch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathbenchmarks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathbenchmarks/finalizers,verbs=update
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathattachments,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager fills the Reconciler's unset fields from mgr, registers
// the field indexes it needs and the controller "fastpathbenchmark", which
// watches FastPathBenchmarks, the Jobs, Pods, ConfigMaps, ServiceAccounts,
// Roles and RoleBindings they own, FastPathAttachments and VMIs. It fails
// when RunnerImage is empty or an index cannot be registered.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.RunnerImage == "" {
		return fmt.Errorf("failed to set up the FastPathBenchmark controller: no runner image")
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(ControllerName)
	}
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
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
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&fastpathv1alpha1.FastPathBenchmark{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&fastpathv1alpha1.FastPathAttachment{}, handler.EnqueueRequestsFromMapFunc(r.mapBy(indexAttachment))).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.mapBy(indexVM))).
		Complete(r)
}

// mapBy maps an attachment or VMI to the benchmarks in its namespace whose
// index field holds its name.
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

// scope is what the phases of one reconcile share.
type scope struct {
	bench *fastpathv1alpha1.FastPathBenchmark
	// spec is bench.Spec after DefaultBenchmarkSpec.
	spec       fastpathv1alpha1.FastPathBenchmarkSpec
	params     benchjob.Params
	attachment *fastpathv1alpha1.FastPathAttachment
	endpoints  benchjob.Endpoints
	configMap  *corev1.ConfigMap
	// job is the runner Job of the current generation, nil until created.
	job *batchv1.Job
	// stop ends the reconcile after the current phase.
	stop bool
}

type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// Reconcile runs the phases of a benchmark in order until one stops, and
// writes the status once at the end (skipped when unchanged), recording an
// Event when the phase or its reason changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	b := &fastpathv1alpha1.FastPathBenchmark{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get FastPathBenchmark %s: %w", req, err)
	}
	if !b.DeletionTimestamp.IsZero() {
		// Everything the benchmark made is owned by it and garbage-collected.
		forget(b.Namespace, b.Name)
		return ctrl.Result{}, nil
	}
	before := b.DeepCopy()
	defer func() {
		if perr := r.patchStatus(ctx, before, b); perr != nil {
			err = errors.Join(err, perr)
			return
		}
		recordTransition(r.Recorder, b, &before.Status)
	}()

	s := &scope{bench: b, spec: fastpathv1alpha1.DefaultBenchmarkSpec(b.Spec)}
	s.params = benchjob.Params{
		Name: b.Name, Namespace: b.Namespace, Generation: b.Generation, Spec: s.spec,
		Image: r.RunnerImage, PullPolicy: r.RunnerPullPolicy,
	}
	for _, p := range []phase{
		r.reconcileGeneration,
		r.reconcileStaleChildren,
		r.reconcileFinished,
		r.reconcileSpec,
		r.reconcileRunnerAccess,
		r.lookupJob,
		r.reconcileAttachment,
		r.reconcileEndpoints,
		r.reconcileJob,
		r.reconcileResults,
	} {
		res, err = p(ctx, s)
		if err != nil || s.stop {
			return res, err
		}
	}
	return res, nil
}

// patchStatus writes b's status when it differs from before's.
func (r *Reconciler) patchStatus(ctx context.Context, before, b *fastpathv1alpha1.FastPathBenchmark) error {
	if equality.Semantic.DeepEqual(before.Status, b.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, b, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to patch status of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	return nil
}

// reconcileGeneration starts a new run when the spec changed since the status
// was written (or was never written): the status is reset and the previous
// run's gauges removed.
func (r *Reconciler) reconcileGeneration(_ context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	if b.Status.ObservedGeneration == b.Generation && b.Status.Phase != "" {
		return ctrl.Result{}, nil
	}
	b.Status = fastpathv1alpha1.FastPathBenchmarkStatus{ObservedGeneration: b.Generation, Conditions: b.Status.Conditions}
	setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, "Starting a run of generation "+fmt.Sprint(b.Generation))
	forget(b.Namespace, b.Name)
	return ctrl.Result{}, nil
}

// reconcileStaleChildren deletes the runner Jobs and netserver pods of older
// generations.
func (r *Reconciler) reconcileStaleChildren(ctx context.Context, s *scope) (ctrl.Result, error) {
	gen := fmt.Sprint(s.bench.Generation)
	stale := func(o client.Object) bool { return o.GetLabels()[benchjob.LabelGeneration] != gen }
	return ctrl.Result{}, r.deleteOwned(ctx, s.bench, stale)
}

// deleteOwned deletes the Jobs and Pods the benchmark controls for which match
// returns true. Jobs go with background propagation: their pods follow
// through the garbage collector.
func (r *Reconciler) deleteOwned(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark, match func(client.Object) bool) error {
	sel := client.MatchingLabels{benchjob.LabelBenchmark: benchjob.LabelValue(b.Name)}
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(b.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list Jobs of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(b.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list Pods of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	var objs []client.Object
	for i := range jobs.Items {
		objs = append(objs, &jobs.Items[i])
	}
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	for _, o := range objs {
		if !metav1.IsControlledBy(o, b) || !o.GetDeletionTimestamp().IsZero() || !match(o) {
			continue
		}
		if err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete %T %s: %w", o, klog.KObj(o), err)
		}
		log.FromContext(ctx).Info("Deleted benchmark child", "object", klog.KObj(o), "generation", o.GetLabels()[benchjob.LabelGeneration])
	}
	return nil
}

// reconcileFinished stops a finished run: its netserver pods are deleted and
// its gauges exported; nothing runs again until the spec changes.
func (r *Reconciler) reconcileFinished(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !finished(s.bench) {
		return ctrl.Result{}, nil
	}
	s.stop = true
	observe(s.bench)
	return ctrl.Result{}, r.deleteOwned(ctx, s.bench, func(o client.Object) bool { _, isPod := o.(*corev1.Pod); return isPod })
}

// reconcileSpec rejects what the CRD cannot: tests the controller does not
// run, Pod-mode nodes that differ, and VM pairs without VMs.
func (r *Reconciler) reconcileSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	var problems []string
	if benchjob.HasVSockTests(s.spec) {
		switch {
		case s.spec.Mode != fastpathv1alpha1.BenchmarkModeVM:
			problems = append(problems, "VSOCK_STREAM and VSOCK_RR need spec.mode VM: vsock connects a VM to its host, and pods have no vsock device")
		case benchjob.MaxPairs(s.spec) != 1:
			problems = append(problems, fmt.Sprintf("VSOCK_STREAM and VSOCK_RR measure one pair (a vsock service targets one VM): spec.pairs must be 1, got %d", benchjob.MaxPairs(s.spec)))
		}
	}
	switch s.spec.Mode {
	case fastpathv1alpha1.BenchmarkModePod:
		if _, err := benchjob.PodNode(s.spec); err != nil {
			problems = append(problems, err.Error())
		}
	case fastpathv1alpha1.BenchmarkModeVM:
		if have, want := len(vmPairs(s.spec)), benchjob.MaxPairs(s.spec); have < want {
			problems = append(problems, fmt.Sprintf("spec.pairs %d needs %d client/server VM pairs (2N VMs): spec.client/spec.server plus %d in spec.additionalPairs, got %d", want, want, want-1, have-1))
		}
	}
	if len(problems) == 0 {
		return ctrl.Result{}, nil
	}
	msg := strings.Join(problems, "; ")
	setFailed(s.bench, fastpathv1alpha1.ReasonUnsupported, msg)
	s.stop = true
	return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
}

// reconcileRunnerAccess ensures the results ConfigMap and the runner's
// ServiceAccount, Role and RoleBinding.
func (r *Reconciler) reconcileRunnerAccess(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	cm := benchjob.ResultsConfigMap(b.Name, b.Namespace)
	if err := r.ensure(ctx, b, cm, func(existing, want client.Object) {
		existing.SetLabels(want.GetLabels())
	}); err != nil {
		return ctrl.Result{}, err
	}
	s.configMap = cm
	b.Status.ResultsConfigMap = cm.Name

	sa, role, rb := benchjob.RunnerRBAC(b.Name, b.Namespace)
	if err := r.ensure(ctx, b, sa, func(existing, want client.Object) { existing.SetLabels(want.GetLabels()) }); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensure(ctx, b, role, func(existing, want client.Object) {
		existing.SetLabels(want.GetLabels())
		existing.(*rbacv1.Role).Rules = want.(*rbacv1.Role).Rules
	}); err != nil {
		return ctrl.Result{}, err
	}
	// A RoleBinding's roleRef is immutable; ours never changes.
	if err := r.ensure(ctx, b, rb, func(existing, want client.Object) {
		existing.SetLabels(want.GetLabels())
		existing.(*rbacv1.RoleBinding).Subjects = want.(*rbacv1.RoleBinding).Subjects
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// ensure creates want (owned by b) or updates the existing object with mutate;
// on return obj holds the object as stored.
func (r *Reconciler) ensure(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark, obj client.Object, mutate func(existing, want client.Object)) error {
	want := obj.DeepCopyObject().(client.Object)
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		mutate(obj, want)
		return controllerutil.SetControllerReference(b, obj, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("failed to ensure %T %s: %w", obj, klog.KObj(obj), err)
	}
	if op != controllerutil.OperationResultNone {
		log.FromContext(ctx).Info("Ensured benchmark child", "object", klog.KObj(obj), "operation", op)
	}
	return nil
}

// lookupJob finds the runner Job of this generation: once it exists the run is
// underway, and the attachment and endpoint phases are skipped (a later change
// of the attachment or the VMs does not disturb a running benchmark).
func (r *Reconciler) lookupJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: benchjob.JobName(b.Name, b.Generation)}, job)
	switch {
	case err == nil && metav1.IsControlledBy(job, b):
		s.job = job
		return ctrl.Result{}, nil
	case err == nil:
		setFailed(b, fastpathv1alpha1.ReasonRunnerFailed, fmt.Sprintf("Job %s exists and is not owned by this benchmark: delete it or rename the benchmark", job.Name))
		s.stop = true
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get Job %s/%s: %w", b.Namespace, benchjob.JobName(b.Name, b.Generation), err)
	}
	return ctrl.Result{}, nil
}

// reconcileAttachment waits for the attachment and takes the NAD and MTU from
// it. VM mode needs it Ready (VMs wired, co-located, nodes ready); Pod mode
// measures the node datapath without VMs, so the NetworkAttachmentDefinition
// is all it needs (NetworkAttachmentReady): an attachment that selects no VM
// yet is never Ready, and must not block a Pod-mode benchmark.
func (r *Reconciler) reconcileAttachment(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job != nil {
		return ctrl.Result{}, nil
	}
	b := s.bench
	a := &fastpathv1alpha1.FastPathAttachment{}
	name := s.spec.AttachmentRef.Name
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, a); err != nil {
		if apierrors.IsNotFound(err) {
			setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, fmt.Sprintf("FastPathAttachment %s not found", name))
			s.stop = true
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get FastPathAttachment %s/%s: %w", b.Namespace, name, err)
	}
	needed := fastpathv1alpha1.ReadyCondition
	if s.spec.Mode == fastpathv1alpha1.BenchmarkModePod {
		needed = fastpathv1alpha1.NetworkAttachmentReadyCondition
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, needed); c == nil || c.Status != metav1.ConditionTrue {
		msg := fmt.Sprintf("FastPathAttachment %s is not %s", name, needed)
		if c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, msg)
		s.stop = true
		return ctrl.Result{}, nil
	}
	s.attachment = a
	if !benchjob.HasIPTests(s.spec) {
		return ctrl.Result{}, nil // vsock tests only: no virtio-net path involved
	}
	if a.Spec.Network == nil {
		setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, fmt.Sprintf("FastPathAttachment %s has no spec.network: there is no fast virtio-net path for the TCP tests to measure", name))
		s.stop = true
		return ctrl.Result{}, nil
	}
	s.params.NetworkAttachment = benchjob.NetworkAttachmentRef(a.Namespace, a.Name, a.Status.NetworkAttachmentDefinition)
	s.params.MTU = a.Status.MTU
	if s.params.MTU == 0 {
		s.params.MTU = *fastpathv1alpha1.DefaultAttachmentSpec(a.Spec).Network.MTU
	}
	return ctrl.Result{}, nil
}

// reconcileEndpoints finds every server address (and in VM mode every client
// address and the SSH key), creating the netserver pods in Pod mode. Missing
// ones keep the benchmark Pending with the reason and what is missing.
func (r *Reconciler) reconcileEndpoints(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job != nil {
		return ctrl.Result{}, nil
	}
	var (
		waiting []string
		res     ctrl.Result
		err     error
	)
	reason := fastpathv1alpha1.ReasonEndpointNotFound
	if s.spec.Mode == fastpathv1alpha1.BenchmarkModePod {
		waiting, err = r.podEndpoints(ctx, s)
	} else {
		waiting, err = r.vmEndpoints(ctx, s)
		if err == nil && len(waiting) == 0 {
			reason, waiting, err = r.sshKey(ctx, s)
			if len(waiting) > 0 {
				res.RequeueAfter = r.sshKeyRetry()
			}
		}
	}
	if err != nil || s.stop {
		return ctrl.Result{}, err
	}
	if len(waiting) > 0 {
		if len(waiting) > maxReasons {
			waiting = append(waiting[:maxReasons], fmt.Sprintf("and %d more", len(waiting)-maxReasons))
		}
		setPending(s.bench, reason, "Waiting for endpoints: "+strings.Join(waiting, "; "))
		s.stop = true
	}
	return res, nil
}

func (r *Reconciler) sshKeyRetry() time.Duration {
	if r.SSHKeyRetry > 0 {
		return r.SSHKeyRetry
	}
	return DefaultSSHKeyRetry
}

// podEndpoints ensures the netserver pods and reads their addresses. A failed
// netserver pod fails the benchmark (NetserverUnreachable).
func (r *Reconciler) podEndpoints(ctx context.Context, s *scope) ([]string, error) {
	want, err := benchjob.ServerPods(s.params)
	if err != nil { // reconcileSpec has rejected such specs already
		return nil, fmt.Errorf("failed to render the netserver pods of FastPathBenchmark %s: %w", klog.KObj(s.bench), err)
	}
	var waiting []string
	s.endpoints = benchjob.Endpoints{}
	for _, pod := range want {
		if err := controllerutil.SetControllerReference(s.bench, pod, r.Scheme); err != nil {
			return nil, fmt.Errorf("failed to own Pod %s: %w", klog.KObj(pod), err)
		}
		got := &corev1.Pod{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
		switch {
		case apierrors.IsNotFound(err):
			if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("failed to create netserver Pod %s: %w", klog.KObj(pod), err)
			}
			log.FromContext(ctx).Info("Created netserver pod", "pod", klog.KObj(pod))
			waiting = append(waiting, fmt.Sprintf("pod %s created", pod.Name))
			continue
		case err != nil:
			return nil, fmt.Errorf("failed to get netserver Pod %s: %w", klog.KObj(pod), err)
		case !got.DeletionTimestamp.IsZero() || got.Labels[benchjob.LabelGeneration] != pod.Labels[benchjob.LabelGeneration]:
			waiting = append(waiting, fmt.Sprintf("pod %s of an earlier run is terminating", got.Name))
			continue
		case got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded:
			setFailed(s.bench, fastpathv1alpha1.ReasonNetserverUnreachable, fmt.Sprintf("netserver pod %s ended (phase %s): %s", got.Name, got.Status.Phase, got.Status.Message))
			s.stop = true
			return nil, nil
		}
		path := got.Labels[benchjob.LabelPath]
		addr, why := benchjob.ServerAddress(got, path, s.params.NetworkAttachment)
		if addr == "" {
			waiting = append(waiting, why)
			continue
		}
		if path == benchjob.PathFastPath {
			s.endpoints.FastPath = append(s.endpoints.FastPath, addr)
		} else {
			s.endpoints.Baseline = append(s.endpoints.Baseline, addr)
		}
	}
	return waiting, nil
}

// vmEndpoints reads the server VMs' fast-path and pod-network addresses and the
// client VMs' pod-network addresses from their VMIs. Each VM must be selected
// by the attachment (status.vms).
func (r *Reconciler) vmEndpoints(ctx context.Context, s *scope) ([]string, error) {
	selected := map[string]bool{}
	for _, vm := range s.attachment.Status.VMs {
		selected[vm.Name] = true
	}
	network := fastpathv1alpha1.NetworkName(s.attachment.Name)
	ip, vs := benchjob.HasIPTests(s.spec), benchjob.HasVSockTests(s.spec)
	baseline := ip && s.spec.Baseline != fastpathv1alpha1.BaselineNone
	var waiting []string
	s.endpoints = benchjob.Endpoints{}
	if vs {
		s.endpoints.VSock = &benchjob.RunnerVSock{}
		// reconcileSpec allows one pair with vsock tests: its server VM.
		server := s.spec.Server.VM
		i := slices.IndexFunc(s.attachment.Status.VSOCKServices, func(v fastpathv1alpha1.VSOCKServiceStatus) bool { return v.VM == server && v.RelayPort > 0 })
		if i < 0 {
			waiting = append(waiting, fmt.Sprintf("no vsock service of FastPathAttachment %s with a relay port targets the server VM %s (add one to its spec.vsock.services)", s.attachment.Name, server))
		} else {
			svc := s.attachment.Status.VSOCKServices[i]
			s.endpoints.VSock.RelayPort, s.endpoints.VSock.ServicePort = svc.RelayPort, svc.Port
		}
	}
	for i, p := range vmPairs(s.spec)[:benchjob.MaxPairs(s.spec)] {
		for _, side := range []struct {
			vm     string
			server bool
		}{{p.Client, false}, {p.Server, true}} {
			role := fmt.Sprintf("client of pair %d", i+1)
			if side.server {
				role = fmt.Sprintf("server of pair %d", i+1)
			}
			if !selected[side.vm] {
				waiting = append(waiting, fmt.Sprintf("VM %s (%s) is not selected by FastPathAttachment %s", side.vm, role, s.attachment.Name))
				continue
			}
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.bench.Namespace, Name: side.vm}, vmi); err != nil {
				if apierrors.IsNotFound(err) {
					waiting = append(waiting, fmt.Sprintf("VM %s (%s) has no VirtualMachineInstance: it is not running", side.vm, role))
					continue
				}
				return nil, fmt.Errorf("failed to get VirtualMachineInstance %s/%s: %w", s.bench.Namespace, side.vm, err)
			}
			fast, pod := benchjob.VMIAddresses(vmi, network)
			if ip && side.server && fast == "" {
				waiting = append(waiting, fmt.Sprintf("VMI %s (%s) reports no address on interface %s", side.vm, role, network))
			}
			if (!side.server || baseline || vs) && pod == "" {
				waiting = append(waiting, fmt.Sprintf("VMI %s (%s) reports no pod-network address (interface %s)", side.vm, role, benchjob.PodNetworkInterface))
			}
			switch {
			case !side.server:
				s.endpoints.SSHClients = append(s.endpoints.SSHClients, pod)
			default:
				if ip {
					s.endpoints.FastPath = append(s.endpoints.FastPath, fast)
				}
				if baseline {
					s.endpoints.Baseline = append(s.endpoints.Baseline, pod)
				}
				if vs {
					s.endpoints.VSock.Servers = append(s.endpoints.VSock.Servers, pod)
				}
			}
		}
	}
	return waiting, nil
}

// sshKey checks (uncached) that the Secret of spec.sshKeySecretRef exists with
// key ssh-privatekey.
func (r *Reconciler) sshKey(ctx context.Context, s *scope) (string, []string, error) {
	ref := s.spec.SSHKeySecretRef
	if ref == nil { // the CRD requires it in VM mode
		return fastpathv1alpha1.ReasonSSHKeyMissing, []string{"spec.sshKeySecretRef is not set"}, nil
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.bench.Namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return fastpathv1alpha1.ReasonSSHKeyMissing, []string{fmt.Sprintf("Secret %s (spec.sshKeySecretRef) not found", ref.Name)}, nil
		}
		return "", nil, fmt.Errorf("failed to get Secret %s/%s: %w", s.bench.Namespace, ref.Name, err)
	}
	if len(sec.Data[benchjob.SSHKeyFile]) == 0 {
		return fastpathv1alpha1.ReasonSSHKeyMissing, []string{fmt.Sprintf("Secret %s has no key %s", ref.Name, benchjob.SSHKeyFile)}, nil
	}
	return "", nil, nil
}

// reconcileJob creates the runner Job once every endpoint is known (clearing
// what an earlier run left in the ConfigMap), and reports it Running.
func (r *Reconciler) reconcileJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	if s.job == nil {
		job, err := benchjob.RunnerJob(s.params, s.endpoints)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to render the runner Job of FastPathBenchmark %s: %w", klog.KObj(b), err)
		}
		if err := controllerutil.SetControllerReference(b, job, r.Scheme); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to own Job %s: %w", klog.KObj(job), err)
		}
		if err := r.clearResults(ctx, s.configMap, job.Name); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("failed to create Job %s: %w", klog.KObj(job), err)
		}
		log.FromContext(ctx).Info("Created runner job", "job", klog.KObj(job))
		s.job = job
		now := metav1.Now()
		b.Status.StartTime = &now
	}
	job := s.job
	b.Status.JobName = job.Name
	if b.Status.StartTime == nil {
		start := job.CreationTimestamp
		if job.Status.StartTime != nil {
			start = *job.Status.StartTime
		}
		b.Status.StartTime = &start
	}
	paths := benchjob.Paths(s.spec)
	plan := fmt.Sprintf("%d points × %d repetitions on %s (%d runs), %s per run", benchjob.PointCount(s.spec), *s.spec.Repetitions, strings.Join(paths, ", "), benchjob.RunCount(s.spec), benchjob.WholeSeconds(s.spec.Duration.Duration))
	if job.Status.Active > 0 {
		setRunning(b, fastpathv1alpha1.ReasonJobRunning, fmt.Sprintf("Job %s is running: %s", job.Name, plan))
	} else {
		setRunning(b, fastpathv1alpha1.ReasonJobCreated, fmt.Sprintf("Job %s created: %s", job.Name, plan))
	}
	return ctrl.Result{}, nil
}

// clearResults empties the ConfigMap's data if it holds the outcome of another
// run than runID.
func (r *Reconciler) clearResults(ctx context.Context, cm *corev1.ConfigMap, runID string) error {
	if len(cm.Data) == 0 && len(cm.BinaryData) == 0 || cm.Data[benchjob.RunIDKey] == runID {
		return nil
	}
	cm.Data, cm.BinaryData = nil, nil
	if err := r.Client.Update(ctx, cm); err != nil {
		return fmt.Errorf("failed to clear ConfigMap %s: %w", klog.KObj(cm), err)
	}
	return nil
}

// reconcileResults reads the runner's outcome from the ConfigMap and finishes
// the run: Succeeded or Failed by the criteria, or Failed with the runner's
// reason. A Job that ended without writing anything fails the run too.
func (r *Reconciler) reconcileResults(ctx context.Context, s *scope) (ctrl.Result, error) {
	b, job := s.bench, s.job
	ended, endMsg := jobEnded(job)
	cm := s.configMap
	if ended && cm.Data[benchjob.RunIDKey] != job.Name {
		// The runner writes the ConfigMap before it exits; the cache may not have
		// seen that write yet.
		fresh := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), fresh); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to get ConfigMap %s: %w", klog.KObj(cm), err)
		}
		cm = fresh
	}
	data := cm.Data
	switch {
	case data[benchjob.RunIDKey] != job.Name:
		if !ended {
			return ctrl.Result{}, nil
		}
		r.finish(ctx, s, fastpathv1alpha1.ReasonRunnerFailed, fmt.Sprintf("Job %s %s without writing results to ConfigMap %s; see `kubectl logs job/%s`", job.Name, endMsg, cm.Name, job.Name))
	case data[benchjob.ErrorKey] != "" || data[benchjob.ErrorReasonKey] != "":
		reason := data[benchjob.ErrorReasonKey]
		msg := data[benchjob.ErrorKey]
		if reason != fastpathv1alpha1.ReasonNetserverUnreachable && reason != fastpathv1alpha1.ReasonRunnerFailed {
			if reason != "" {
				msg = reason + ": " + msg
			}
			reason = fastpathv1alpha1.ReasonRunnerFailed
		}
		r.finish(ctx, s, reason, fmt.Sprintf("Runner %s failed: %s", job.Name, msg))
	case data[benchjob.ResultsKey] == "":
		r.finish(ctx, s, fastpathv1alpha1.ReasonResultsInvalid, fmt.Sprintf("Runner %s wrote neither %s nor %s to ConfigMap %s", job.Name, benchjob.ResultsKey, benchjob.ErrorKey, cm.Name))
	default:
		doc, err := results.Decode(strings.NewReader(data[benchjob.ResultsKey]))
		if err != nil {
			r.finish(ctx, s, fastpathv1alpha1.ReasonResultsInvalid, fmt.Sprintf("%s in ConfigMap %s: %v", benchjob.ResultsKey, cm.Name, err))
			break
		}
		sum := benchresults.Summarize(doc)
		b.Status.BestGbps, b.Status.Speedup = sum.BestGbps, sum.Speedup
		b.Status.Paths, b.Status.Points = sum.Paths, sum.Points
		met, msg := benchresults.Evaluate(sum, s.spec.SuccessCriteria)
		if sum.TotalPoints > len(sum.Points) {
			msg += fmt.Sprintf(" (status shows %d of %d points; all are in ConfigMap %s)", len(sum.Points), sum.TotalPoints, cm.Name)
		}
		if met {
			r.finish(ctx, s, fastpathv1alpha1.ReasonCriteriaMet, msg)
		} else {
			r.finish(ctx, s, fastpathv1alpha1.ReasonThresholdNotMet, msg)
		}
	}
	return ctrl.Result{}, r.deleteOwned(ctx, b, func(o client.Object) bool { _, isPod := o.(*corev1.Pod); return isPod })
}

// finish ends the run with reason (CriteriaMet succeeds, anything else fails).
func (r *Reconciler) finish(ctx context.Context, s *scope, reason, msg string) {
	now := metav1.Now()
	s.bench.Status.CompletionTime = &now
	if reason == fastpathv1alpha1.ReasonCriteriaMet {
		setSucceeded(s.bench, msg)
	} else {
		setFailed(s.bench, reason, msg)
	}
	observe(s.bench)
	log.FromContext(ctx).Info("Benchmark finished", "phase", s.bench.Status.Phase, "reason", reason, "bestGbps", s.bench.Status.BestGbps, "speedup", s.bench.Status.Speedup)
}

// jobEnded reports whether the Job has finished (condition Complete or Failed)
// and says how, e.g. "failed (DeadlineExceeded: Job was active longer than
// specified deadline)".
func jobEnded(job *batchv1.Job) (bool, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "completed"
		case batchv1.JobFailed:
			return true, fmt.Sprintf("failed (%s: %s)", c.Reason, c.Message)
		}
	}
	return false, ""
}
