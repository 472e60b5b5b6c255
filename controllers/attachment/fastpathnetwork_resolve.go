package attachment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// Admin-owned networks (issue 17): an attachment's spec.network lands on the
// cluster-scoped FastPathNetwork of spec.networkRef (or the default network),
// which must admit the attachment's namespace and whose bounds the spec must
// respect.

// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnetworks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// resolveNetwork returns the attachment's spec resolved on its
// FastPathNetwork (v1alpha1.ResolveNetwork). A refusal is a spec error naming
// the field: the attachment's NetworkAttachmentDefinition, when it has one, is
// deleted so that no new pod attaches, and the returned error is terminal (a
// watch on FastPathNetworks and Namespaces brings the attachment back).
func (r *Reconciler) resolveNetwork(ctx context.Context, s *scope) (v1alpha1.FastPathAttachmentSpec, error) {
	spec := s.att.Spec
	if spec.Network == nil {
		return v1alpha1.DefaultAttachmentSpec(spec), nil
	}
	net, err := r.networkOf(ctx, &spec)
	if err == nil {
		ns := &corev1.Namespace{}
		if gerr := r.Cache.Get(ctx, types.NamespacedName{Name: s.att.Namespace}, ns); gerr != nil {
			return spec, fmt.Errorf("failed to get Namespace %s: %w", s.att.Namespace, gerr)
		}
		// A network in tuning mode Apply (issue 27): attachments created
		// since the recommendation was applied default to its MTU and
		// offloads where they set none themselves.
		spec = v1alpha1.WithTunedDefaults(spec, net, s.att.CreationTimestamp)
		var resolved v1alpha1.FastPathAttachmentSpec
		if resolved, err = v1alpha1.ResolveNetwork(spec, ns.Labels, net); err == nil {
			s.network = net.Name
			s.portSecurity = v1alpha1.DefaultNetworkSpec(net.Spec).PortSecurity
			if st := &s.att.Status; st.Bridge != "" && (st.Network != net.Name || st.Bridge != net.Spec.Bridge) {
				// Running VMs are still on the old bridge: restart them onto
				// the new one (they stay wired, the NAD follows the network).
				msg := fmt.Sprintf("FastPathAttachment %s moved from bridge %s of FastPathNetwork %s to bridge %s of FastPathNetwork %s "+
					"(the network's spec.bridge or the attachment's spec.networkRef changed), so the running instance still on %s was stopped",
					s.att.Name, st.Bridge, st.Network, net.Spec.Bridge, net.Name, st.Bridge)
				if rerr := r.revoke(ctx, s, false, msg); rerr != nil {
					return spec, rerr // retried: the revocation must complete
				}
			}
			s.att.Status.Network, s.att.Status.Bridge = net.Name, net.Spec.Bridge
			return resolved, nil
		}
	}
	var ref refusal
	if !errors.As(err, &ref) && !isResolveError(err) {
		return spec, err
	}
	if derr := r.deleteOwnedNAD(ctx, s); derr != nil {
		return spec, derr
	}
	s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNetworkRefused, err.Error())
	var notAdmitted *v1alpha1.NamespaceNotAdmittedError
	switch {
	case errors.As(err, &notAdmitted):
		if rerr := r.revoke(ctx, s, true, fmt.Sprintf("FastPathNetwork %s no longer admits namespace %s (its spec.namespaceSelector %s), "+
			"so FastPathAttachment %s's interface was removed from the VM and its running instance stopped",
			notAdmitted.Network, s.att.Namespace, notAdmitted.Selector, s.att.Name)); rerr != nil {
			return spec, rerr // retried: the revocation must complete
		}
		s.att.Status.Network, s.att.Status.Bridge, s.att.Status.Subnet = "", "", ""
	case errors.As(err, &ref) && s.att.Status.Bridge != "":
		// The network the VMs were wired to is gone (deleted, or no longer
		// the default): its bridge is nobody's to admit them any more.
		if rerr := r.revoke(ctx, s, true, fmt.Sprintf("the FastPathNetwork %s of FastPathAttachment %s is gone (%v), "+
			"so its interface was removed from the VM and its running instance, still on bridge %s, stopped",
			s.att.Status.Network, s.att.Name, err, s.att.Status.Bridge)); rerr != nil {
			return spec, rerr
		}
		s.att.Status.Network, s.att.Status.Bridge, s.att.Status.Subnet = "", "", ""
	}
	// A refusal the tenant caused (the spec outside the network's bounds)
	// keeps status.network and status.bridge: running VMs keep their port
	// until restarted, and a later change of the bridge still finds them.
	return spec, s.invalidSpec("%s", err.Error())
}

