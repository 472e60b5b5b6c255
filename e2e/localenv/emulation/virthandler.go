package emulation

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// launcher is the emulated virt-launcher pod of one VMI and its guest: two
// network namespaces, the launcher's with the pod network and the Multus
// networks, the guest's with the interfaces KubeVirt's bindings give it and
// what cloud-init started.
type launcher struct {
	uid         types.UID
	key         types.NamespacedName
	podName     string
	podUID      types.UID
	containerID string
	netns       *topology.NetNS
	guest       *topology.NetNS
	masq        *topology.Masquerade
	bindings    []*topology.BridgeBinding
	podIP       netip.Addr
	nets        []*attachedNet
	netservers  []*netperf.Netserver
	cid         *uint32
	// real is the REAL guest with Options.Guests "qemu" (nil otherwise;
	// then guest is nil).
	real     *guests.Guest
	dir      string
	keysFile string
	started  metav1.Time
	// reported is set once the Running status was written (logged once).
	reported bool
}

// retryAfter is how long the emulated kubelet waits before retrying a pod
// sandbox that failed (the kubelet backs off similarly).
const retryAfter = 2 * time.Second

func (e *Emulator) setupVirtHandler(mgr ctrl.Manager) error {
	e.reader = mgr.GetAPIReader()
	err := ctrl.NewControllerManagedBy(mgr).
		Named("emulated-virt-handler").
		For(&kubevirtv1.VirtualMachineInstance{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(reconcile.Func(e.reconcileVMI))
	if err != nil {
		return fmt.Errorf("failed to set up the emulated virt-handler: %w", err)
	}
	return nil
}

// reconcileVMI starts a launcher for a VMI that has none, tears down the
// launcher of a VMI that is gone (or replaced by one with a new UID), and
// writes the VMI status as virt-handler would.
func (e *Emulator) reconcileVMI(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := e.cli.Get(ctx, req.NamespacedName, vmi); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, e.teardown(ctx, req.NamespacedName, "the VMI was deleted")
		}
		return reconcile.Result{}, err
	}
	if vmi.DeletionTimestamp != nil {
		return reconcile.Result{}, e.teardown(ctx, req.NamespacedName, "the VMI is being deleted")
	}
	e.mu.Lock()
	l := e.launchers[req.NamespacedName]
	stopped := e.stopped
	e.mu.Unlock()
	if stopped {
		return reconcile.Result{}, nil
	}
	if l != nil && l.uid != vmi.UID {
		if err := e.teardown(ctx, req.NamespacedName, "a new VMI with the same name replaced it"); err != nil {
			return reconcile.Result{}, err
		}
		l = nil
	}
	if l == nil {
		var err error
		if l, err = e.launch(ctx, vmi); err != nil {
			e.log.printf("virt-handler", "%s: failed to start the launcher, retrying in %s: %v", req, retryAfter, err)
			return reconcile.Result{RequeueAfter: retryAfter}, nil
		}
	}
	return reconcile.Result{}, e.writeVMIStatus(ctx, vmi, l)
}

