package bindingplugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
)

// ControllerName names the controller in logs, metrics and Events.
const ControllerName = "bindingplugin"

// ReasonRegistered is the Event reason on the KubeVirt CR when the operator
// wrote the plugins into it.
const ReasonRegistered = "BindingPluginsRegistered"

// Reconciler keeps Plugins registered in the KubeVirt CR KubeVirt.
type Reconciler struct {
	// Client patches the KubeVirt CR and reads it; nil: the manager's client.
	Client client.Client
	// Recorder records Events; nil: the manager's recorder named ControllerName.
	Recorder record.EventRecorder
	// KubeVirt is the KubeVirt CR to register in.
	KubeVirt types.NamespacedName
	// Plugins are the entries (kubevirtcr.Plugins).
	Plugins map[string]kubevirtv1.InterfaceBindingPlugin
}

// SetupWithManager registers the controller; it reconciles only the CR
// r.KubeVirt, when the operator starts and when the CR is created.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(ControllerName)
	}
	if len(r.Plugins) == 0 {
		return fmt.Errorf("failed to set up the %s controller: no plugins to register", ControllerName)
	}
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		// Create events only: the operator's start (the informer's initial
		// list) and the CR's creation. An update that removed the entries is
		// an admin's act, or the chart's pre-delete hook while this operator
		// still runs: writing them back would undo it.
		For(kv, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return r.isOurs(e.Object) },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
	if err != nil {
		return fmt.Errorf("failed to set up the %s controller: %w", ControllerName, err)
	}
	return nil
}

func (r *Reconciler) isOurs(o client.Object) bool {
	return o.GetNamespace() == r.KubeVirt.Namespace && o.GetName() == r.KubeVirt.Name
}

// Reconcile writes the plugins into the KubeVirt CR when one of them is
// missing or differs; a merge patch leaves every other field alone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
	if err := r.Client.Get(ctx, req.NamespacedName, kv); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // registered when it appears
		}
		return ctrl.Result{}, err
	}
	if kubevirtcr.Registered(kv, r.Plugins) {
		return ctrl.Result{}, nil
	}
	if err := kubevirtcr.Register(ctx, r.Client, req.NamespacedName, r.Plugins); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Registered the network binding plugins", "plugins", kubevirtcr.SortedNames(r.Plugins))
	r.Recorder.Eventf(kv, corev1.EventTypeNormal, ReasonRegistered, "fastpath-operator registered the network binding plugins %v under %s",
		kubevirtcr.SortedNames(r.Plugins), kubevirtcr.BindingField("<name>"))
	return ctrl.Result{}, nil
}
