package emulation

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

func (e *Emulator) setupRestarter(mgr ctrl.Manager) error {
	if !e.opts.RestartWhenRequired {
		return nil
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("emulated-virtctl").
		For(&fastpathv1alpha1.FastPathAttachment{}).
		Complete(reconcile.Func(e.reconcileRestart))
	if err != nil {
		return fmt.Errorf("failed to set up the emulated virtctl restarts: %w", err)
	}
	return nil
}

// reconcileRestart does what the user is told to do when an attachment
// reports restartRequired for a VM: `virtctl restart <vm>`, which deletes the
// VMI so that virt-controller creates a new one from the (now wired)
// template. Each VMI is restarted at most once.
func (e *Emulator) reconcileRestart(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	fpa := &fastpathv1alpha1.FastPathAttachment{}
	if err := e.cli.Get(ctx, req.NamespacedName, fpa); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	for _, vm := range fpa.Status.VMs {
		if !vm.RestartRequired {
			continue
		}
		if err := e.Restart(ctx, types.NamespacedName{Namespace: fpa.Namespace, Name: vm.Name}, fmt.Sprintf("FastPathAttachment %s reports restartRequired: %s", req, vm.Message)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// Restart deletes the VMI of the VM key (an emulated `virtctl restart`) when
// the VMI's spec differs from the VM's current template, once per VMI UID;
// the emulated virt-controller starts a new one. A VMI already created from
// the current template is left alone even when a status (computed from an
// older VMI) still asks for a restart.
func (e *Emulator) Restart(ctx context.Context, key types.NamespacedName, why string) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := e.cli.Get(ctx, key, vmi); err != nil {
		return client.IgnoreNotFound(err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := e.cli.Get(ctx, key, vm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if vm.Spec.Template != nil && equality.Semantic.DeepEqual(vm.Spec.Template.Spec, vmi.Spec) {
		return nil
	}
	e.mu.Lock()
	done := e.restarted[vmi.UID]
	e.restarted[vmi.UID] = true
	e.mu.Unlock()
	if done || vmi.DeletionTimestamp != nil {
		return nil
	}
	e.log.printf("virtctl", "virtctl restart %s -n %s (%s)", key.Name, key.Namespace, why)
	if err := e.cli.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete VMI %s for the restart: %w", key, err)
	}
	return nil
}