// launch builds a VMI's launcher: network namespace, masquerade pod network,
// one CNI ADD per Multus network, authorized SSH keys, cloud-init's
// netserver and a vsock CID. It undoes everything when a step fails.
func (e *Emulator) launch(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (_ *launcher, err error) {
	key := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	uid := string(vmi.UID)
	l := &launcher{
		uid:         vmi.UID,
		key:         key,
		podName:     launcherPodName(vmi.Name, uid),
		podUID:      types.UID("emulated-" + sandboxID("pod", uid)[:24]),
		containerID: sandboxID(e.opts.Prefix, uid),
		dir:         filepath.Join(e.opts.StateDir, "vms", vmi.Namespace, vmi.Name),
		started:     metav1.Now(),
	}
	defer func() {
		if err != nil {
			e.release(context.WithoutCancel(ctx), l)
		}
	}()
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", l.dir, err)
	}
	if _, ok := e.siblingSocket(vmi); ok {
		if err := e.createLauncherPod(ctx, vmi, l); err != nil {
			return nil, err
		}
	}
	if err := e.siblingSocketReady(vmi); err != nil {
		return nil, err
	}
	nsName := e.opts.Prefix + vmi.Namespace + "." + l.podName
	guestName := e.opts.Prefix + vmi.Namespace + "." + vmi.Name
	for _, n := range []string{nsName, guestName} {
		if err := topology.DeleteNetNS(n); err != nil {
			return nil, err
		}
	}
	if l.netns, err = topology.NewNetNS(nsName); err != nil {
		return nil, err
	}
	if !e.realGuests() {
		if l.guest, err = topology.NewNetNS(guestName); err != nil {
			return nil, err
		}
	}
	guestIfs := guestInterfaceNames(vmi)
	if l.podIP, err = e.allocatePodIP(); err != nil {
		return nil, err
	}
	hostIf := hostIfName(e.opts.HostIfPrefix, uid)
	if err := topology.DeleteHostLink(hostIf); err != nil {
		return nil, err
	}
	if podNet := podNetwork(vmi); podNet != "" {
		if iface := specInterface(vmi, podNet); iface == nil || iface.Masquerade == nil {
			return nil, fmt.Errorf("failed to wire the pod network of %s: only the masquerade binding is emulated for it", key)
		}
		mo := topology.MasqueradeOptions{HostIfName: hostIf, PodIP: l.podIP, Guest: l.guest, GuestIfName: guestIfs[podNet]}
		if e.realGuests() {
			mo = topology.MasqueradeOptions{HostIfName: hostIf, PodIP: l.podIP, ExternalGuest: true}
		}
		if l.masq, err = topology.AddMasquerade(l.netns, mo); err != nil {
			return nil, fmt.Errorf("failed to wire the pod network of %s: %w", key, err)
		}
		e.log.printf("kubelet", "pod %s/%s (VMI %s): network namespace %s, pod network eth0 %s/32 MTU %d via host veth %s",
			vmi.Namespace, l.podName, vmi.Name, nsName, l.podIP, l.masq.MTU, hostIf)
		if e.realGuests() {
			e.log.printf("virt-launcher", "%s: masquerade binding: k6t-eth0 10.0.2.1 (TX checksum off, as KubeVirt), NAT rules; the real guest's tap0 joins it, DHCP hands it %s",
				key, l.masq.GuestIP)
		} else {
			e.log.printf("virt-launcher", "%s: masquerade binding: k6t-eth0 10.0.2.1 (TX checksum off, as KubeVirt), NAT rules, tap0 -> guest %s %s (guest namespace %s)",
				key, l.masq.GuestIfName, l.masq.GuestIP, guestName)
		}
	}
	for _, n := range multusNetworks(vmi) {
		iface := specInterface(vmi, n.Name)
		if iface == nil {
			continue
		}
		// Fastpath's binding plugin has domainAttachmentType managedTap:
		// virt-launcher makes the tap and in-pod bridge as for the bridge
		// binding, which is what is emulated for both.
		if iface.Bridge == nil && (iface.Binding == nil || iface.Binding.Name != wiring.DefaultBinding) {
			return nil, fmt.Errorf("failed to wire network %s of %s: only the bridge binding and the binding plugin %q are emulated for Multus networks", n.Name, key, wiring.DefaultBinding)
		}
		a, err := e.cniAdd(ctx, l, vmi, n)
		if err != nil {
			return nil, err
		}
		l.nets = append(l.nets, a)
		b, err := topology.AddBridgeBinding(l.netns, l.guest, topology.BridgeBindingOptions{PodIfName: a.podIf, GuestIfName: guestIfs[n.Name]})
		if err != nil {
			return nil, fmt.Errorf("failed to bind network %s of %s: %w", n.Name, key, err)
		}
		l.bindings = append(l.bindings, b)
		a.guestIf = b.GuestIfName
		if e.realGuests() {
			e.log.printf("virt-launcher", "%s: bridge binding of %s: %s is a port of %s (TX checksum off); the real guest's %s joins it, DHCP hands it mac %s MTU %d %s",
				key, n.Name, a.podIf, b.BridgeName, b.TapName, b.MAC, b.MTU, strings.Join(a.ips, ","))
			continue
		}
		e.log.printf("virt-launcher", "%s: bridge binding of %s: %s is a port of %s (TX checksum off), %s -> guest %s mac %s MTU %d %s",
			key, n.Name, a.podIf, b.BridgeName, b.TapName, b.GuestIfName, b.MAC, b.MTU, strings.Join(a.ips, ","))
	}
	l.keysFile = filepath.Join(l.dir, "authorized_keys")
	if n, err := e.authorizedKeys(ctx, vmi, l.keysFile); err != nil {
		return nil, err
	} else if n > 0 {
		e.log.printf("virt-launcher", "%s: %d SSH public key(s) from accessCredentials authorised in the guest", key, n)
	}
	if !e.realGuests() {
		if err := e.runCloudInit(ctx, l, vmi); err != nil {
			return nil, err
		}
	}
	if vsockRequested(vmi) && e.opts.VSOCKRoot != "" {
		cid, err := e.allocateCID()
		if err != nil {
			return nil, err
		}
		l.cid = &cid
		if e.realGuests() {
			e.log.printf("virt-handler", "%s: vsock CID %d (the real guest's vhost-device-vsock, hybrid socket %s)", key, cid, vsock.NewUnixTransport(e.opts.VSOCKRoot, cid).HybridPath(cid))
		} else {
			e.log.printf("virt-handler", "%s: vsock CID %d (UNIX-socket transport under %s)", key, cid, e.opts.VSOCKRoot)
		}
	}
	if e.realGuests() {
		e.log.printf("cloud-init", "%s: the real-guest image starts netserver itself (port 12865); cloud-init runcmd is not run", key)
		if err := e.bootRealGuest(ctx, l, vmi); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	e.launchers[key] = l
	e.mu.Unlock()
	if err := e.writeSSHHosts(); err != nil {
		e.mu.Lock()
		delete(e.launchers, key)
		e.mu.Unlock()
		return nil, err
	}
	return l, nil
}

func vsockRequested(vmi *kubevirtv1.VirtualMachineInstance) bool {
	v := vmi.Spec.Domain.Devices.AutoattachVSOCK
	return v != nil && *v
}

// teardown removes the launcher of key, if any.
func (e *Emulator) teardown(ctx context.Context, key types.NamespacedName, why string) error {
	e.mu.Lock()
	l := e.launchers[key]
	delete(e.launchers, key)
	e.mu.Unlock()
	// A launcher pod object may exist whether or not the launch finished
	// (createLauncherPod comes before the wait for the Sibling socket).
	podErr := e.cli.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(key.Namespace), client.MatchingLabels{emulatedLauncherLabel: key.Name})
	if podErr != nil && !apierrors.IsNotFound(podErr) {
		podErr = fmt.Errorf("failed to delete the launcher pod of %s: %w", key, podErr)
	} else {
		podErr = nil
	}
	if l == nil {
		return podErr
	}
	err := errors.Join(podErr, e.release(ctx, l))
	if hostsErr := e.writeSSHHosts(); hostsErr != nil {
		err = errors.Join(err, hostsErr)
	}
	e.log.printf("kubelet", "pod %s/%s of VMI %s removed (%s)", key.Namespace, l.podName, key.Name, why)
	return err
}

