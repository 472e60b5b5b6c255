package attachment

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/platform/phases"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// ControllerName names the controller (metrics, logs) and its event recorder.
const ControllerName = "fastpathattachment"

// DefaultWiringWorkers is how many VMs one reconcile patches at once.
const DefaultWiringWorkers = 8

// Default client-side rate limits of fastpath-operator (--kube-api-qps,
// --kube-api-burst): at 50 requests/s a reconcile wires about 50 VMs a second
// after the first burst of 100; the scale benchmark measures both this and an
// unthrottled client.
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
)

// Options configure the reconciler; cmd/fastpath-operator fills them from flags.
type Options struct {
	// PodNetworkCIDRs are the cluster's pod networks (--pod-network-cidr); an
	// attachment subnet overlapping one is InvalidSpec. Empty: no check.
	PodNetworkCIDRs []netip.Prefix
	// RelayPorts is the host vsock port range of relay ports
	// (--relay-port-range); zero means DefaultRelayPortRange.
	RelayPorts PortRange
	// RelayPortsPerNamespace caps the relay ports of one namespace's
	// attachments (--relay-ports-per-namespace); zero means
	// DefaultRelayPortsPerNamespace.
	RelayPortsPerNamespace int
	// WiringWorkers bounds the concurrent VM patches of one reconcile; zero
	// means DefaultWiringWorkers.
	WiringWorkers int
	// Bindings are the names under which the KubeVirt CR registers
	// Fastpath's network binding plugins (--binding, --macvtap-binding;
	// package bindingplugin), which the fast-path interfaces are wired with;
	// an empty name means wiring.DefaultBinding or
	// wiring.DefaultMacvtapBinding. The controller wires no VM while the
	// plugin its datapath needs is not registered (VMsWired False,
	// BindingPluginNotRegistered).
	Bindings kubevirtcr.Names
	// KubeVirtAbsent is true when the API server serves no kubevirt.io/v1
	// VirtualMachines (KubeVirt is not installed): the controller then
	// watches no VMs or VMIs and every attachment selects none (VMsWired
	// False, NoVMsSelected, saying why), while NADs are still rendered (Pod-mode
	// benchmarks need only those). cmd/fastpath-operator restarts the operator
	// when KubeVirt's API appears.
	KubeVirtAbsent bool
}

// Reconciler reconciles FastPathAttachments. Fill in what the defaults do not
// give and call SetupWithManager, which fills the rest:
//
//	(&attachment.Reconciler{Options: opts}).SetupWithManager(ctx, mgr, controller.Options{})
type Reconciler struct {
	// Client writes; nil: the manager's client.
	Client client.Client
	// Cache reads from the informer cache, typed and unstructured objects
	// alike (the manager's client reads unstructured objects past the
	// cache); nil: the manager's cache.
	Cache client.Reader
	// APIReader reads VMs past the cache after a conflict and on deletion;
	// nil: the manager's API reader.
	APIReader client.Reader
	// Recorder records Events; nil: the manager's recorder named ControllerName.
	Recorder record.EventRecorder
	// Options are the operator's settings of this controller.
	Options

	ports   *portAllocator
	metrics *metricsRecorder
}

// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathattachments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathattachments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathattachments/finalizers,verbs=update
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=kubevirts,verbs=get;list;watch
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager fills the Reconciler's unset clients from mgr and its
// unset options with the defaults (DefaultRelayPortRange,
// DefaultRelayPortsPerNamespace, DefaultWiringWorkers), and registers the controller and its watches.
// options are passed to the controller (e.g. MaxConcurrentReconciles, or
// SkipNameValidation for tests that start several managers in one process).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Cache == nil {
		r.Cache = mgr.GetCache()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(ControllerName)
	}
	if r.Bindings.Bridge == "" {
		r.Bindings.Bridge = wiring.DefaultBinding
	}
	if r.Bindings.Macvtap == "" {
		r.Bindings.Macvtap = wiring.DefaultMacvtapBinding
	}
	if r.RelayPorts == (PortRange{}) {
		r.RelayPorts = DefaultRelayPortRange
	}
	if r.WiringWorkers <= 0 {
		r.WiringWorkers = DefaultWiringWorkers
	}
	if r.RelayPortsPerNamespace <= 0 {
		r.RelayPortsPerNamespace = DefaultRelayPortsPerNamespace
	}
	r.ports = newPortAllocator(r.RelayPorts, r.RelayPortsPerNamespace)
	r.metrics = newMetricsRecorder()

	if options.RateLimiter == nil {
		options.RateLimiter = phases.RateLimiter() // failed reconciles retry within phases.MaxRetryDelay
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.FastPathAttachment{}).
		Watches(&v1alpha1.FastPathAttachment{}, handler.EnqueueRequestsFromMapFunc(r.siblingAttachments),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.FastPathAttachment{}, handler.EnqueueRequestsFromMapFunc(r.overlappingAttachments),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&nadv1.NetworkAttachmentDefinition{}, handler.EnqueueRequestsFromMapFunc(sameName))
	if !r.KubeVirtAbsent {
		vm := &unstructured.Unstructured{}
		vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
		b = b.Watches(vm, handler.EnqueueRequestsFromMapFunc(r.attachmentsForVM),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
				predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
			Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForVMI)).
			Watches(&kubevirtv1.VirtualMachineInstanceMigration{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForMigration))
		kv := &unstructured.Unstructured{}
		kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
		b = b.Watches(kv, handler.EnqueueRequestsFromMapFunc(r.allAttachments),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	err := b.Watches(&v1alpha1.FastPathNode{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForNode)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForNode),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: nodeSchedulingChanged})).
		Watches(&v1alpha1.FastPathNetwork{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForNetwork),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, tunedDefaultChanged))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.attachmentsForNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(options).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the %s controller: %w", ControllerName, err)
	}
	return setupNetworkUsage(mgr, r.Client, r.Cache, options)
}

// Reconcile brings one FastPathAttachment's NAD, VM wiring and status in line
// with its spec: get it, ensure the finalizer, defer the one status patch,
// then delete or run the phases.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	att := &v1alpha1.FastPathAttachment{}
	if err := r.Cache.Get(ctx, req.NamespacedName, att); err != nil {
		if apierrors.IsNotFound(err) {
			r.ports.release(req.String())
			r.metrics.forget(req.NamespacedName)
			return ctrl.Result{}, r.unwireOrphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("failed to get FastPathAttachment %s: %w", req, err)
	}
	if att.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(att, v1alpha1.Finalizer) {
		base := att.DeepCopy()
		controllerutil.AddFinalizer(att, v1alpha1.Finalizer)
		if err := r.Client.Patch(ctx, att, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer to FastPathAttachment %s: %w", req, err)
		}
	}

	s := newScope(att)
	defer func() {
		if err := r.patchStatus(ctx, s); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !att.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return phases.Run(ctx, s, []phases.Phase[*scope]{
		r.reconcileSpec,
		r.reconcileSelection,
		r.reconcileNetwork,
		r.reconcileWiring,
		r.reconcileObservation,
		r.reconcileMove,
		r.reconcileVSOCK,
		r.reconcileNodes,
	}...)
}

// nodeSchedulingChanged passes the Node updates a group move's target
// choice reads (cordon, taints, labels, readiness, allocatable), not the
// kubelet's periodic status writes.
func nodeSchedulingChanged(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Node)
	n, ok2 := e.ObjectNew.(*corev1.Node)
	if !ok1 || !ok2 {
		return true
	}
	ready := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
	return o.Spec.Unschedulable != n.Spec.Unschedulable || !equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) || ready(o) != ready(n) || !equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
}

func sameName(_ context.Context, obj client.Object) []ctrl.Request {
	return []ctrl.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
}
