package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
)

// realGuestUnwire stops the Sibling VMs and deletes their attachment
// (stopSibling), then deletes every other attachment, waits until the operator took
// its wiring out of the VM templates, restarts the VMs (deletes their VMIs,
// as `virtctl restart` does) and checks inside the new real guests that the
// fast-path NIC is gone.
func (d *demo) realGuestUnwire(ctx context.Context) error {
	d.header("Unwire: stop the Sibling VMs and delete their attachment; delete the others, restart the VMs; the real guests come back without the fast-path NIC")
	if err := d.stopSibling(ctx); err != nil {
		return err
	}
	list := &fastpathv1alpha1.FastPathAttachmentList{}
	if err := d.stack.Client.List(ctx, list, clientInNamespace(Namespace)); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	fastMACs := map[string]string{}
	var vms []string
	for _, a := range list.Items {
		for _, vm := range a.Status.VMs {
			fastMACs[vm.Name] = vm.MAC
			vms = append(vms, vm.Name)
		}
		if _, err := d.kubectl(ctx, nil, "-n", Namespace, "delete", "fpa", a.Name, "--wait=true", "--timeout=2m"); err != nil {
			return err
		}
	}
	if err := d.waitFor(ctx, 2*time.Minute, "the VM templates to lose the fast-path wiring", func() (bool, error) {
		for _, name := range vms {
			vm := &kubevirtv1.VirtualMachine{}
			if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, vm); err != nil {
				return false, err
			}
			for _, n := range vm.Spec.Template.Spec.Networks {
				if strings.HasPrefix(n.Name, "fp-") {
					return false, nil
				}
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	old := map[string]types.UID{}
	for _, name := range vms {
		if g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: Namespace, Name: name}); ok {
			old[name] = g.UID
		}
	}
	args := append([]string{"-n", Namespace, "delete", "vmi"}, vms...)
	fmt.Fprintln(d.out, "(deleting the VMIs is what `virtctl restart` does; virt-controller, emulated, creates them again from the unwired templates)")
	if _, err := d.kubectl(ctx, nil, args...); err != nil {
		return err
	}
	if err := d.waitFor(ctx, 4*time.Minute, "the real guests to boot again", func() (bool, error) {
		for _, name := range vms {
			g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: Namespace, Name: name})
			if !ok || g.Real == nil || g.UID == old[name] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	var failures []string
	for _, name := range vms {
		g, _ := d.stack.Emulator.Guest(types.NamespacedName{Namespace: Namespace, Name: name})
		var nics []string
		for _, n := range g.Real.NICs {
			nics = append(nics, fmt.Sprintf("%s mtu %d (%s)", n.Name, n.MTU, n.IP))
		}
		if _, has := g.Real.NIC(fastMACs[name]); has || len(g.Real.NICs) != 1 {
			failures = append(failures, fmt.Sprintf("guest %s still has %d NICs: %s", name, len(g.Real.NICs), strings.Join(nics, ", ")))
		}
		fmt.Fprintf(d.out, "guest %s after the restart: %s; no fast-path NIC   [%s, read inside the guest]\n", name, strings.Join(nics, ", "), guests.Label)
	}
	if len(failures) > 0 {
		return fmt.Errorf("unwire: %s", strings.Join(failures, "; "))
	}
	return nil
}

// waitFor polls cond every 500 ms until it is true, fails, or timeout passes.
func (d *demo) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("failed waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failed waiting for %s within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
