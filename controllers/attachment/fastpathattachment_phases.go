package attachment

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

var vmListGVK = kubevirtv1.GroupVersion.WithKind("VirtualMachineList")

// scope is what one reconcile knows about one attachment.
type scope struct {
	// att is the attachment whose status the phases fill; base is it as read.
	att  *v1alpha1.FastPathAttachment
	base *v1alpha1.FastPathAttachment
	// spec is att.Spec with defaults; desired is the wiring it asks for.
	spec     v1alpha1.FastPathAttachmentSpec
	desired  wiring.Desired
	selector labels.Selector
	// invalid is set when the spec is wrong in a way a retry cannot fix.
	invalid error
	// network is the FastPathNetwork spec.network resolved on, and
	// portSecurity its spec.portSecurity (defaulted).
	network      string
	portSecurity v1alpha1.PortSecurity
	// vms are the selected VMs in name order; release are VMs that carry this
	// attachment's wiring but are no longer its to wire.
	vms     []*vmState
	release []*unstructured.Unstructured
	// restart names the wired VMs whose running VMI lacks the wiring.
	restart []string
	// observed: the per-VM status was computed (the observation phase ran).
	observed bool
	// deleting: the attachment is being deleted; deleted: its finalizer is
	// gone, so there is no status to write.
	deleting, deleted bool
	// stop ends the reconcile after the current phase without an error: the
	// status says why, and a watch brings the attachment back when that
	// changes.
	stop bool
}

// Stopped reports whether a phase ended the reconcile early (phases.Stopper).
func (s *scope) Stopped() bool { return s.stop }

// vmState is one selected VM.
type vmState struct {
	name string
	// vm is the cached object: read only.
	vm *unstructured.Unstructured
	// conflict, when set, says why this attachment does not wire the VM.
	conflict string
	// staleOwner is an attachment that no longer exists but whose wiring
	// record is on the VM; it is unwired before this attachment wires the VM.
	staleOwner string
	// staleUID is the uid in the VM's record when staleOwner is an earlier
	// attachment of this attachment's name; "" otherwise.
	staleUID string
	wired    bool
	wireErr  error
	vmi      *kubevirtv1.VirtualMachineInstance
	status   v1alpha1.VMStatus
}

// member reports whether the VM belongs to this attachment's fast path.
func (v *vmState) member() bool { return v.conflict == "" && v.wireErr == nil }

func newScope(att *v1alpha1.FastPathAttachment) *scope {
	return &scope{att: att, base: att.DeepCopy(), deleting: !att.DeletionTimestamp.IsZero()}
}

func (s *scope) key() string { return s.att.Namespace + "/" + s.att.Name }

// invalidSpec records a spec error and returns it as a terminal error.
func (s *scope) invalidSpec(format string, args ...any) error {
	s.invalid = fmt.Errorf(format, args...)
	return reconcile.TerminalError(s.invalid)
}