// release undoes a (possibly partial) launcher, in reverse order.
func (e *Emulator) release(ctx context.Context, l *launcher) error {
	var errs []error
	if l.real != nil {
		if err := l.real.Stop(); err != nil {
			errs = append(errs, err)
		}
		l.real = nil
	}
	for _, ns := range l.netservers {
		if err := ns.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(l.bindings) - 1; i >= 0; i-- {
		if err := l.bindings[i].Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(l.nets) - 1; i >= 0; i-- {
		if err := e.cniDel(ctx, l.nets[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if l.masq != nil {
		if err := l.masq.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range []*topology.NetNS{l.guest, l.netns} {
		if n != nil {
			if err := n.Delete(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	e.mu.Lock()
	if l.podIP.IsValid() {
		delete(e.podIPs, l.podIP)
	}
	if l.cid != nil {
		delete(e.cids, *l.cid)
	}
	e.mu.Unlock()
	if l.dir != "" {
		if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", l.dir, err))
		}
	}
	return errors.Join(errs...)
}

// allocatePodIP hands out the lowest free pod IP from .10 of PodCIDR.
func (e *Emulator) allocatePodIP() (netip.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.opts.PodCIDR.Addr()
	for range 10 {
		a = a.Next()
	}
	for ; e.opts.PodCIDR.Contains(a); a = a.Next() {
		if !e.opts.PodCIDR.Contains(a.Next()) {
			break // the broadcast address
		}
		if !e.podIPs[a] {
			e.podIPs[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("failed to allocate a pod IP: %s is exhausted", e.opts.PodCIDR)
}

// allocateCID hands out the lowest free guest CID from FirstCID.
func (e *Emulator) allocateCID() (uint32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := e.opts.FirstCID; c < e.opts.FirstCID+1<<16; c++ {
		if !e.cids[c] {
			e.cids[c] = true
			return c, nil
		}
	}
	return 0, fmt.Errorf("failed to allocate a vsock CID")
}

// writeVMIStatus writes what virt-handler reports for a running VMI: phase,
// node, interfaces (from the launcher's real interfaces), the vsock CID, a
// Ready condition, and the kubevirt.io/nodeName label. It writes nothing when
// the status is already so.
func (e *Emulator) writeVMIStatus(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, l *launcher) error {
	if vmi.Labels[kubevirtv1.NodeNameLabel] != e.opts.NodeName {
		patch := client.MergeFrom(vmi.DeepCopy())
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[kubevirtv1.NodeNameLabel] = e.opts.NodeName
		if err := e.cli.Patch(ctx, vmi, patch); err != nil {
			return fmt.Errorf("failed to label VMI %s with its node: %w", l.key, err)
		}
	}
	want := vmi.Status.DeepCopy()
	want.Phase = kubevirtv1.Running
	want.NodeName = e.opts.NodeName
	want.Interfaces = e.interfaceStatus(vmi, l)
	want.VSOCKCID = l.cid
	want.ActivePods = map[types.UID]string{l.podUID: e.opts.NodeName}
	want.GuestOSInfo = kubevirtv1.VirtualMachineInstanceGuestOSInfo{
		Name: "Fastpath emulation",
	}
	if l.real != nil {
		want.GuestOSInfo.Name = "Fastpath real guest"
		want.GuestOSInfo.PrettyName = guests.Label + ": Debian cloud kernel, busybox initramfs"
	} else {
		want.GuestOSInfo.PrettyName = "EMULATED guest: network namespace " + l.guest.Name
	}
	ready := kubevirtv1.VirtualMachineInstanceCondition{
		Type:               kubevirtv1.VirtualMachineInstanceReady,
		Status:             corev1.ConditionTrue,
		LastTransitionTime: l.started,
	}
	want.Conditions = slices.DeleteFunc(want.Conditions, func(c kubevirtv1.VirtualMachineInstanceCondition) bool {
		return c.Type == kubevirtv1.VirtualMachineInstanceReady
	})
	want.Conditions = append(want.Conditions, ready)
	if equality.Semantic.DeepEqual(*want, vmi.Status) {
		return nil
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Status = *want
	if err := e.cli.Status().Patch(ctx, vmi, patch); err != nil {
		return fmt.Errorf("failed to write the status of VMI %s: %w", l.key, err)
	}
	e.mu.Lock()
	first := !l.reported
	l.reported = true
	e.mu.Unlock()
	if first {
		var ifs []string
		for _, i := range want.Interfaces {
			ifs = append(ifs, fmt.Sprintf("%s=%s(%s)", i.Name, i.IP, i.InterfaceName))
		}
		cid := "none"
		if l.cid != nil {
			cid = fmt.Sprint(*l.cid)
		}
		e.log.printf("virt-handler", "VMI %s Running on %s: interfaces %s, vsock CID %s", l.key, e.opts.NodeName, strings.Join(ifs, " "), cid)
	}
	return nil
}

// interfaceStatus lists the VMI interfaces as virt-handler reports them
// from the guest: interfaceName is the guest's (eth0, eth1, ... in spec
// order), podInterfaceName the launcher's (eth0 for the pod network, the
// hashed name for each Multus network). The pod network reports the pod IP,
// as KubeVirt does for the masquerade binding.
func (e *Emulator) interfaceStatus(vmi *kubevirtv1.VirtualMachineInstance, l *launcher) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	var out []kubevirtv1.VirtualMachineInstanceNetworkInterface
	for _, n := range vmi.Spec.Networks {
		if specInterface(vmi, n.Name) == nil {
			continue
		}
		switch {
		case n.Pod != nil && l.masq != nil:
			out = append(out, kubevirtv1.VirtualMachineInstanceNetworkInterface{
				Name: n.Name, InterfaceName: l.masq.GuestIfName, PodInterfaceName: l.masq.PodIfName,
				IP: l.podIP.String(), IPs: []string{l.podIP.String()}, MAC: l.masq.GuestMAC,
				InfoSource: "domain, guest-agent", LinkState: "up",
			})
		case n.Multus != nil && !n.Multus.Default:
			for _, a := range l.nets {
				if a.network != n.Name {
					continue
				}
				out = append(out, kubevirtv1.VirtualMachineInstanceNetworkInterface{
					Name: n.Name, InterfaceName: a.guestIf, PodInterfaceName: a.podIf,
					IP: a.ips[0], IPs: a.ips, MAC: a.mac,
					InfoSource: "domain, guest-agent, multus-status", LinkState: "up",
				})
			}
		}
	}
	return out
}

// podNetwork returns the name of the VMI's pod network, "" when it has none.
func podNetwork(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			return n.Name
		}
	}
	return ""
}

// guestInterfaceNames names the guest's NICs by spec interface order, eth0,
// eth1, ..., as a Linux guest with net.ifnames=0 names its virtio NICs.
func guestInterfaceNames(vmi *kubevirtv1.VirtualMachineInstance) map[string]string {
	out := map[string]string{}
	for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
		out[iface.Name] = fmt.Sprintf("eth%d", i)
	}
	return out
}

// emulatedLauncherLabel marks the launcher pods createLauncherPod made, with
// their VMI's name, for teardown to delete.
const emulatedLauncherLabel = "fastpath.io/emulated-launcher-of"

// createLauncherPod creates the virt-launcher Pod object of a vsock mode
// Sibling VMI, bound to this node, as virt-controller and the scheduler do
// before QEMU starts: the node agent starts a Sibling group's
// vhost-device-vsock once a member's launcher pod is bound to its node
// (controllers/nodeagent, sibling placement), and QEMU needs that socket to boot.
// EMULATED: no kubelet runs the pod; the launcher is the network namespace
// and the QEMU of this emulation. An existing pod is left as it is; a failed
// launch keeps it (the next try waits on the same pod), teardown deletes it.
func (e *Emulator) createLauncherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, l *launcher) error {
	controller := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vmi.Namespace, Name: l.podName,
			Labels: map[string]string{kubevirtv1.AppLabel: "virt-launcher", kubevirtv1.CreatedByLabel: string(vmi.UID), emulatedLauncherLabel: vmi.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance",
				Name: vmi.Name, UID: vmi.UID, Controller: &controller}},
		},
		Spec: corev1.PodSpec{NodeName: e.opts.NodeName, Containers: []corev1.Container{{Name: "compute", Image: "emulated/virt-launcher"}}},
	}
	if err := e.cli.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create the launcher pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
