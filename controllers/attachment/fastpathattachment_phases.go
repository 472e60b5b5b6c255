package attachment

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/cni/pkg/netconf"
	"github.com/fastpath-io/fastpath/internal/vm/tuning"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// maxVMPatchAttempts bounds the re-read-and-retry loop of one VM patch.
const maxVMPatchAttempts = 4

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
}

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
	wired      bool
	wireErr    error
	vmi        *kubevirtv1.VirtualMachineInstance
	status     v1alpha1.VMStatus
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
func (r *Reconciler) reconcileSpec(_ context.Context, s *scope) error {
	s.spec = v1alpha1.DefaultAttachmentSpec(s.att.Spec)
	s.desired = wiring.ForAttachment(s.att)
	s.desired.DomainHookImage = r.opts.DomainHookImage
	st := &s.att.Status
	st.Datapath, st.MTU = "", 0
	sel, err := metav1.LabelSelectorAsSelector(&s.att.Spec.VMSelector)
	if err != nil {
		return s.invalidSpec("spec.vmSelector is invalid: %v", err)
	}
	s.selector = sel
	n := s.spec.Network
	if n == nil {
		return nil
	}
	st.Datapath, st.MTU = n.Datapath, *n.MTU
	subnet, err := netip.ParsePrefix(n.IPAM.Subnet)
	if err != nil {
		return s.invalidSpec("spec.network.ipam.subnet %q is not a CIDR: %v", n.IPAM.Subnet, err)
	}
	for _, pod := range r.opts.PodNetworkCIDRs {
		if subnet.Masked().Overlaps(pod) {
			return s.invalidSpec("spec.network.ipam.subnet %s overlaps the pod network %s (--pod-network-cidr): choose a range the cluster does not route", n.IPAM.Subnet, pod)
		}
	}
	if n.IPAM.RangeStart != "" && n.IPAM.RangeEnd != "" {
		start, err1 := netip.ParseAddr(n.IPAM.RangeStart)
		end, err2 := netip.ParseAddr(n.IPAM.RangeEnd)
		if err1 == nil && err2 == nil && start.Compare(end) > 0 {
			return s.invalidSpec("spec.network.ipam.rangeStart %s is after spec.network.ipam.rangeEnd %s", start, end)
		}
	}
	if n.Offloads.TSO.On() && !n.Offloads.TXChecksum.On() {
		return s.invalidSpec("spec.network.offloads.tso On requires spec.network.offloads.txChecksum On: the kernel turns TSO off without TX checksum offload")
	}
	conf, err := RenderNetConf(s.att)
	if err != nil {
		return err
	}
	if _, _, err := netconf.LoadNetConf([]byte(conf)); err != nil {
		return s.invalidSpec("spec.network renders a netconf the fastpath plugin rejects: %v", err)
	}
	return nil
}

// reconcileSelection finds the selected VMs, who owns each and which VMs
// carry our wiring without being ours any more.
func (r *Reconciler) reconcileSelection(ctx context.Context, s *scope) error {
	vms, err := r.listVMs(ctx, r.reader, s.att.Namespace)
	if err != nil {
		return err
	}
	atts := &v1alpha1.FastPathAttachmentList{}
	if err := r.reader.List(ctx, atts, client.InNamespace(s.att.Namespace)); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments in %s: %w", s.att.Namespace, err)
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
				return s.invalidSpec("spec.vsock.services[%d].vm %q is not a VirtualMachine selected by spec.vmSelector", i, svc.VM)
			}
		}
	}
	return nil
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

