package nodeagent

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/platform/phases"
)

// ControllerName names the agent's controller in logs and metrics.
const ControllerName = "fastpath-agent"

// SetupWithManager fills the Reconciler's unset clients from mgr and
// registers the reconciler: the start of the controller, every
// FastPathAttachment event that changes what the node needs (spec, or
// status.vsockServices) and every event of this node's FastPathNode enqueue
// the one request named after the node. options are passed to the
// controller. It fails when a required field is missing.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := r.validate(); err != nil {
		return err
	}
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.NodeName}}}
	})
	// Only creation and deletion of this node's FastPathNode matter: its
	// updates are (nearly always) the agent's own status patches, and a
	// status edited by someone else is rewritten at the next resync.
	thisNode := predicate.And(
		predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.NodeName }),
		predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }},
	)
	// The first reconcile must not wait for an event: on a cluster without
	// attachments and without this node's FastPathNode there is none.
	atStart := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}})
		return nil
	})
	if options.RateLimiter == nil {
		options.RateLimiter = phases.RateLimiter() // failed reconciles retry within phases.MaxRetryDelay
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesRawSource(atStart)
	if r.SiblingChanges != nil {
		b = b.WatchesRawSource(source.Channel(r.SiblingChanges, toNode))
	}
	return b.
		Watches(&fastpathv1alpha1.FastPathAttachment{}, toNode, builder.WithPredicates(attachmentChanged())).
		Watches(&fastpathv1alpha1.FastPathNode{}, toNode, builder.WithPredicates(thisNode)).
		// virt-launcher pods bound to this node: a Sibling group runs where
		// a member VM is being started (SiblingPlacement).
		Watches(&corev1.Pod{}, toNode, builder.WithPredicates(launcherEvents(r.NodeName))).
		Watches(&fastpathv1alpha1.FastPathNetwork{}, toNode, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(options).
		Complete(r)
}

func (r *Reconciler) validate() error {
	var errs []error
	if r.Client == nil {
		errs = append(errs, errors.New("a client is required"))
	}
	if r.NodeName == "" {
		errs = append(errs, errors.New("a node name is required"))
	}
	if r.Prober == nil {
		errs = append(errs, errors.New("a prober is required"))
	}
	if r.Bridges == nil {
		errs = append(errs, errors.New("a bridge manager is required"))
	}
	if r.Relay == nil {
		errs = append(errs, errors.New("a relay is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(errors.New("failed to set up the node agent"), err)
	}
	return nil
}

// siblingNodes lists "<vm>=<node>" of a's VMs in vsock mode Sibling: where
// they run decides where their group runs (SiblingPlacement).
func siblingNodes(a *fastpathv1alpha1.FastPathAttachment) []string {
	var out []string
	for _, vm := range a.Status.VMs {
		if vm.VSOCKMode == fastpathv1alpha1.VSOCKModeSibling {
			out = append(out, vm.Name+"="+vm.Node)
		}
	}
	return out
}

// attachmentChanged passes creations, deletions and updates that change the
// spec (metadata.generation), status.vsockServices, the Sibling group
// (status.vms[].cid in vsock mode Sibling) or where its VMs run; the operator's other
// status updates do not change what the node needs.
func attachmentChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*fastpathv1alpha1.FastPathAttachment)
			n, ok2 := e.ObjectNew.(*fastpathv1alpha1.FastPathAttachment)
			if !ok1 || !ok2 {
				return true
			}
			return o.Generation != n.Generation ||
				!equality.Semantic.DeepEqual(o.Status.VSOCKServices, n.Status.VSOCKServices) ||
				!equality.Semantic.DeepEqual(SiblingGroups([]fastpathv1alpha1.FastPathAttachment{*o}, ""), SiblingGroups([]fastpathv1alpha1.FastPathAttachment{*n}, "")) ||
				!slices.Equal(siblingNodes(o), siblingNodes(n))
		},
	}
}

// CacheOptions are the manager cache options of the agent: of all
// FastPathNodes only this node's is cached (and watched), so an agent's memory
// and watch traffic do not grow with the cluster. FastPathAttachments are
// cached cluster-wide.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&fastpathv1alpha1.FastPathNode{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
		// Only this node's pods (the virt-launchers of SiblingPlacement).
		&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
	}}
}
