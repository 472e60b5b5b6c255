package attachment

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// reconcileNetwork ensures the NetworkAttachmentDefinition.
func (r *Reconciler) reconcileNetwork(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(s.att)
	nad := &nadv1.NetworkAttachmentDefinition{}
	err := r.Cache.Get(ctx, key, nad)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
	}
	found := err == nil
	if s.spec.Network == nil {
		s.att.Status.NetworkAttachmentDefinition = ""
		if found && metav1.IsControlledBy(nad, s.att) {
			if err := r.Client.Delete(ctx, nad); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("failed to delete NetworkAttachmentDefinition %s: %w", key, err)
			}
		}
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNotRequested, "spec.network is not set")
		return ctrl.Result{}, nil
	}
	config, err := RenderNetConf(s.effective(), s.renderOptions())
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.ensureNAD(ctx, s, nad, found, config, nadResourceName(s.spec.Network)); err != nil {
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNADFailed, err.Error())
		return ctrl.Result{}, err
	}
	if s.stop {
		return ctrl.Result{}, nil
	}
	s.att.Status.NetworkAttachmentDefinition = key.String()
	n := s.spec.Network
	msg := fmt.Sprintf("NetworkAttachmentDefinition %s: FastPathNetwork %s, datapath %s, bridge %s, MTU %d", key, s.network, n.Datapath, n.Bridge, *n.MTU)
	if res := nadResourceName(n); res != "" {
		msg = fmt.Sprintf("NetworkAttachmentDefinition %s: FastPathNetwork %s, datapath %s, lower device %s, MTU %d, device plugin resource %s, KubeVirt network binding %s",
			key, s.network, n.Datapath, n.Bridge, *n.MTU, res, s.desired.Network.Binding)
	}
	s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNADCreated, msg)
	return ctrl.Result{}, nil
}

// nadResourceName returns the extended resource a pod on network n needs
// (the NAD's v1alpha1.NADResourceNameAnnotation): on datapath Macvtap the
// node agent's device plugin resource of the lower device, whose devices are
// the macvtaps' /dev/tapN; "" for the other datapaths.
func nadResourceName(n *v1alpha1.NetworkSpec) string {
	if n == nil || n.Datapath != v1alpha1.DatapathMacvtap {
		return ""
	}
	return v1alpha1.MacvtapResourceName(n.Bridge)
}

// ensureNAD creates or updates the NAD of the attachment with config and,
// when resource is not "", the resource name annotation (removed when it is
// ""). A NAD of that name that the attachment does not control is
// NADConflict and stops the reconcile.
func (r *Reconciler) ensureNAD(ctx context.Context, s *scope, nad *nadv1.NetworkAttachmentDefinition, found bool, config, resource string) error {
	key := client.ObjectKeyFromObject(s.att)
	if !found {
		nad = &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		nad.Labels = map[string]string{v1alpha1.AttachmentLabel: s.att.Name}
		if resource != "" {
			nad.Annotations = map[string]string{v1alpha1.NADResourceNameAnnotation: resource}
		}
		nad.Spec.Config = config
		if err := controllerutil.SetControllerReference(s.att, nad, r.Client.Scheme()); err != nil {
			return fmt.Errorf("failed to set owner of NetworkAttachmentDefinition %s: %w", key, err)
		}
		err := r.Client.Create(ctx, nad, client.FieldOwner(v1alpha1.FieldManager))
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create NetworkAttachmentDefinition %s: %w", key, err)
		}
		// The cache was behind; compare with the live object.
		nad = &nadv1.NetworkAttachmentDefinition{}
		if err := r.APIReader.Get(ctx, key, nad); err != nil {
			return fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
		}
	}
	if earlierIncarnation(nad, s.att) {
		// Left by a deleted attachment of this name (no garbage collector
		// ran, or the finalizer's cached read missed it): adopt it.
		base := nad.DeepCopy()
		nad.OwnerReferences = slices.DeleteFunc(nad.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.Controller != nil && *ref.Controller })
		if err := controllerutil.SetControllerReference(s.att, nad, r.Client.Scheme()); err != nil {
			return fmt.Errorf("failed to set owner of NetworkAttachmentDefinition %s: %w", key, err)
		}
		if err := r.Client.Patch(ctx, nad, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return fmt.Errorf("failed to adopt NetworkAttachmentDefinition %s: %w", key, err)
		}
		r.Recorder.Eventf(s.att, corev1.EventTypeNormal, v1alpha1.ReasonNADCreated,
			"Adopted NetworkAttachmentDefinition %s, left by an earlier FastPathAttachment of this name", key)
	}
	if !metav1.IsControlledBy(nad, s.att) {
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNADConflict,
			fmt.Sprintf("NetworkAttachmentDefinition %s exists and is not owned by this attachment: delete or rename it", key))
		s.stop = true
		return nil
	}
	gotResource, hasResource := nad.Annotations[v1alpha1.NADResourceNameAnnotation]
	if nad.Spec.Config == config && nad.Labels[v1alpha1.AttachmentLabel] == s.att.Name &&
		gotResource == resource && hasResource == (resource != "") {
		return nil
	}
	base := nad.DeepCopy()
	nad.Spec.Config = config
	if nad.Labels == nil {
		nad.Labels = map[string]string{}
	}
	nad.Labels[v1alpha1.AttachmentLabel] = s.att.Name
	switch {
	case resource != "" && nad.Annotations == nil:
		nad.Annotations = map[string]string{v1alpha1.NADResourceNameAnnotation: resource}
	case resource != "":
		nad.Annotations[v1alpha1.NADResourceNameAnnotation] = resource
	default:
		delete(nad.Annotations, v1alpha1.NADResourceNameAnnotation)
	}
	if err := r.Client.Patch(ctx, nad, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("failed to update NetworkAttachmentDefinition %s: %w", key, err)
	}
	return nil
}

// earlierIncarnation reports whether nad's controller is a FastPathAttachment
// of att's name with another uid: an attachment deleted before att was
// created (names are unique at any one time, so that one is gone).
func earlierIncarnation(nad *nadv1.NetworkAttachmentDefinition, att *v1alpha1.FastPathAttachment) bool {
	ref := metav1.GetControllerOfNoCopy(nad)
	return ref != nil && ref.Kind == "FastPathAttachment" && ref.APIVersion == v1alpha1.GroupVersion.String() &&
		ref.Name == att.Name && ref.UID != att.UID
}