// reconcileNetwork ensures the NetworkAttachmentDefinition.
func (r *Reconciler) reconcileNetwork(ctx context.Context, s *scope) error {
	key := client.ObjectKeyFromObject(s.att)
	nad := &nadv1.NetworkAttachmentDefinition{}
	err := r.reader.Get(ctx, key, nad)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
	}
	found := err == nil
	if s.spec.Network == nil {
		s.att.Status.NetworkAttachmentDefinition = ""
		if found && metav1.IsControlledBy(nad, s.att) {
			if err := r.client.Delete(ctx, nad); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to delete NetworkAttachmentDefinition %s: %w", key, err)
			}
		}
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNotRequested, "spec.network is not set")
		return nil
	}
	config, err := RenderNetConf(s.att)
	if err != nil {
		return err
	}
	if err := r.ensureNAD(ctx, s, nad, found, config); err != nil {
		if errors.Is(err, errHalt) {
			return err
		}
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNADFailed, err.Error())
		return err
	}
	s.att.Status.NetworkAttachmentDefinition = key.String()
	n := s.spec.Network
	s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNADCreated,
		fmt.Sprintf("NetworkAttachmentDefinition %s: datapath %s, bridge %s, MTU %d", key, n.Datapath, n.Bridge, *n.MTU))
	return nil
}

func (r *Reconciler) ensureNAD(ctx context.Context, s *scope, nad *nadv1.NetworkAttachmentDefinition, found bool, config string) error {
	key := client.ObjectKeyFromObject(s.att)
	if !found {
		nad = &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
		nad.Labels = map[string]string{v1alpha1.AttachmentLabel: s.att.Name}
		nad.Spec.Config = config
		if err := controllerutil.SetControllerReference(s.att, nad, r.client.Scheme()); err != nil {
			return fmt.Errorf("failed to set owner of NetworkAttachmentDefinition %s: %w", key, err)
		}
		err := r.client.Create(ctx, nad, client.FieldOwner(v1alpha1.FieldManager))
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create NetworkAttachmentDefinition %s: %w", key, err)
		}
		// The cache was behind; compare with the live object.
		nad = &nadv1.NetworkAttachmentDefinition{}
		if err := r.live.Get(ctx, key, nad); err != nil {
			return fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
		}
	}
	if !metav1.IsControlledBy(nad, s.att) {
		s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNADConflict,
			fmt.Sprintf("NetworkAttachmentDefinition %s exists and is not owned by this attachment: delete or rename it", key))
		return errHalt
	}
	if nad.Spec.Config == config && nad.Labels[v1alpha1.AttachmentLabel] == s.att.Name {
		return nil
	}
	base := nad.DeepCopy()
	nad.Spec.Config = config
	if nad.Labels == nil {
		nad.Labels = map[string]string{}
	}
	nad.Labels[v1alpha1.AttachmentLabel] = s.att.Name
	if err := r.client.Patch(ctx, nad, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("failed to update NetworkAttachmentDefinition %s: %w", key, err)
	}
	return nil
}

