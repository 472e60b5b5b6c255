package deviceplugin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	k8stypes "k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// setResource makes the compute container of each pod hold its devices of
// resource (by "namespace/name").
func (f *fakePodResources) setResource(resource string, holders map[string][]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = nil
	for pod, ids := range holders {
		key := splitKey(pod)
		f.pods = append(f.pods, &podresourcesapi.PodResources{Namespace: key.Namespace, Name: key.Name, Containers: []*podresourcesapi.ContainerResources{{
			Name: "compute", Devices: []*podresourcesapi.ContainerDevices{{ResourceName: resource, DeviceIds: ids}}}}})
	}
}

// macvtapLauncher is VM ns/vm wired by attachment "att-<vm>", whose status
// puts it on datapath with bridge, running in pod (uid "uid-pod-<vm>") on
// testNode; mutate changes the objects before they are returned.
func macvtapLauncher(ns, vm, pod string, datapath fastpathv1alpha1.Datapath, bridge string, mutate func(*kubevirtv1.VirtualMachine, *fastpathv1alpha1.FastPathAttachment, *kubevirtv1.VirtualMachineInstance)) []client.Object {
	v, att := wiredVM(ns, vm, fastpathv1alpha1.VMStatus{Name: vm, Wired: true}, wiring.ItemNetwork, wiring.ItemInterface, wiring.ItemLabel, wiring.ItemTuning)
	att.Status.Datapath, att.Status.Bridge = datapath, bridge
	vmi := siblingVMI(ns, vm, "uid-vmi-"+vm, "uid-pod-"+vm)
	delete(vmi.Annotations, fastpathv1alpha1.VSOCKModeAnnotation)
	if mutate != nil {
		mutate(v, att, vmi)
	}
	return []client.Object{v, att, vmi, launcher(ns, pod, "uid-pod-"+vm, vm, "uid-vmi-"+vm, testNode)}
}

