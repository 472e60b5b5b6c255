package attachment

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// Map functions of the watches. Each lists attachments from the cache (an
// in-memory read) and never fails: a list error is logged and maps to nothing.

// siblingAttachments maps an attachment's create, delete or spec change to
// the other attachments of its namespace: VM ownership between overlapping
// attachments depends on all of them.
func (r *Reconciler) siblingAttachments(ctx context.Context, obj client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, obj.GetNamespace()) {
		if a.Name != obj.GetName() {
			out = append(out, request(&a))
		}
	}
	return out
}

// attachmentsForVM maps a VM to the attachments whose selector matches it,
// the one whose wiring record it carries, those listing it in status (so a
// de-selected or deleted VM is unwired and dropped from status) and those
// whose vsock services name it (so a target created unselected after the
// attachment is reported as InvalidSpec rather than TargetNotFound).
func (r *Reconciler) attachmentsForVM(ctx context.Context, obj client.Object) []ctrl.Request {
	owner := wiring.OwnerFromAnnotations(obj.GetAnnotations())
	var out []ctrl.Request
	ownerFound := false
	for _, a := range r.attachmentsIn(ctx, obj.GetNamespace()) {
		ownerFound = ownerFound || a.Name == owner
		if a.Name == owner || listsVM(&a, obj.GetName()) || selects(&a, obj.GetLabels()) || targetsVM(&a, obj.GetName()) {
			out = append(out, request(&a))
		}
	}
	if owner != "" && !ownerFound {
		// The wiring of an attachment that is gone: its reconcile removes it.
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner}})
	}
	return out
}

// attachmentsForVMI maps a VMI to the attachments of its VM (same name): by
// the template label fastpath.io/attachment the VMI inherits, by status, and
// by the selector on the VM's labels.
func (r *Reconciler) attachmentsForVMI(ctx context.Context, obj client.Object) []ctrl.Request {
	var vmLabels map[string]string
	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	if err := r.Cache.Get(ctx, client.ObjectKeyFromObject(obj), vm); err == nil {
		vmLabels = vm.GetLabels()
	}
	label := obj.GetLabels()[v1alpha1.AttachmentLabel]
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, obj.GetNamespace()) {
		if a.Name == label || listsVM(&a, obj.GetName()) || (vmLabels != nil && selects(&a, vmLabels)) {
			out = append(out, request(&a))
		}
	}
	return out
}

// attachmentsForMigration maps a VirtualMachineInstanceMigration to the
// attachments of the VM it migrates (the VMI and its VM share the name).
func (r *Reconciler) attachmentsForMigration(ctx context.Context, obj client.Object) []ctrl.Request {
	m, ok := obj.(*kubevirtv1.VirtualMachineInstanceMigration)
	if !ok {
		return nil
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Spec.VMIName}}
	return r.attachmentsForVMI(ctx, vmi)
}

// attachmentsForNode maps a FastPathNode or a Node to the attachments with
// VMs on that node, and to those whose group has nowhere to move (a node
// that changed may now take it).
func (r *Reconciler) attachmentsForNode(ctx context.Context, obj client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, "") {
		if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.MovedTogetherCondition); c != nil && c.Reason == v1alpha1.ReasonNoTargetNode {
			out = append(out, request(&a))
			continue
		}
		if slices.ContainsFunc(a.Status.VMs, func(v v1alpha1.VMStatus) bool { return v.Node == obj.GetName() }) {
			out = append(out, request(&a))
		}
	}
	return out
}

// allAttachments maps the KubeVirt CR to every attachment: its binding
// plugin registration decides whether any of them may wire VMs.
func (r *Reconciler) allAttachments(ctx context.Context, _ client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, a := range r.attachmentsIn(ctx, "") {
		out = append(out, request(&a))
	}
	return out
}

func (r *Reconciler) attachmentsIn(ctx context.Context, namespace string) []v1alpha1.FastPathAttachment {
	list := &v1alpha1.FastPathAttachmentList{}
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.Cache.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list FastPathAttachments", "namespace", klog.KRef("", namespace))
		return nil
	}
	return list.Items
}

func request(a *v1alpha1.FastPathAttachment) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}}
}

func listsVM(a *v1alpha1.FastPathAttachment, name string) bool {
	return slices.ContainsFunc(a.Status.VMs, func(v v1alpha1.VMStatus) bool { return v.Name == name })
}

// targetsVM reports whether a vsock service of the attachment names the VM.
func targetsVM(a *v1alpha1.FastPathAttachment, name string) bool {
	return a.Spec.VSOCK != nil && slices.ContainsFunc(a.Spec.VSOCK.Services, func(s v1alpha1.VSOCKService) bool { return s.VM == name })
}

func selects(a *v1alpha1.FastPathAttachment, vmLabels map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(&a.Spec.VMSelector)
	return err == nil && sel.Matches(labels.Set(vmLabels))
}