// reconcileWiring wires the VMs this attachment owns and unwires the ones it
// released.
func (r *Reconciler) reconcileWiring(ctx context.Context, s *scope) error {
	var jobs []func(context.Context)
	for _, st := range s.vms {
		if st.conflict != "" {
			continue
		}
		jobs = append(jobs, func(ctx context.Context) {
			tookOver := false
			changed, err := r.patchVM(ctx, st.vm, func(obj map[string]any) (bool, error) {
				unwired := false
				if owner := wiring.Owner(obj); owner != "" && owner == st.staleOwner {
					var err error
					if unwired, err = wiring.Unwire(obj); err != nil {
						return false, err
					}
				}
				tookOver = unwired
				wired, err := wiring.Wire(obj, s.desired)
				return unwired || wired, err
			})
			if err == nil && changed && tookOver {
				r.recorder.Eventf(st.vm, corev1.EventTypeNormal, v1alpha1.ReasonOrphanUnwired,
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
	runBounded(ctx, r.opts.WiringWorkers, jobs)

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
		return errors.Join(failed...)
	case len(conflicts) > 0:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonVMConflict, summarize(conflicts))
	case len(s.vms) == 0:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonNoVMsSelected,
			fmt.Sprintf("spec.vmSelector matches no VirtualMachine in namespace %s", s.att.Namespace))
	default:
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionTrue, v1alpha1.ReasonWired,
			fmt.Sprintf("%d of %d selected VMs wired%s", wired, len(s.vms), domainHookNote(s.desired)))
	}
	return nil
}

// domainHookNote says in the VMsWired message whether the wired VMs carry the
// domain hook sidecar, so an operator without --domain-hook-image is visible.
func domainHookNote(d wiring.Desired) string {
	switch {
	case d.Network == nil:
		return ""
	case d.DomainHookImage == "":
		return "; no domain hook sidecar (fastpath-operator runs without --domain-hook-image): rx/tx ring sizes, the queue cap and offloads of " +
			v1alpha1.TuningAnnotation + " have no effect"
	default:
		return fmt.Sprintf(", with the domain hook sidecar %s in %s", d.DomainHookImage, wiring.HookSidecarsAnnotation)
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
// read. On 409 Conflict it re-reads the VM live and tries again (at most
// maxVMPatchAttempts times). A VM that is gone is not an error.
func (r *Reconciler) patchVM(ctx context.Context, vm *unstructured.Unstructured, mutate func(map[string]any) (bool, error)) (bool, error) {
	cur := vm
	key := client.ObjectKeyFromObject(vm)
	for attempt := 1; ; attempt++ {
		mod := cur.DeepCopy()
		changed, err := mutate(mod.Object)
		if err != nil || !changed {
			return false, err
		}
		err = r.client.Patch(ctx, mod, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}), client.FieldOwner(v1alpha1.FieldManager))
		vmPatches.WithLabelValues(patchResult(err)).Inc()
		if err == nil {
			return true, nil
		}
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if !apierrors.IsConflict(err) || attempt >= maxVMPatchAttempts {
			return false, fmt.Errorf("failed to patch VirtualMachine %s: %w", key, err)
		}
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
		if err := r.live.Get(ctx, key, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("failed to get VirtualMachine %s: %w", key, err)
		}
		cur = fresh
	}
}

// reconcileObservation fills the per-VM status from the VMIs and sets Colocated.
func (r *Reconciler) reconcileObservation(ctx context.Context, s *scope) error {
	netName := v1alpha1.NetworkName(s.att.Name)
	var restart []string
	for _, st := range s.vms {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := r.reader.Get(ctx, types.NamespacedName{Namespace: s.att.Namespace, Name: st.name}, vmi); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to get VirtualMachineInstance %s/%s: %w", s.att.Namespace, st.name, err)
			}
			vmi = nil
		}
		st.vmi = vmi
		vs := v1alpha1.VMStatus{Name: st.name, Wired: st.wired && st.member()}
		if n := s.spec.Network; n != nil && vs.Wired {
			vs.MTU = *n.MTU
		}
		switch {
		case st.conflict != "":
			vs.Message = st.conflict
		case st.wireErr != nil:
			vs.Message = st.wireErr.Error()
		case vmi == nil:
			vs.Message = "not running: the VM has no VirtualMachineInstance"
		}
		if vmi != nil {
			vs.Node = vmi.Status.NodeName
			for _, iface := range vmi.Status.Interfaces {
				if iface.Name != netName {
					continue
				}
				vs.Interface, vs.PodInterface, vs.MAC = iface.InterfaceName, iface.PodInterfaceName, iface.MAC
				vs.IPs = slices.Clone(iface.IPs)
				if len(vs.IPs) == 0 && iface.IP != "" {
					vs.IPs = []string{iface.IP}
				}
			}
			if vmi.Status.VSOCKCID != nil {
				cid := int64(*vmi.Status.VSOCKCID)
				vs.CID = &cid
			}
			if vs.Wired {
				if missing := missingWiring(vmi, s.desired); len(missing) > 0 {
					vs.RestartRequired = true
					vs.Message = "restart the VM to apply the fast path: the running VMI lacks " + strings.Join(missing, ", ")
					restart = append(restart, st.name)
				}
			}
		}
		st.status = vs
	}
	s.restart = restart
	s.observed = true
	s.setColocated()
	return nil
}