// TestMacvtapPreStartGivesDevicesOnlyToLaunchersTheOperatorWired drives
// MacvtapLaunchers' resource through kubelet's gRPC calls: kubelet must
// call PreStartContainer, and it succeeds only for the compute container
// of the virt-launcher of a VM that a FastPathAttachment on this Macvtap
// lower device wired, holding one device. Every other holder fails the
// start with an error naming the pod and what is missing.
func TestMacvtapPreStartGivesDevicesOnlyToLaunchersTheOperatorWired(t *testing.T) {
	const lower = "fplow0"
	macvtap := fastpathv1alpha1.DatapathMacvtap
	var objs []client.Object
	add := func(o []client.Object) { objs = append(objs, o...) }
	add(macvtapLauncher("tenant-a", "vm-ok", "virt-launcher-vm-ok", macvtap, lower, nil))
	add(macvtapLauncher("tenant-a", "vm-two", "virt-launcher-vm-two", macvtap, lower, nil))
	add(macvtapLauncher("tenant-a", "vm-other-lower", "virt-launcher-vm-other-lower", macvtap, "fplow1", nil))
	add(macvtapLauncher("tenant-a", "vm-bridge", "virt-launcher-vm-bridge", fastpathv1alpha1.DatapathLinuxBridge, lower, nil))
	add(macvtapLauncher("tenant-a", "vm-unwired", "virt-launcher-vm-unwired", macvtap, lower, func(vm *kubevirtv1.VirtualMachine, _ *fastpathv1alpha1.FastPathAttachment, _ *kubevirtv1.VirtualMachineInstance) {
		vm.Annotations = nil
	}))
	add(macvtapLauncher("tenant-a", "vm-forged-uid", "virt-launcher-vm-forged-uid", macvtap, lower, func(_ *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, _ *kubevirtv1.VirtualMachineInstance) {
		att.UID = "uid-att-recreated"
	}))
	add(macvtapLauncher("tenant-a", "vm-not-listed", "virt-launcher-vm-not-listed", macvtap, lower, func(_ *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, _ *kubevirtv1.VirtualMachineInstance) {
		att.Status.VMs[0].Wired = false
	}))
	add(macvtapLauncher("tenant-a", "vm-no-network", "virt-launcher-vm-no-network", macvtap, lower, func(vm *kubevirtv1.VirtualMachine, _ *fastpathv1alpha1.FastPathAttachment, _ *kubevirtv1.VirtualMachineInstance) {
		v, _ := wiredVM("tenant-a", "vm-no-network", fastpathv1alpha1.VMStatus{}, wiring.ItemLabel)
		vm.Annotations = v.Annotations
	}))
	add(macvtapLauncher("tenant-a", "vm-alone", "virt-launcher-vm-alone", macvtap, lower, func(_ *kubevirtv1.VirtualMachine, _ *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.OwnerReferences = nil // a VMI of its own, not a VM's
	}))
	add(macvtapLauncher("tenant-a", "vm-migrating", "virt-launcher-vm-migrating", macvtap, lower, func(_ *kubevirtv1.VirtualMachine, _ *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) {
		vmi.Status.ActivePods = nil // virt-controller has not listed the target pod yet
	}))
	// The VM of another namespace wired on this lower: a pod of tenant-b
	// naming it as its VMI's VM finds nothing in its own namespace.
	add(macvtapLauncher("tenant-a", "vm-elsewhere", "virt-launcher-vm-elsewhere", macvtap, lower, nil)[:2])
	add(macvtapLauncher("tenant-b", "vm-elsewhere", "virt-launcher-vm-elsewhere", macvtap, lower, nil)[2:])
	add([]client.Object{launcher("tenant-a", "curious", "uid-curious", "nothing", "uid-nothing", testNode)})

	g := NewWithT(t)
	res, sock := startPodResources(t)
	launchers := &deviceplugin.MacvtapLaunchers{NodeName: testNode, PodResources: deviceplugin.KubeletPodResources{Socket: sock},
		Reader: fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(objs...).Build(), Log: testr.New(t)}
	resource := launchers.Resource(lower, 16)
	g.Expect(resource.Name).To(Equal(fastpathv1alpha1.MacvtapResourceName(lower)))
	k := startKubelet(t)
	s := deviceplugin.NewServer(resource, k.dir, filepath.Join(k.dir, "kubelet.sock"), 50*time.Millisecond, testr.New(t))
	g.Expect(s.Start()).To(Succeed())
	t.Cleanup(s.Stop)
	g.Expect(k.registrations()).To(HaveLen(1))
	g.Expect(k.registrations()[0].Options.PreStartRequired).To(BeTrue(), "kubelet must call PreStartContainer before a container gets /dev/tapN")

	// Each case holds its own device(s); kubelet lists them all at once.
	cases := []struct {
		pod     string
		devices int
		want    types.GomegaMatcher
	}{
		{"tenant-a/virt-launcher-vm-ok", 1, BeNil()},
		{"tenant-a/virt-launcher-vm-two", 2, MatchError(ContainSubstring("gets exactly 1"))},
		{"tenant-a/virt-launcher-vm-other-lower", 1, MatchError(ContainSubstring(`on datapath "Macvtap" with bridge "fplow1"`))},
		{"tenant-a/virt-launcher-vm-bridge", 1, MatchError(ContainSubstring(`on datapath "LinuxBridge"`))},
		{"tenant-a/virt-launcher-vm-unwired", 1, MatchError(ContainSubstring("carries no wiring record (annotation fastpath.io/wiring)"))},
		{"tenant-a/virt-launcher-vm-forged-uid", 1, MatchError(ContainSubstring("but that attachment has uid uid-att-recreated"))},
		{"tenant-a/virt-launcher-vm-not-listed", 1, MatchError(ContainSubstring("does not list VirtualMachine vm-not-listed as wired (status.vms) yet"))},
		{"tenant-a/virt-launcher-vm-no-network", 1, MatchError(ContainSubstring("added no network"))},
		{"tenant-a/virt-launcher-vm-alone", 1, MatchError(ContainSubstring("is not controlled by a VirtualMachine"))},
		{"tenant-a/virt-launcher-vm-migrating", 1, MatchError(ContainSubstring("is not in status.activePods"))},
		{"tenant-b/virt-launcher-vm-elsewhere", 1, MatchError(ContainSubstring("the VirtualMachine tenant-b/vm-elsewhere controlling"))},
		{"tenant-a/curious", 1, MatchError(ContainSubstring("does not exist"))},
	}
	holders := map[string][]string{}
	next := 0
	for _, c := range cases {
		holders[c.pod] = resource.Devices[next : next+c.devices]
		next += c.devices
	}
	res.setResource(resource.Name, holders)
	for _, c := range cases {
		ids := holders[c.pod]
		// Allocate knows no pod: it always hands out the device nodes.
		car, err := k.client().Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(car.ContainerResponses[0].Devices).To(HaveLen(len(ids)))
		_, err = k.client().PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: ids})
		g.Expect(err).To(c.want, c.pod)
		if err != nil {
			g.Expect(err.Error()).To(ContainSubstring(c.pod), "the error names the pod")
		}
	}
	// A device kubelet lists for no pod fails.
	_, err := k.client().PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: resource.Devices[15:]})
	g.Expect(err).To(MatchError(ContainSubstring("lists no pod holding it")))

	// The migration target once virt-controller lists it: kubelet's retry
	// of the start succeeds.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	g.Expect(launchers.Reader.(client.Client).Get(context.Background(), client.ObjectKey{Namespace: "tenant-a", Name: "vm-migrating"}, vmi)).To(Succeed())
	vmi.Status.ActivePods = map[k8stypes.UID]string{"uid-pod-vm-migrating": testNode}
	g.Expect(launchers.Reader.(client.Client).Update(context.Background(), vmi)).To(Succeed())
	_, err = k.client().PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: holders["tenant-a/virt-launcher-vm-migrating"]})
	g.Expect(err).NotTo(HaveOccurred())
}

