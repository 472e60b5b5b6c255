package attachment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// maxVMPatchAttempts bounds the re-read-and-retry loop of one VM patch.
const maxVMPatchAttempts = 4

// vmPatchBackoff paces the attempts of one VM patch after a 409 Conflict:
// retry.DefaultRetry (10ms apart, 10% jitter) cut to maxVMPatchAttempts.
var vmPatchBackoff = func() wait.Backoff {
	b := retry.DefaultRetry
	b.Steps = maxVMPatchAttempts
	return b
}()

// desiredFor is the wiring of one VM (its object as about to be patched):
// the attachment's, with the pod affinity term left out while the VM is in
// a group move (MoveStatus), and without the eviction strategy on a VM whose
// running VMI lacks it and whose record does not hold it yet. KubeVirt
// applies no change of evictionStrategy to a running VMI and marks the VM
// RestartRequired, which stops its live updates of affinity as well, so a
// VM wired before the field existed gets it at its next start instead.
func (r *Reconciler) desiredFor(ctx context.Context, s *scope, name string, vm map[string]any) wiring.Desired {
	d := s.desired
	if mv := s.att.Status.Move; mv != nil && slices.Contains(mv.VMs, name) {
		d.SuspendPlacement = true
	}
	if d.EvictionStrategy != "" && !wiring.SetsEvictionStrategy(vm) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		err := r.Cache.Get(ctx, client.ObjectKey{Namespace: s.att.Namespace, Name: name}, vmi)
		if err == nil && vmi.DeletionTimestamp.IsZero() && (vmi.Spec.EvictionStrategy == nil || string(*vmi.Spec.EvictionStrategy) != d.EvictionStrategy) {
			d.EvictionStrategy = ""
		}
	}
	return d
}

// reconcileWiring wires the VMs this attachment owns and unwires the ones it
// released.
func (r *Reconciler) reconcileWiring(ctx context.Context, s *scope) (ctrl.Result, error) {
	// Without its binding plugin KubeVirt refuses the VM ("couldn't find
	// configuration for network binding"), or the interface would lack the
	// domain hook: wire nothing, release what was released.
	sidecarGate, unregistered := r.checkBinding(ctx, s)
	r.setSidecarGate(s, sidecarGate)
	var jobs []func(context.Context)
	for _, st := range s.vms {
		if st.conflict != "" || unregistered != nil {
			continue
		}
		jobs = append(jobs, func(ctx context.Context) {
			tookOver := false
			changed, err := r.patchVM(ctx, st.vm, func(obj map[string]any) (bool, error) {
				unwired := false
				// What the VM holds now (it may have been re-read live after a
				// conflict): another attachment's orphaned wiring, or an
				// earlier same-name attachment's.
				owner := wiring.Owner(obj)
				if (owner != "" && owner == st.staleOwner && owner != s.att.Name) || wiring.Stale(obj, s.att.Name, string(s.att.UID)) {
					var err error
					if unwired, err = wiring.Unwire(obj); err != nil {
						return false, err
					}
				}
				tookOver = unwired
				wired, err := wiring.Wire(obj, r.desiredFor(ctx, s, st.name, obj))
				return unwired || wired, err
			})
			switch {
			case err != nil || !changed || !tookOver:
			case st.staleUID != "":
				r.Recorder.Eventf(st.vm, corev1.EventTypeNormal, v1alpha1.ReasonOrphanUnwired,
					"Replaced the wiring of an earlier FastPathAttachment %s (uid %s), which no longer exists, with that of %s (uid %s)", st.staleOwner, st.staleUID, s.att.Name, s.att.UID)
			default:
				r.Recorder.Eventf(st.vm, corev1.EventTypeNormal, v1alpha1.ReasonOrphanUnwired,
					"Replaced the wiring of FastPathAttachment %s, which no longer exists, with that of %s", st.staleOwner, s.att.Name)
			}
			var conflict *wiring.ConflictError
			switch {
			case errors.As(err, &conflict):
				st.conflict = fmt.Sprintf("VM %s: %v", st.name, conflict)
			case err != nil:
				st.wireErr = err
			default:
				st.wired = true
				if changed {
					ctrl.LoggerFrom(ctx).V(1).Info("Wired VM", "vm", klog.KObj(st.vm))
				}
			}
		})
	}
	var releaseErrs []error
	var mu sync.Mutex
	for _, vm := range s.release {
		jobs = append(jobs, func(ctx context.Context) {
			if _, err := r.unwireVM(ctx, vm, s.att.Name); err != nil {
				mu.Lock()
				releaseErrs = append(releaseErrs, err)
				mu.Unlock()
			}
		})
	}
	runBounded(ctx, r.WiringWorkers, jobs)

	wired := 0
	var failed []error
	var conflicts []string
	for _, st := range s.vms {
		switch {
		case st.wireErr != nil:
			failed = append(failed, st.wireErr)
		case st.conflict != "":
			conflicts = append(conflicts, st.conflict)
		case st.wired:
			wired++
		}
	}
	s.att.Status.WiredVMs = int32(wired)
	failed = append(failed, releaseErrs...)
	switch {
	case len(failed) > 0:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonWiringFailed, summarize(errorStrings(failed)))
		return ctrl.Result{}, errors.Join(failed...)
	case unregistered != nil && len(s.vms) > 0:
		msg := fmt.Sprintf("%v; no VM is wired until it is (docs/install.md#the-binding-plugin)", unregistered)
		if c := meta.FindStatusCondition(s.att.Status.Conditions, v1alpha1.VMsWiredCondition); c == nil || c.Reason != v1alpha1.ReasonBindingNotRegistered {
			r.Recorder.Event(s.att, corev1.EventTypeWarning, v1alpha1.ReasonBindingNotRegistered, msg)
		}
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonBindingNotRegistered, msg)
	case len(conflicts) > 0:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonVMConflict, summarize(conflicts))
	case len(s.vms) == 0 && r.KubeVirtAbsent:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonNoVMsSelected,
			"KubeVirt is not installed (the API server serves no kubevirt.io/v1 VirtualMachines): no VM can be selected; Pod-mode FastPathBenchmarks still run on the NetworkAttachmentDefinition")
	case len(s.vms) == 0:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonNoVMsSelected,
			fmt.Sprintf("spec.vmSelector matches no VirtualMachine in namespace %s", s.att.Namespace))
	default:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionTrue, v1alpha1.ReasonWired,
			fmt.Sprintf("%d of %d selected VMs wired%s", wired, len(s.vms), bindingNote(s.desired)))
	}
	return ctrl.Result{}, nil
}