// missingWiring lists what the desired wiring adds that the running VMI's spec lacks.
func missingWiring(vmi *kubevirtv1.VirtualMachineInstance, d wiring.Desired) []string {
	name := v1alpha1.NetworkName(d.Attachment)
	var missing []string
	if d.Network != nil {
		if !slices.ContainsFunc(vmi.Spec.Networks, func(n kubevirtv1.Network) bool { return n.Name == name }) {
			missing = append(missing, "network "+name)
		}
		if !slices.ContainsFunc(vmi.Spec.Domain.Devices.Interfaces, func(i kubevirtv1.Interface) bool { return i.Name == name }) {
			missing = append(missing, "interface "+name)
		}
	}
	if d.Network != nil && len(missing) == 0 {
		// Only for a VMI that has the interface: a missing one implies it.
		if diff := tuningDiff(vmi.Annotations[v1alpha1.TuningAnnotation], name, d.Network.Tuning); diff != "" {
			missing = append(missing, "the current tuning of "+name+" ("+diff+")")
		}
	}
	if d.VSOCK && (vmi.Spec.Domain.Devices.AutoattachVSOCK == nil || !*vmi.Spec.Domain.Devices.AutoattachVSOCK) {
		missing = append(missing, "autoattachVSOCK")
	}
	if d.Network != nil && d.DomainHookImage != "" {
		// KubeVirt copies the template annotations to the VMI when it starts.
		images, err := wiring.HookSidecarImages(vmi.Annotations[wiring.HookSidecarsAnnotation])
		if err != nil || !slices.Contains(images, d.DomainHookImage) {
			missing = append(missing, "domain hook sidecar "+d.DomainHookImage)
		}
	}
	return missing
}

// tuningDiff compares the tuning of interface name in a running VMI's
// fastpath.io/tuning annotation (KubeVirt copies the template's annotations
// to the VMI when it starts; the domain hook reads them there) with want:
// "" when equal, "running none" when the VMI has no valid tuning for name,
// else tuning.Interface.Diff.
func tuningDiff(annotation, name string, want tuning.Interface) string {
	var got tuning.Interface
	if a, err := tuning.Parse(annotation); err == nil {
		got = a.Interfaces[name]
	}
	if got == (tuning.Interface{}) && want != got {
		return "running none"
	}
	return want.Diff(got)
}

