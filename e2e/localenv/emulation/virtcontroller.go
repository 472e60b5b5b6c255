package emulation

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func (e *Emulator) setupVirtController(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("emulated-virt-controller").
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Complete(reconcile.Func(e.reconcileVM))
	if err != nil {
		return fmt.Errorf("failed to set up the emulated virt-controller: %w", err)
	}
	return nil
}

// shouldRun reports whether a VM wants a VMI: runStrategy Always or
// RerunOnFailure, or the legacy spec.running true.
func shouldRun(vm *kubevirtv1.VirtualMachine) bool {
	if vm.Spec.RunStrategy != nil {
		switch *vm.Spec.RunStrategy {
		case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure:
			return true
		}
		return false
	}
	return vm.Spec.Running != nil && *vm.Spec.Running
}

// reconcileVM does virt-controller's part for one VM: create the VMI from the
// template when the VM should run and has none, delete it when the VM should
// not run, and write the VM's printable status.
func (e *Emulator) reconcileVM(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := e.cli.Get(ctx, req.NamespacedName, vm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := e.cli.Get(ctx, req.NamespacedName, vmi)
	switch {
	case apierrors.IsNotFound(err):
		vmi = nil
	case err != nil:
		return reconcile.Result{}, err
	}
	run := shouldRun(vm) && vm.DeletionTimestamp == nil
	switch {
	case run && vmi == nil:
		vmi, err = e.createVMI(ctx, vm)
		if err != nil {
			return reconcile.Result{}, err
		}
	case !run && vmi != nil && vmi.DeletionTimestamp == nil:
		if err := e.cli.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("failed to delete VMI %s: %w", req, err)
		}
		e.log.printf("virt-controller", "VMI %s deleted: the VM should not run", req)
	}
	return reconcile.Result{}, e.writeVMStatus(ctx, vm, vmi)
}

// createVMI creates the VMI of a VM from spec.template as virt-controller
// does: same name, the template's labels and annotations, the VM as
// controller owner, and the template spec as is.
func (e *Emulator) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachineInstance, error) {
	if vm.Spec.Template == nil {
		return nil, fmt.Errorf("failed to create the VMI of %s/%s: spec.template is empty", vm.Namespace, vm.Name)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        vm.Name,
			Namespace:   vm.Namespace,
			Labels:      maps.Clone(vm.Spec.Template.ObjectMeta.Labels),
			Annotations: maps.Clone(vm.Spec.Template.ObjectMeta.Annotations),
		},
		Spec: *vm.Spec.Template.Spec.DeepCopy(),
	}
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vmi.Labels["kubevirt.io/vm"] = vm.Name
	if err := controllerutil.SetControllerReference(vm, vmi, e.cli.Scheme()); err != nil {
		return nil, fmt.Errorf("failed to set the owner of VMI %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	if err := e.cli.Create(ctx, vmi); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("failed to create VMI %s/%s: it exists (a deletion is pending): %w", vm.Namespace, vm.Name, err)
		}
		return nil, fmt.Errorf("failed to create VMI %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	e.log.printf("virt-controller", "VMI %s/%s created from the VM template (generation %d)", vm.Namespace, vm.Name, vm.Generation)
	return vmi, nil
}

// writeVMStatus sets created, ready, printableStatus and the Ready condition
// of a VM from its VMI.
func (e *Emulator) writeVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	want := vm.Status.DeepCopy()
	ready := corev1.ConditionFalse
	switch {
	case vmi == nil:
		want.Created, want.Ready, want.PrintableStatus = false, false, kubevirtv1.VirtualMachineStatusStopped
	case vmi.DeletionTimestamp != nil:
		want.Created, want.Ready, want.PrintableStatus = true, false, kubevirtv1.VirtualMachineStatusStopping
	case vmi.Status.Phase == kubevirtv1.Running:
		want.Created, want.Ready, want.PrintableStatus = true, true, kubevirtv1.VirtualMachineStatusRunning
		ready = corev1.ConditionTrue
	default:
		want.Created, want.Ready, want.PrintableStatus = true, false, kubevirtv1.VirtualMachineStatusStarting
	}
	cond := kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: ready}
	i := slices.IndexFunc(want.Conditions, func(c kubevirtv1.VirtualMachineCondition) bool { return c.Type == kubevirtv1.VirtualMachineReady })
	if i >= 0 && want.Conditions[i].Status == ready {
		cond = want.Conditions[i]
	} else {
		cond.LastTransitionTime = metav1.Now()
	}
	if i >= 0 {
		want.Conditions[i] = cond
	} else {
		want.Conditions = append(want.Conditions, cond)
	}
	if equality.Semantic.DeepEqual(*want, vm.Status) {
		return nil
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Status = *want
	if err := e.cli.Status().Patch(ctx, vm, patch); err != nil {
		return fmt.Errorf("failed to write the status of VM %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	return nil
}
