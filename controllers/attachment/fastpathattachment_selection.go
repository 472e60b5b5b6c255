package attachment

import (
	"context"
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// reconcileSelection finds the selected VMs, who owns each and which VMs
// carry our wiring without being ours any more.
func (r *Reconciler) reconcileSelection(ctx context.Context, s *scope) (ctrl.Result, error) {
	vms, err := r.listVMs(ctx, r.Cache, s.att.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	atts := &v1alpha1.FastPathAttachmentList{}
	if err := r.Cache.List(ctx, atts, client.InNamespace(s.att.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list FastPathAttachments in %s: %w", s.att.Namespace, err)
	}
	exists := map[string]bool{}
	var rivals []rival
	for i := range atts.Items {
		a := &atts.Items[i]
		exists[a.Name] = true
		if a.Name == s.att.Name || !a.DeletionTimestamp.IsZero() {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(&a.Spec.VMSelector); err == nil {
			rivals = append(rivals, rival{att: a, selector: sel})
		}
	}
	s.vms = s.vms[:0]
	for i := range vms {
		vm := &vms[i]
		owner := wiring.Owner(vm.Object)
		if !s.selector.Matches(labels.Set(vm.GetLabels())) {
			if owner == s.att.Name {
				s.release = append(s.release, vm)
			}
			continue
		}
		st := &vmState{name: vm.GetName(), vm: vm}
		switch older := olderRival(s.att, rivals, vm.GetLabels()); {
		case older != "":
			st.conflict = fmt.Sprintf("VM %s is also selected by FastPathAttachment %s, which is older and wires it", st.name, older)
			if owner == s.att.Name {
				s.release = append(s.release, vm)
			}
		case owner != "" && owner != s.att.Name && exists[owner]:
			st.conflict = fmt.Sprintf("VM %s is wired by FastPathAttachment %s; it is wired here once %s releases it", st.name, owner, owner)
		case owner != "" && owner != s.att.Name:
			st.staleOwner = owner
		case wiring.Stale(vm.Object, s.att.Name, string(s.att.UID)):
			// An earlier attachment of this name wired the VM (or the cache
			// has not yet seen it unwire the VM): unwire that first, so the
			// VM is never counted as wired on the strength of its record.
			st.staleOwner = owner
			st.staleUID = wiring.OwnerUID(vm.Object)
		}
		s.vms = append(s.vms, st)
	}
	sort.Slice(s.vms, func(i, j int) bool { return s.vms[i].name < s.vms[j].name })
	s.att.Status.SelectedVMs = int32(len(s.vms))

	if s.spec.VSOCK != nil {
		for i, svc := range s.spec.VSOCK.Services {
			if slices.ContainsFunc(s.vms, func(v *vmState) bool { return v.name == svc.VM }) {
				continue
			}
			// A VM that does not exist (yet) is not a spec error: applying a
			// directory creates the attachment before its VMs. reconcileVSOCK
			// reports it (TargetNotFound) and the VM watch brings the
			// attachment back when the VM is created. A VM that exists and is
			// not selected is an error only the spec can fix.
			if slices.ContainsFunc(vms, func(vm unstructured.Unstructured) bool { return vm.GetName() == svc.VM }) {
				return ctrl.Result{}, s.invalidSpec("spec.vsock.services[%d].vm %q is not a VirtualMachine selected by spec.vmSelector", i, svc.VM)
			}
		}
	}
	return ctrl.Result{}, nil
}

// rival is another live attachment in the namespace.
type rival struct {
	att      *v1alpha1.FastPathAttachment
	selector labels.Selector
}

// olderRival returns the oldest rival that selects a VM with these labels and
// is older than att (creationTimestamp, then name), or "".
func olderRival(att *v1alpha1.FastPathAttachment, rivals []rival, vmLabels map[string]string) string {
	best := att
	for _, r := range rivals {
		if r.selector.Matches(labels.Set(vmLabels)) && older(r.att, best) {
			best = r.att
		}
	}
	if best == att {
		return ""
	}
	return best.Name
}

func older(a, b *v1alpha1.FastPathAttachment) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}
