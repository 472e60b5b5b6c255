package benchmark

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/platform/phases"
)

// DefaultSSHKeyRetry is how often a VM-mode benchmark looks for its SSH key
// Secret while it is missing (Secrets are read uncached and not watched, so the
// operator does not cache every Secret of the cluster).
const DefaultSSHKeyRetry = 30 * time.Second

// ControllerName names the controller (metrics, logs) and its event recorder
// (the source of its Events).
const ControllerName = "fastpathbenchmark"

// Reconciler reconciles FastPathBenchmark objects. Fill in RunnerImage (and
// what the defaults do not give) and call SetupWithManager, which fills the
// rest:
//
//	(&benchmark.Reconciler{RunnerImage: image}).SetupWithManager(ctx, mgr, controller.Options{})
type Reconciler struct {
	// Client reads from the cache and writes; its scheme sets owner
	// references. nil: the manager's client.
	Client client.Client
	// APIReader reads uncached: the SSH key Secret, and the results ConfigMap
	// once the Job has ended (so a lagging cache is not taken for "no results").
	// nil: the manager's API reader.
	APIReader client.Reader
	// Recorder records Events; nil: the manager's recorder named ControllerName.
	Recorder record.EventRecorder
	// RunnerImage is the image of the runner Job and the netserver pods: it has
	// fastpath-bench, netperf, netserver and an OpenSSH client (the operator's
	// --runner-image flag). Required.
	RunnerImage string
	// RunnerPullPolicy of RunnerImage; empty leaves the Kubernetes default.
	RunnerPullPolicy corev1.PullPolicy
	// KubeVirtAbsent is true when the API server serves no kubevirt.io/v1
	// VirtualMachineInstances: no VMI watch (VM-mode benchmarks then wait for
	// an attachment that cannot be Ready; Pod mode runs).
	KubeVirtAbsent bool
	// SSHKeyRetry overrides DefaultSSHKeyRetry when positive.
	SSHKeyRetry time.Duration
	// AgentHostCPUPort is the port of the node agents' host CPU endpoint
	// (the operator's --agent-host-cpu-port, chart agent.hostCPU.port); 0:
	// VM-mode runs measure no host CPU.
	AgentHostCPUPort int32
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
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager fills the Reconciler's unset fields from mgr, registers
// the field indexes it needs and the controller "fastpathbenchmark", which
// watches FastPathBenchmarks, the Jobs and Pods they own, the ConfigMaps,
// ServiceAccounts, Roles and RoleBindings named as their runner objects
// (owned or not), FastPathAttachments and VMIs. options are
// passed to the controller. It fails when RunnerImage is empty or an index
// cannot be registered.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.RunnerImage == "" {
		return fmt.Errorf("failed to set up the FastPathBenchmark controller: no runner image")
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(ControllerName)
	}
	if err := indexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if options.RateLimiter == nil {
		options.RateLimiter = phases.RateLimiter() // failed reconciles retry within phases.MaxRetryDelay
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&fastpathv1alpha1.FastPathBenchmark{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Pod{}).
		// By name rather than by owner: a benchmark refused an object it
		// does not control (RunnerObjectConflict) must hear of its deletion.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.mapConfigMap)).
		Watches(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(r.mapRunnerObject)).
		Watches(&rbacv1.Role{}, handler.EnqueueRequestsFromMapFunc(r.mapRunnerObject)).
		Watches(&rbacv1.RoleBinding{}, handler.EnqueueRequestsFromMapFunc(r.mapRunnerObject)).
		Watches(&fastpathv1alpha1.FastPathAttachment{}, handler.EnqueueRequestsFromMapFunc(r.mapBy(indexAttachment))).
		// A run waiting for the run of its spec.compareTo.
		Watches(&fastpathv1alpha1.FastPathBenchmark{}, handler.EnqueueRequestsFromMapFunc(r.mapBy(indexCompareToBenchmark)))
	if !r.KubeVirtAbsent {
		b = b.Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.mapBy(indexVM)))
	}
	return b.WithOptions(options).Complete(r)
}

// scope is what the phases of one reconcile share.
type scope struct {
	// bench is the benchmark whose status the phases fill; base is it as read.
	bench *fastpathv1alpha1.FastPathBenchmark
	base  *fastpathv1alpha1.FastPathBenchmark
	// spec is bench.Spec after DefaultBenchmarkSpec.
	spec       fastpathv1alpha1.FastPathBenchmarkSpec
	params     benchjob.Params
	attachment *fastpathv1alpha1.FastPathAttachment
	endpoints  benchjob.Endpoints
	configMap  *corev1.ConfigMap
	// job is the runner Job of the current generation, nil until created.
	job *batchv1.Job
	// stop ends the reconcile after the current phase without an error: the
	// status says why, and a watch (or RequeueAfter) brings the benchmark back.
	stop bool
}

// Stopped reports whether a phase ended the reconcile early (phases.Stopper).
func (s *scope) Stopped() bool { return s.stop }

func (r *Reconciler) newScope(b *fastpathv1alpha1.FastPathBenchmark) *scope {
	s := &scope{bench: b, base: b.DeepCopy(), spec: fastpathv1alpha1.DefaultBenchmarkSpec(b.Spec)}
	s.params = benchjob.Params{
		Name: b.Name, Namespace: b.Namespace, Generation: b.Generation, Spec: s.spec,
		Image: r.RunnerImage, PullPolicy: r.RunnerPullPolicy,
	}
	return s
}

// Reconcile runs the phases of a benchmark in order until one stops, and
// writes the status once at the end (skipped when unchanged), recording an
// Event when the phase or its reason changed. A benchmark has no finalizer:
// everything it made is owned by it and garbage-collected.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	b := &fastpathv1alpha1.FastPathBenchmark{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get FastPathBenchmark %s: %w", req, err)
	}

	s := r.newScope(b)
	defer func() {
		if err := r.patchStatus(ctx, s); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !b.DeletionTimestamp.IsZero() {
		forget(b.Namespace, b.Name)
		return ctrl.Result{}, nil
	}
	return phases.Run(ctx, s, []phases.Phase[*scope]{
		r.reconcileGeneration,
		r.reconcileStaleChildren,
		r.reconcileFinished,
		r.reconcileSpec,
		r.reconcileRunnerAccess,
		r.lookupJob,
		r.reconcileCompareTo,
		r.reconcileAttachment,
		r.reconcileEndpoints,
		r.reconcileJob,
		r.reconcileResults,
	}...)
}

// patchStatus writes the benchmark's status once, when it changed, and
// records an Event when the phase or its deciding reason changed.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	b := s.bench
	if equality.Semantic.DeepEqual(s.base.Status, b.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, b, client.MergeFrom(s.base)); err != nil {
		return fmt.Errorf("failed to patch status of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	recordTransition(r.Recorder, b, &s.base.Status)
	return nil
}