// bindingNote says in the VMsWired message which binding plugin carries
// the fast-path interfaces (and so runs the domain hook).
func bindingNote(d wiring.Desired) string {
	if d.Network == nil {
		return ""
	}
	return fmt.Sprintf(" through the network binding plugin %q", d.Network.Binding)
}

// checkBinding reports which KubeVirt CRs enable the Sidecar feature gate
// (nil when the list failed or KubeVirt is absent: unknown) and, when the
// attachment wires a fast-path interface, whether the KubeVirt CR registers
// its binding plugin (nil otherwise).
func (r *Reconciler) checkBinding(ctx context.Context, s *scope) (sidecarGate []string, unregistered error) {
	if r.KubeVirtAbsent {
		return nil, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kubevirtcr.KubeVirtGVK.GroupVersion().WithKind(kubevirtcr.KubeVirtGVK.Kind + "List"))
	if err := r.Cache.List(ctx, list); err != nil {
		err = fmt.Errorf("failed to list KubeVirt CRs: %w", err)
		if s.desired.Network == nil {
			err = nil
		}
		return nil, err
	}
	sidecarGate = append([]string{}, kubevirtcr.SidecarGateOn(list.Items)...)
	if s.desired.Network == nil {
		return sidecarGate, nil
	}
	return sidecarGate, kubevirtcr.Check(list.Items, r.Bindings, s.desired.Network.Binding)
}