// reconcileVSOCK allocates relay ports and computes the relay routes.
func (r *Reconciler) reconcileVSOCK(ctx context.Context, s *scope) error {
	if s.spec.VSOCK == nil {
		r.ports.release(s.key())
		s.att.Status.VSOCKServices = nil
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNotRequested, "spec.vsock is not set")
		return nil
	}
	all := &v1alpha1.FastPathAttachmentList{}
	if err := r.reader.List(ctx, all); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	pairs := map[string]int64{}
	for _, a := range all.Items {
		for _, svc := range a.Status.VSOCKServices {
			if svc.RelayPort > 0 {
				pairs[portKey(a.Namespace+"/"+a.Name, svc.Name)] = svc.RelayPort
			}
		}
	}
	previous := map[string]int64{}
	for _, svc := range s.att.Status.VSOCKServices {
		previous[svc.Name] = svc.RelayPort
	}
	names := make([]string, len(s.spec.VSOCK.Services))
	for i, svc := range s.spec.VSOCK.Services {
		names[i] = svc.Name
	}
	ports, allocErr := r.ports.assign(s.key(), names, previous, claimsFrom(pairs))

	byName := map[string]*vmState{}
	for _, st := range s.vms {
		byName[st.name] = st
	}
	var notFound, notRunning, noCID []string
	for _, st := range s.vms {
		if st.member() && st.vmi != nil && st.vmi.Status.VSOCKCID == nil {
			noCID = append(noCID, st.name)
		}
	}
	services := make([]v1alpha1.VSOCKServiceStatus, 0, len(s.spec.VSOCK.Services))
	for _, svc := range s.spec.VSOCK.Services {
		out := v1alpha1.VSOCKServiceStatus{Name: svc.Name, VM: svc.VM, Port: svc.Port, RelayPort: ports[svc.Name]}
		target := byName[svc.VM]
		switch {
		case target == nil:
			// reconcileSelection rejected a target that exists unselected.
			notFound = append(notFound, fmt.Sprintf("service %s: VirtualMachine %s/%s does not exist", svc.Name, s.att.Namespace, svc.VM))
			services = append(services, out)
			continue
		case target.vmi == nil:
			notRunning = append(notRunning, fmt.Sprintf("service %s: VM %s is not running", svc.Name, svc.VM))
			services = append(services, out)
			continue
		}
		out.Node = target.vmi.Status.NodeName
		out.TargetCID = target.status.CID
		for _, st := range s.vms {
			if st == target || !st.member() || st.vmi == nil || st.status.CID == nil || st.status.Node != out.Node || out.Node == "" {
				continue
			}
			out.AllowedCIDs = append(out.AllowedCIDs, *st.status.CID)
		}
		slices.Sort(out.AllowedCIDs)
		out.AllowedCIDs = slices.Compact(out.AllowedCIDs)
		services = append(services, out)
	}
	s.att.Status.VSOCKServices = services
	for _, st := range s.vms {
		if !st.member() {
			continue
		}
		for _, svc := range services {
			if svc.VM != st.name && svc.RelayPort > 0 {
				st.status.RelayPorts = append(st.status.RelayPorts, v1alpha1.RelayPort{Service: svc.Name, Port: svc.RelayPort})
			}
		}
	}
	switch {
	case allocErr != nil:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonRelayPortsExhausted,
			fmt.Sprintf("%v: widen --relay-port-range or remove vsock services", allocErr))
	case len(notFound) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotFound,
			summarize(append(notFound, notRunning...))+"; the route is set up once the VirtualMachine is created with labels spec.vmSelector matches")
	case len(notRunning) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonTargetNotRunning, summarize(notRunning))
	case len(noCID) > 0:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNoCID,
			fmt.Sprintf("VMs without a vsock CID in VMI status.VSOCKCID: %s; enable the KubeVirt VSOCK feature gate and restart them", joinNames(noCID)))
	default:
		s.setCondition(v1alpha1.VSOCKReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonVSOCKReady,
			fmt.Sprintf("%d relay routes with target CIDs", len(services)))
	}
	return nil
}

// reconcileNodes sets NodesReady from the FastPathNodes of the member VMs' nodes.
func (r *Reconciler) reconcileNodes(ctx context.Context, s *scope) error {
	nodes := s.memberNodes()
	if len(nodes) == 0 {
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNoRunningVMs, "no selected VM is running")
		return nil
	}
	var notReady, unknown []string
	for _, node := range nodes {
		fpn := &v1alpha1.FastPathNode{}
		if err := r.reader.Get(ctx, types.NamespacedName{Name: node}, fpn); err != nil {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("failed to get FastPathNode %s: %w", node, err)
			}
			unknown = append(unknown, fmt.Sprintf("node %s has no FastPathNode (is fastpath-agent running there?)", node))
			continue
		}
		c := meta.FindStatusCondition(fpn.Status.Conditions, v1alpha1.ReadyCondition)
		switch {
		case c == nil:
			unknown = append(unknown, fmt.Sprintf("FastPathNode %s has no Ready condition yet", node))
		case c.Status != metav1.ConditionTrue:
			notReady = append(notReady, fmt.Sprintf("FastPathNode %s is not Ready (%s): %s", node, c.Reason, c.Message))
		}
	}
	switch {
	case len(notReady) > 0:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonNodeNotReady, summarize(append(notReady, unknown...)))
	case len(unknown) > 0:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionUnknown, v1alpha1.ReasonNodeUnknown, summarize(unknown))
	default:
		s.setCondition(v1alpha1.NodesReadyCondition, metav1.ConditionTrue, v1alpha1.ReasonNodesReady, "FastPathNode Ready on "+strings.Join(nodes, ", "))
	}
	return nil
}