// tunedDefaultChanged passes a FastPathNetwork update whose
// status.tuning.appliedAt changed: the tuned defaults (issue 27) live in
// status, which the generation does not count, and an attachment created
// just after it was applied may have been resolved on an older copy.
var tunedDefaultChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.FastPathNetwork)
	n, ok2 := e.ObjectNew.(*v1alpha1.FastPathNetwork)
	if !ok1 || !ok2 {
		return false
	}
	var a, b *metav1.Time
	if o.Status.Tuning != nil {
		a = o.Status.Tuning.AppliedAt
	}
	if n.Status.Tuning != nil {
		b = n.Status.Tuning.AppliedAt
	}
	return !a.Equal(b)
}}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=delete

// revoke takes the fast path away from the VMs of an attachment whose
// network no longer admits its namespace or is gone (unwire), or moves
// them off a bridge the attachment no longer renders (!unwire): deleting or
// changing the NAD stops new launchers, but running VMs would keep their
// port on the node's old bridge. With unwire it unwires every VM the
// attachment wired (their specs come back byte for byte); either way it
// deletes each running VMI of those VMs whose spec carries the attachment's
// network, with a Revoked Warning Event on the VM saying why (message):
// KubeVirt restarts a VM of runStrategy Always or RerunOnFailure (without
// the fast-path interface, or on the new bridge); a Manual one stays
// stopped. The VMI is deleted with its UID as a precondition, so a VMI
// started meanwhile is left alone.
func (r *Reconciler) revoke(ctx context.Context, s *scope, unwire bool, message string) error {
	vms, err := r.listVMs(ctx, r.APIReader, s.att.Namespace)
	if err != nil {
		return err
	}
	netName := v1alpha1.NetworkName(s.att.Name)
	var errs []error
	for i := range vms {
		vm := &vms[i]
		if wiring.Owner(vm.Object) != s.att.Name {
			continue
		}
		if unwire {
			if _, err := r.unwireVM(ctx, vm, s.att.Name); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.att.Namespace, Name: vm.GetName()}, vmi); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("failed to get VirtualMachineInstance %s/%s: %w", s.att.Namespace, vm.GetName(), err))
			}
			continue
		}
		if !slices.ContainsFunc(vmi.Spec.Networks, func(n kubevirtv1.Network) bool { return n.Name == netName }) || !vmi.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("failed to restart VirtualMachineInstance %s/%s to revoke its fast path: %w", s.att.Namespace, vm.GetName(), err))
			continue
		}
		r.Recorder.Eventf(vm, corev1.EventTypeWarning, v1alpha1.ReasonRevoked, "Restarted: %s", message)
	}
	return errors.Join(errs...)
}

// refusal is a network lookup that failed for a reason the spec or the
// admin must fix (not an apiserver failure).
type refusal string

func (r refusal) Error() string { return string(r) }

// isResolveError reports whether err came from v1alpha1.ResolveNetwork (every
// one of its errors names a spec field).
func isResolveError(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "spec.")
}