// setSidecarGate sets SidecarGateOff from the KubeVirt CRs that enable the
// Sidecar feature gate (on: their names; nil: unknown, the condition is
// removed), with a Warning Event when it turns False. Ready does not
// summarise it: the gate is the admin's choice, and Fastpath works either way.
func (r *Reconciler) setSidecarGate(s *scope, on []string) {
	switch {
	case on == nil:
		meta.RemoveStatusCondition(&s.att.Status.Conditions, v1alpha1.SidecarGateOffCondition)
	case len(on) == 0:
		s.setCondition(v1alpha1.SidecarGateOffCondition, metav1.ConditionTrue, v1alpha1.ReasonSidecarGateOff,
			fmt.Sprintf("no KubeVirt CR lists the feature gate %s", kubevirtcr.SidecarFeatureGate))
	default:
		msg := fmt.Sprintf("KubeVirt %s lists the feature gate %s in %s: any user who may create a VirtualMachine may run any image "+
			"as a sidecar in its virt-launcher Pod (hooks.kubevirt.io/hookSidecars); Fastpath does not need it: remove it unless something else does (docs/security.md)",
			strings.Join(on, ", "), kubevirtcr.SidecarFeatureGate, kubevirtcr.FeatureGatesField)
		if c := meta.FindStatusCondition(s.att.Status.Conditions, v1alpha1.SidecarGateOffCondition); c == nil || c.Reason != v1alpha1.ReasonSidecarGateOn {
			r.Recorder.Event(s.att, corev1.EventTypeWarning, v1alpha1.ReasonSidecarGateOn, msg)
		}
		s.setCondition(v1alpha1.SidecarGateOffCondition, metav1.ConditionFalse, v1alpha1.ReasonSidecarGateOn, msg)
	}
}

// unwireVM removes attachment's wiring from a VM if the VM still carries it.
func (r *Reconciler) unwireVM(ctx context.Context, vm *unstructured.Unstructured, attachment string) (bool, error) {
	return r.patchVM(ctx, vm, func(obj map[string]any) (bool, error) {
		if wiring.Owner(obj) != attachment {
			return false, nil
		}
		return wiring.Unwire(obj)
	})
}

// patchVM applies mutate to a copy of vm and, when it changed something,
// sends the difference as a JSON merge patch guarded by the resourceVersion
// read. On 409 Conflict it re-reads the VM live and tries again
// (retry.RetryOnConflict with vmPatchBackoff: at most maxVMPatchAttempts
// attempts). It reports whether the VM was patched; a VM that is gone is not
// an error. mutate's own errors are returned as they are.
func (r *Reconciler) patchVM(ctx context.Context, vm *unstructured.Unstructured, mutate func(map[string]any) (bool, error)) (bool, error) {
	key := client.ObjectKeyFromObject(vm)
	cur, patched := vm, false
	err := retry.RetryOnConflict(vmPatchBackoff, func() error {
		if cur == nil {
			fresh := &unstructured.Unstructured{}
			fresh.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
			if err := r.APIReader.Get(ctx, key, fresh); err != nil {
				return fmt.Errorf("failed to get VirtualMachine %s: %w", key, err)
			}
			cur = fresh
		}
		mod := cur.DeepCopy()
		changed, err := mutate(mod.Object)
		if err != nil || !changed {
			return err
		}
		err = r.Client.Patch(ctx, mod, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldManager))
		vmPatches.WithLabelValues(patchResult(err)).Inc()
		if err != nil {
			cur = nil // after a conflict the next attempt reads the VM live
			return fmt.Errorf("failed to patch VirtualMachine %s: %w", key, err)
		}
		patched = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return patched, err
}

// unwireOwned removes attachment's wiring from every VM of vms that carries
// its record, at most Options.WiringWorkers at a time, calls unwired (when
// not nil) for each VM it changed, and returns the errors.
func (r *Reconciler) unwireOwned(ctx context.Context, vms []unstructured.Unstructured, attachment string, unwired func(*unstructured.Unstructured)) []error {
	var jobs []func(context.Context)
	var mu sync.Mutex
	var errs []error
	for i := range vms {
		vm := &vms[i]
		if wiring.Owner(vm.Object) != attachment {
			continue
		}
		jobs = append(jobs, func(ctx context.Context) {
			changed, err := r.unwireVM(ctx, vm, attachment)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case changed && unwired != nil:
				unwired(vm)
			}
		})
	}
	runBounded(ctx, r.WiringWorkers, jobs)
	return errs
}

// runBounded runs jobs with at most n at a time and waits for all.
func runBounded(ctx context.Context, n int, jobs []func(context.Context)) {
	sem := make(chan struct{}, max(n, 1))
	var wg sync.WaitGroup
	for _, job := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			job(ctx)
		}()
	}
	wg.Wait()
}

func patchResult(err error) string {
	switch {
	case err == nil:
		return "success"
	case apierrors.IsConflict(err):
		return "conflict"
	default:
		return "error"
	}
}