// reconcileDelete removes the wiring from every VM that carries this
// attachment's record, deletes the NAD and releases the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	if !controllerutil.ContainsFinalizer(s.att, v1alpha1.Finalizer) {
		s.deleted = true
		return nil
	}
	// A live list: the cache may not show a VM wired a moment ago.
	vms, err := r.listVMs(ctx, r.live, s.att.Namespace)
	if err != nil {
		return err
	}
	if errs := r.unwireOwned(ctx, vms, s.att.Name, nil); len(errs) > 0 {
		// Say why the finalizer stays (e.g. a hook sidecar annotation the
		// user made unreadable); fixing the VM brings the attachment back.
		s.setCondition(v1alpha1.VMsWiredCondition, metav1.ConditionFalse, v1alpha1.ReasonWiringFailed, summarize(errorStrings(errs)))
		return errors.Join(errs...)
	}
	nad := &nadv1.NetworkAttachmentDefinition{}
	key := client.ObjectKeyFromObject(s.att)
	if err := r.reader.Get(ctx, key, nad); err == nil && metav1.IsControlledBy(nad, s.att) {
		// Garbage collection would do this through the ownerReference; deleting
		// it here also works where no garbage collector runs (envtest, the demo).
		if err := r.client.Delete(ctx, nad); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete NetworkAttachmentDefinition %s: %w", key, err)
		}
	} else if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to get NetworkAttachmentDefinition %s: %w", key, err)
	}
	base := s.att.DeepCopy()
	controllerutil.RemoveFinalizer(s.att, v1alpha1.Finalizer)
	if err := r.client.Patch(ctx, s.att, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to remove finalizer from FastPathAttachment %s: %w", key, err)
	}
	r.ports.release(s.key())
	r.metrics.forget(key)
	s.deleted = true
	return nil
}

// unwireOrphans removes the wiring of attachment key, which does not
// exist, from the VMs of its namespace that still carry its record. That
// happens only when the attachment was deleted with its finalizer removed by
// hand; the VM watch maps such a VM to the attachment named in its record, on
// every change of the VM and for every VM when the operator starts, so the
// wiring goes even if the VM changes no more. Each VM gets an Event.
func (r *Reconciler) unwireOrphans(ctx context.Context, key types.NamespacedName) error {
	vms, err := r.listVMs(ctx, r.reader, key.Namespace)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(vms, func(vm unstructured.Unstructured) bool { return wiring.Owner(vm.Object) == key.Name }) {
		return nil
	}
	// The cache may not show an attachment of that name created a moment ago.
	if err := r.live.Get(ctx, key, &v1alpha1.FastPathAttachment{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to get FastPathAttachment %s: %w", key, err)
	}
	return errors.Join(r.unwireOwned(ctx, vms, key.Name, func(vm *unstructured.Unstructured) {
		ctrl.LoggerFrom(ctx).Info("Removed the wiring of a FastPathAttachment that no longer exists", "VirtualMachine", klog.KObj(vm))
		r.recorder.Eventf(vm, corev1.EventTypeNormal, v1alpha1.ReasonOrphanUnwired,
			"Removed the wiring of FastPathAttachment %s, which no longer exists (deleted without its finalizer)", key.Name)
	})...)
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
	runBounded(ctx, r.opts.WiringWorkers, jobs)
	return errs
}

// listVMs lists the VirtualMachines of a namespace as unstructured objects.
// Objects from the cache reader are shared: callers copy before changing.
func (r *Reconciler) listVMs(ctx context.Context, reader client.Reader, namespace string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(vmListGVK)
	opts := []client.ListOption{client.InNamespace(namespace)}
	if reader == r.reader {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("failed to list VirtualMachines in %s: %w", namespace, err)
	}
	return list.Items, nil
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