// networkOf returns the FastPathNetwork named by spec.networkRef, or the one
// annotated fastpath.io/default-network=true.
func (r *Reconciler) networkOf(ctx context.Context, spec *v1alpha1.FastPathAttachmentSpec) (*v1alpha1.FastPathNetwork, error) {
	if name := v1alpha1.NetworkRefName(spec); name != "" {
		net := &v1alpha1.FastPathNetwork{}
		err := r.Cache.Get(ctx, types.NamespacedName{Name: name}, net)
		if apierrors.IsNotFound(err) {
			return nil, refusal(fmt.Sprintf("spec.networkRef.name: FastPathNetwork %s does not exist (cluster admins create FastPathNetworks)", name))
		}
		if err != nil {
			return nil, fmt.Errorf("failed to get FastPathNetwork %s: %w", name, err)
		}
		return net, nil
	}
	list := &v1alpha1.FastPathNetworkList{}
	if err := r.Cache.List(ctx, list); err != nil {
		return nil, fmt.Errorf("failed to list FastPathNetworks: %w", err)
	}
	var defaults []*v1alpha1.FastPathNetwork
	for i := range list.Items {
		if list.Items[i].Annotations[v1alpha1.DefaultNetworkAnnotation] == "true" {
			defaults = append(defaults, &list.Items[i])
		}
	}
	switch len(defaults) {
	case 1:
		return defaults[0], nil
	case 0:
		return nil, refusal(fmt.Sprintf("spec.networkRef is required: no FastPathNetwork is annotated %s=true", v1alpha1.DefaultNetworkAnnotation))
	default:
		names := make([]string, len(defaults))
		for i, d := range defaults {
			names[i] = d.Name
		}
		return nil, refusal(fmt.Sprintf("spec.networkRef is required: FastPathNetworks %s are all annotated %s=true", strings.Join(names, ", "), v1alpha1.DefaultNetworkAnnotation))
	}
}

// deleteOwnedNAD deletes the attachment's NetworkAttachmentDefinition when
// the attachment controls it.
func (r *Reconciler) deleteOwnedNAD(ctx context.Context, s *scope) error {
	key := client.ObjectKeyFromObject(s.att)
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := r.Cache.Get(ctx, key, nad); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(nad, s.att) {
		return nil
	}
	if err := r.Client.Delete(ctx, nad); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete NetworkAttachmentDefinition %s: %w", key, err)
	}
	s.att.Status.NetworkAttachmentDefinition = ""
	ctrl.LoggerFrom(ctx).Info("Deleted NetworkAttachmentDefinition of a refused network", "networkAttachmentDefinition", key)
	return nil
}

// attachmentsForNetwork maps a FastPathNetwork to the attachments that name
// it or use the default network.
func (r *Reconciler) attachmentsForNetwork(ctx context.Context, obj client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, "") {
		if a.Spec.Network == nil {
			continue
		}
		if name := v1alpha1.NetworkRefName(&a.Spec); name == "" || name == obj.GetName() {
			out = append(out, request(&a))
		}
	}
	return out
}

// attachmentsForNamespace maps a Namespace (its labels decide which networks
// admit it) to its attachments with spec.network, and to the attachments
// whose subnets overlap theirs (an attachment the network no longer admits
// holds no subnet).
func (r *Reconciler) attachmentsForNamespace(ctx context.Context, obj client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, obj.GetName()) {
		if a.Spec.Network != nil {
			out = append(out, request(&a))
			out = append(out, r.overlappingAttachments(ctx, &a)...)
		}
	}
	return out
}

// effective returns the attachment with its spec resolved on its network, for
// renderers that take an attachment (RenderNetConf, wiring.ForAttachment).
// renderOptions are what RenderNetConf takes from the resolved network.
func (s *scope) renderOptions() RenderOptions {
	return RenderOptions{PortSecurity: s.portSecurity}
}

func (s *scope) effective() *v1alpha1.FastPathAttachment {
	a := s.att.DeepCopy()
	a.Spec = s.spec
	return a
}