// reconcileSpec applies defaults and checks what the CRD cannot.
func (r *Reconciler) reconcileSpec(ctx context.Context, s *scope) (ctrl.Result, error) {
	spec, err := r.resolveNetwork(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.spec = spec
	s.desired = wiring.ForAttachment(s.effective())
	if n := s.desired.Network; n != nil {
		// ForAttachment chose the default name of the datapath's plugin.
		if n.Binding == wiring.DefaultMacvtapBinding {
			n.Binding = r.Bindings.Macvtap
		} else {
			n.Binding = r.Bindings.Bridge
		}
	}
	st := &s.att.Status
	st.Datapath, st.MTU = "", 0
	sel, err := metav1.LabelSelectorAsSelector(&s.att.Spec.VMSelector)
	if err != nil {
		return ctrl.Result{}, s.invalidSpec("spec.vmSelector is invalid: %v", err)
	}
	s.selector = sel
	n := s.spec.Network
	if n == nil {
		return ctrl.Result{}, nil
	}
	st.Datapath, st.MTU = n.Datapath, *n.MTU
	subnet, err := r.checkNetworkSpec(n)
	if err != nil {
		return ctrl.Result{}, s.invalidSpec("%s", err.Error())
	}
	conf, err := RenderNetConf(s.effective(), s.renderOptions())
	if err != nil {
		return ctrl.Result{}, err
	}
	if _, _, err := netconf.LoadNetConf([]byte(conf)); err != nil {
		return ctrl.Result{}, s.invalidSpec("spec.network renders a netconf the fastpath plugin rejects: %v", err)
	}
	return ctrl.Result{}, r.checkSubnet(ctx, s, subnet)
}

// reconcileDelete removes the wiring from every VM that carries this
// attachment's record, deletes the NAD and releases the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.att, v1alpha1.Finalizer) {
		s.deleted = true
		return ctrl.Result{}, nil
	}
	// A live list: the cache may not show a VM wired a moment ago.
	vms, err := r.listVMs(ctx, r.APIReader, s.att.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if errs := r.unwireOwned(ctx, vms, s.att.Name, nil); len(errs) > 0 {
		// Say why the finalizer stays (e.g. a hook sidecar annotation the
		// user made unreadable); fixing the VM brings the attachment back.
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonWiringFailed, summarize(errorStrings(errs)))
		return ctrl.Result{}, errors.Join(errs...)
	}
	nad := &nadv1.NetworkAttachmentDefinition{}
	key := client.ObjectKeyFromObject(s.att)
	// A live read: after an apiserver outage the cache may not yet show the
	// NAD this attachment created, and it would be left behind.
	if err := r.APIReader.Get(ctx, key, nad); err == nil && metav1.IsControlledBy(nad, s.att) {
		// Garbage collection would do this through the ownerReference; deleting
		// it here also works where no garbage collector runs (envtest, the demo).
		if err := r.Client.Delete(ctx, nad); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("failed to delete NetworkAttachmentDefinition %s: %w", key, err)
		}
	} else if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
	}
	base := s.att.DeepCopy()
	controllerutil.RemoveFinalizer(s.att, v1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, s.att, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("failed to remove finalizer from FastPathAttachment %s: %w", key, err)
	}
	r.ports.release(s.key())
	r.metrics.forget(key)
	s.deleted = true
	return ctrl.Result{}, nil
}

// unwireOrphans removes the wiring of attachment key, which does not
// exist, from the VMs of its namespace that still carry its record. That
// happens only when the attachment was deleted with its finalizer removed by
// hand; the VM watch maps such a VM to the attachment named in its record, on
// every change of the VM and for every VM when the operator starts, so the
// wiring goes even if the VM changes no more. Each VM gets an Event.
func (r *Reconciler) unwireOrphans(ctx context.Context, key types.NamespacedName) error {
	vms, err := r.listVMs(ctx, r.Cache, key.Namespace)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(vms, func(vm unstructured.Unstructured) bool { return wiring.Owner(vm.Object) == key.Name }) {
		return nil
	}
	// The cache may not show an attachment of that name created a moment ago.
	if err := r.APIReader.Get(ctx, key, &v1alpha1.FastPathAttachment{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to get FastPathAttachment %s: %w", key, err)
	}
	return errors.Join(r.unwireOwned(ctx, vms, key.Name, func(vm *unstructured.Unstructured) {
		ctrl.LoggerFrom(ctx).Info("Removed the wiring of a FastPathAttachment that no longer exists", "VirtualMachine", klog.KObj(vm))
		r.Recorder.Eventf(vm, corev1.EventTypeNormal, v1alpha1.ReasonOrphanUnwired,
			"Removed the wiring of FastPathAttachment %s, which no longer exists (deleted without its finalizer)", key.Name)
	})...)
}

// listVMs lists the VirtualMachines of a namespace as unstructured objects
// (none when KubeVirt is absent). Objects from the cache reader are shared:
// callers copy before changing.
func (r *Reconciler) listVMs(ctx context.Context, reader client.Reader, namespace string) ([]unstructured.Unstructured, error) {
	if r.KubeVirtAbsent {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(vmListGVK)
	opts := []client.ListOption{client.InNamespace(namespace)}
	if reader == r.Cache {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("failed to list VirtualMachines in %s: %w", namespace, err)
	}
	return list.Items, nil
}
