package attachment

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// UsageControllerName names the controller that keeps a FastPathNetwork's
// status.inUse.
const UsageControllerName = ControllerName + "-network-usage"

// networkUsage keeps each FastPathNetwork's status.inUse true exactly while
// a FastPathAttachment's status.network names it. The CRD refuses a change
// of spec.bridge while it is true (issue 39, item 6): the running VMs of
// those attachments are on the bridge. It writes only when inUse turns, so
// that it rarely races the tuning controller's status patches.
type networkUsage struct {
	client client.Client
	cache  client.Reader
}

// setupNetworkUsage registers the networkUsage controller: it reconciles a
// network when it changes and when an attachment's status.network leaves
// or reaches it (the map runs on both the old and the new attachment).
func setupNetworkUsage(mgr ctrl.Manager, c client.Client, cache client.Reader, options controller.Options) error {
	u := &networkUsage{client: c, cache: cache}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(UsageControllerName).
		For(&v1alpha1.FastPathNetwork{}).
		Watches(&v1alpha1.FastPathAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			if a, ok := o.(*v1alpha1.FastPathAttachment); ok && a.Status.Network != "" {
				return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: a.Status.Network}}}
			}
			return nil
		})).
		WithOptions(controller.Options{SkipNameValidation: options.SkipNameValidation}).
		Complete(u)
	if err != nil {
		return fmt.Errorf("failed to set up the %s controller: %w", UsageControllerName, err)
	}
	return nil
}

// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnetworks/status,verbs=get;update;patch

// Reconcile looks for an attachment on network req and patches
// status.inUse when it differs.
func (u *networkUsage) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	net := &v1alpha1.FastPathNetwork{}
	if err := u.cache.Get(ctx, req.NamespacedName, net); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	list := &v1alpha1.FastPathAttachmentList{}
	if err := u.cache.List(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	inUse := slices.ContainsFunc(list.Items, func(a v1alpha1.FastPathAttachment) bool { return a.Status.Network == net.Name })
	if net.Status.InUse == inUse {
		return ctrl.Result{}, nil
	}
	// A merge patch of this one field, without a resourceVersion: it comes
	// from the attachments, not from the network read.
	before := net.DeepCopy()
	net.Status.InUse = inUse
	if err := u.client.Status().Patch(ctx, net, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to patch status.inUse of FastPathNetwork %s: %w", net.Name, err)
	}
	return ctrl.Result{}, nil
}