// TestSiblingMountsOnlyForVMsWiredForTheResource: a launcher of a Sibling
// VMI (in status.activePods, on this node) gets no socket unless the
// operator wired its VM for vsock.fastpath.io/sibling: a VM of another
// uid, a VM without a record, a record naming another attachment's uid, a
// missing attachment or a record without the resource leave the directory
// empty for good; an attachment whose status does not (yet) list the VM as
// wired in mode Sibling fails the start, to be tried again.
func TestSiblingMountsOnlyForVMsWiredForTheResource(t *testing.T) {
	type mutation func(*kubevirtv1.VirtualMachine, *fastpathv1alpha1.FastPathAttachment, *kubevirtv1.VirtualMachineInstance) []client.Object
	keep := func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
		return []client.Object{vm, att, vmi}
	}
	cases := []struct {
		name    string
		mutate  mutation
		linked  bool
		startOK bool
		err     string
	}{
		{"wired", keep, true, true, ""},
		{"vm-uid", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			vm.UID = "uid-vm-recreated"
			return keep(vm, att, vmi)
		}, false, true, ""},
		{"no-record", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			vm.Annotations = nil
			return keep(vm, att, vmi)
		}, false, true, ""},
		{"no-attachment", func(vm *kubevirtv1.VirtualMachine, _ *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			return []client.Object{vm, vmi}
		}, false, true, ""},
		{"attachment-uid", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			att.UID = "uid-att-recreated"
			return keep(vm, att, vmi)
		}, false, true, ""},
		{"no-resource-item", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			v, _ := wiredVM(vm.Namespace, vm.Name, fastpathv1alpha1.VMStatus{}, wiring.ItemLabel, wiring.ItemVSOCKMode)
			vm.Annotations = v.Annotations
			return keep(vm, att, vmi)
		}, false, true, ""},
		{"not-listed", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			att.Status.VMs = nil
			return keep(vm, att, vmi)
		}, false, false, "does not list VirtualMachine not-listed as wired (status.vms) yet"},
		{"relay-in-status", func(vm *kubevirtv1.VirtualMachine, att *fastpathv1alpha1.FastPathAttachment, vmi *kubevirtv1.VirtualMachineInstance) []client.Object {
			att.Status.VMs[0].VSOCKMode = fastpathv1alpha1.VSOCKModeRelay
			return keep(vm, att, vmi)
		}, false, false, "does not give VirtualMachine relay-in-status vsock mode Sibling"},
	}
	var objs []client.Object
	for _, c := range cases {
		vm, att := siblingWiring("tenant-a", c.name)
		objs = append(objs, c.mutate(vm, att, siblingVMI("tenant-a", c.name, "uid-vmi-"+c.name, "uid-pod-"+c.name))...)
		objs = append(objs, launcher("tenant-a", "virt-launcher-"+c.name, "uid-pod-"+c.name, c.name, "uid-vmi-"+c.name, testNode))
	}
	g := NewWithT(t)
	e := newSiblingEnv(t, objs...)
	holders := map[string]string{}
	for i, c := range cases {
		holders[deviceplugin.SiblingDeviceIDs(len(cases))[i]] = "tenant-a/virt-launcher-" + c.name
	}
	e.res.set(holders)
	for i, c := range cases {
		id := deviceplugin.SiblingDeviceIDs(len(cases))[i]
		sock := e.serve("tenant-a", c.name)
		e.allocate(id)
		err := e.preStart(id)
		if c.startOK {
			g.Expect(err).NotTo(HaveOccurred(), c.name)
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(c.err)), c.name)
		}
		if c.linked {
			g.Expect(e.entries(id)).To(Equal([]string{filepath.Base(sock)}), c.name)
		} else {
			g.Expect(e.entries(id)).To(BeEmpty(), c.name)
		}
	}
}
