package deviceplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

const testNode = "node-1"

// TestConnectThroughAHardLinkReachesTheListener is the kernel behaviour the
// design rests on: connect(2) on a hard link of a bound UNIX socket reaches
// its listener (the kernel finds the socket by inode, not by name), and a
// link to a socket that was unlinked and bound again (a new inode) is dead:
// connection refused, so links must be renewed.
func TestConnectThroughAHardLinkReachesTheListener(t *testing.T) {
	g := NewWithT(t)
	dir := shortTempDir(t)
	g.Expect(os.Mkdir(filepath.Join(dir, "other"), 0o755)).To(Succeed())
	path, link := filepath.Join(dir, "vm.vhost"), filepath.Join(dir, "other", "vm.vhost")
	ln := listen(t, path)
	g.Expect(os.Link(path, link)).To(Succeed())
	expectReaches(g, link, ln)

	// The backend restarts: same name, new socket.
	ln.Close()
	g.Expect(os.Remove(path)).To(Succeed())
	ln = listen(t, path)
	_, err := net.Dial("unix", link)
	g.Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "a stale link refuses: %v", err)
	expectReaches(g, path, ln)
}

// fakePodResources is kubelet's PodResources API v1 on a UNIX socket: List
// returns what set gave it.
type fakePodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	mu   sync.Mutex
	pods []*podresourcesapi.PodResources
}

func startPodResources(t *testing.T) (*fakePodResources, string) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "kubelet.sock")
	f := &fakePodResources{}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, f)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return f, sock
}

func (f *fakePodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &podresourcesapi.ListPodResourcesResponse{PodResources: f.pods}, nil
}

// set makes device ids held by the compute container of each pod (by
// "namespace/name"), plus an unrelated resource kubelet also reports.
func (f *fakePodResources) set(holders map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = nil
	for id, pod := range holders {
		key := splitKey(pod)
		f.pods = append(f.pods, &podresourcesapi.PodResources{Namespace: key.Namespace, Name: key.Name, Containers: []*podresourcesapi.ContainerResources{{
			Name: "compute", Devices: []*podresourcesapi.ContainerDevices{
				{ResourceName: "devices.kubevirt.io/kvm", DeviceIds: []string{id}},
				{ResourceName: fastpathv1alpha1.SiblingResourceName, DeviceIds: []string{id}},
			}}}})
	}
}

// siblingEnv is one node: the socket directory with the listening sockets
// of Sibling VMs, the API objects and the device plugin served to a fake
// kubelet.
type siblingEnv struct {
	t       *testing.T
	dir     string
	res     *fakePodResources
	mounts  *deviceplugin.SiblingMounts
	kubelet *fakeKubelet
	events  *record.FakeRecorder
	lns     map[string]net.Listener // by socket path
}

func newSiblingEnv(t *testing.T, objs ...client.Object) *siblingEnv {
	res, sock := startPodResources(t)
	e := &siblingEnv{t: t, dir: shortTempDir(t), res: res, events: record.NewFakeRecorder(100), lns: map[string]net.Listener{}}
	e.mounts = &deviceplugin.SiblingMounts{
		SocketDir: e.dir, NodeName: testNode, Devices: 8,
		PodResources: deviceplugin.KubeletPodResources{Socket: sock},
		Reader:       fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(objs...).Build(),
		Recorder:     e.events, Log: testr.New(t),
	}
	resource, err := e.mounts.Resource()
	if err != nil {
		t.Fatal(err)
	}
	e.kubelet = startKubelet(t)
	s := deviceplugin.NewServer(resource, e.kubelet.dir, filepath.Join(e.kubelet.dir, "kubelet.sock"), 50*time.Millisecond, testr.New(t))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return e
}

// serve makes the backend's two sockets of VM ns/vm: <h>.vhost and the
// hybrid host side <h>.vsock.
func (e *siblingEnv) serve(ns, vm string) string {
	vhost := filepath.Join(e.dir, filepath.Base(fastpathv1alpha1.SiblingSocketPath(ns, vm)))
	e.lns[vhost] = listen(e.t, vhost)
	vsock := vhost[:len(vhost)-len(".vhost")] + ".vsock"
	e.lns[vsock] = listen(e.t, vsock)
	return vhost
}

// restart closes and binds the socket again, as a backend restart does.
func (e *siblingEnv) restart(path string) {
	e.lns[path].Close()
	_ = os.Remove(path)
	e.lns[path] = listen(e.t, path)
}

func (e *siblingEnv) allocate(id string) *pluginapi.ContainerAllocateResponse {
	resp, err := e.kubelet.client().Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{id}}}})
	if err != nil {
		e.t.Fatalf("Allocate %s: %v", id, err)
	}
	return resp.ContainerResponses[0]
}

func (e *siblingEnv) preStart(id string) error {
	_, err := e.kubelet.client().PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: []string{id}})
	return err
}

// entries lists the allocation directory of id.
func (e *siblingEnv) entries(id string) []string {
	des, err := os.ReadDir(e.mounts.AllocDir(id))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

// TestSiblingMountsGiveEachLauncherOnlyItsOwnSocket drives the resource
// through kubelet's gRPC calls (Allocate, PreStartContainer) with a fake
// PodResources API and API objects: each Sibling launcher gets exactly its
// VM's .vhost socket (connectable through the link), never the hybrid
// .vsock socket or a second VM's; a pod of no Sibling VMI, a pod forging a
// controller reference, a pod on another node get an empty directory or an
// error; a recreated socket is re-linked; a released device is emptied.
func TestSiblingMountsGiveEachLauncherOnlyItsOwnSocket(t *testing.T) {
	g := NewWithT(t)
	db0, l0 := siblingVMI("tenant-a", "db-0", "uid-vmi-0", "uid-pod-0"), launcher("tenant-a", "virt-launcher-db-0-abcde", "uid-pod-0", "db-0", "uid-vmi-0", testNode)
	db1, l1 := siblingVMI("tenant-a", "db-1", "uid-vmi-1", "uid-pod-1"), launcher("tenant-a", "virt-launcher-db-1-fghij", "uid-pod-1", "db-1", "uid-vmi-1", testNode)
	// Other namespace, same VM name: a different socket.
	dbB, lB := siblingVMI("tenant-b", "db-0", "uid-vmi-b", "uid-pod-b"), launcher("tenant-b", "virt-launcher-db-0-zzzzz", "uid-pod-b", "db-0", "uid-vmi-b", testNode)
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "curious", UID: "uid-curious"}, Spec: corev1.PodSpec{NodeName: testNode}}
	// Claims db-1 as its controller but KubeVirt does not list it.
	forger := launcher("tenant-a", "forger", "uid-forger", "db-1", "uid-vmi-1", testNode)
	// Claims db-1 with a made-up UID.
	wrongUID := launcher("tenant-a", "wrong-uid", "uid-pod-1", "db-1", "uid-other", testNode)
	relay := siblingVMI("tenant-a", "web-0", "uid-vmi-w", "uid-pod-w")
	delete(relay.Annotations, fastpathv1alpha1.VSOCKModeAnnotation)
	lw := launcher("tenant-a", "virt-launcher-web-0-q", "uid-pod-w", "web-0", "uid-vmi-w", testNode)

	vm0, att0 := siblingWiring("tenant-a", "db-0")
	vm1, att1 := siblingWiring("tenant-a", "db-1")
	vmB, attB := siblingWiring("tenant-b", "db-0")
	vmW, attW := wiredVM("tenant-a", "web-0", fastpathv1alpha1.VMStatus{Name: "web-0", Wired: true, VSOCKMode: fastpathv1alpha1.VSOCKModeRelay}, wiring.ItemLabel)
	e := newSiblingEnv(t, db0, l0, db1, l1, dbB, lB, plain, forger, wrongUID, relay, lw, vm0, att0, vm1, att1, vmB, attB, vmW, attW)
	g.Expect(e.kubelet.registrations()).To(HaveLen(1))
	reg := e.kubelet.registrations()[0]
	g.Expect(reg.ResourceName).To(Equal("vsock.fastpath.io/sibling"))
	g.Expect(reg.Options.PreStartRequired).To(BeTrue(), "kubelet must call PreStartContainer")
	g.Eventually(e.kubelet.lastList).Should(HaveLen(8))

	s0, s1, sB, sW := e.serve("tenant-a", "db-0"), e.serve("tenant-a", "db-1"), e.serve("tenant-b", "db-0"), e.serve("tenant-a", "web-0")
	g.Expect(filepath.Base(s0)).NotTo(Equal(filepath.Base(sB)))

	// Allocate: a fresh empty directory at the hook's path, read-write.
	car := e.allocate("vsock0")
	g.Expect(car.Mounts).To(HaveLen(1))
	g.Expect(car.Mounts[0]).To(And(HaveField("ContainerPath", "/var/run/fastpath/vsock"), HaveField("HostPath", e.mounts.AllocDir("vsock0")), HaveField("ReadOnly", false)))
	g.Expect(e.entries("vsock0")).To(BeEmpty())
	holders := map[string]string{"vsock0": "tenant-a/virt-launcher-db-0-abcde"}
	e.res.set(holders)
	g.Expect(e.preStart("vsock0")).To(Succeed())
	g.Expect(e.entries("vsock0")).To(Equal([]string{filepath.Base(s0)}))
	expectReaches(g, filepath.Join(e.mounts.AllocDir("vsock0"), filepath.Base(s0)), e.lns[s0])
	g.Expect(<-e.events.Events).To(ContainSubstring("SiblingSocketLinked"))

	e.allocate("vsock1")
	holders["vsock1"] = "tenant-a/virt-launcher-db-1-fghij"
	e.allocate("vsock2")
	holders["vsock2"] = "tenant-b/virt-launcher-db-0-zzzzz"
	e.res.set(holders)
	g.Expect(e.preStart("vsock1")).To(Succeed())
	g.Expect(e.preStart("vsock2")).To(Succeed())
	g.Expect(e.entries("vsock1")).To(Equal([]string{filepath.Base(s1)}))
	g.Expect(e.entries("vsock2")).To(Equal([]string{filepath.Base(sB)}))
	expectReaches(g, filepath.Join(e.mounts.AllocDir("vsock1"), filepath.Base(s1)), e.lns[s1])
	expectReaches(g, filepath.Join(e.mounts.AllocDir("vsock2"), filepath.Base(sB)), e.lns[sB])

	// Pods that are not a Sibling launcher get nothing.
	for id, pod := range map[string]string{"vsock3": "tenant-a/curious", "vsock4": "tenant-a/virt-launcher-web-0-q", "vsock5": "tenant-a/wrong-uid"} {
		e.allocate(id)
		holders[id] = pod
		e.res.set(holders)
		g.Expect(e.preStart(id)).To(Succeed(), pod)
		g.Expect(e.entries(id)).To(BeEmpty(), pod)
	}
	_ = sW
	// A forged controller reference is not in the VMI's status.activePods:
	// the start fails, naming the pod, and the directory stays empty.
	e.allocate("vsock6")
	holders["vsock6"] = "tenant-a/forger"
	e.res.set(holders)
	g.Expect(e.preStart("vsock6")).To(MatchError(And(ContainSubstring("pod tenant-a/forger"), ContainSubstring("status.activePods"))))
	g.Expect(e.entries("vsock6")).To(BeEmpty())
	// A device kubelet does not list as held fails.
	e.allocate("vsock7")
	g.Expect(e.preStart("vsock7")).To(MatchError(ContainSubstring("lists no pod holding it")))

	// The backend recreates db-0's socket: the next Sync links the new one.
	e.restart(s0)
	_, err := net.Dial("unix", filepath.Join(e.mounts.AllocDir("vsock0"), filepath.Base(s0)))
	g.Expect(err).To(HaveOccurred(), "the old link is stale until Sync")
	// The forger's device stays undecided, and Sync says so; the others sync.
	g.Expect(e.mounts.Sync(context.Background())).To(MatchError(And(ContainSubstring("pod tenant-a/forger"), Not(ContainSubstring("db-0")))))
	expectReaches(g, filepath.Join(e.mounts.AllocDir("vsock0"), filepath.Base(s0)), e.lns[s0])

	// db-0's launcher is gone: its directory is emptied; the others stay.
	delete(holders, "vsock0")
	delete(holders, "vsock6")
	e.res.set(holders)
	g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
	g.Expect(e.entries("vsock0")).To(BeEmpty())
	g.Expect(e.entries("vsock1")).To(Equal([]string{filepath.Base(s1)}))

	// Whatever happened, no directory ever holds a hybrid .vsock socket or
	// a socket that is not its holder's.
	want := map[string][]string{"vsock1": {filepath.Base(s1)}, "vsock2": {filepath.Base(sB)}}
	for _, id := range deviceplugin.SiblingDeviceIDs(8) {
		g.Expect(e.entries(id)).To(Equal(want[id]), id)
	}
	// The socket directory is root's alone on the host; the sockets are
	// connectable by QEMU's non-root user through the link.
	st, err := os.Stat(e.dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o700)))
	st, err = os.Stat(s1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o666)))
}

// TestSiblingPreStartFailsWithoutTheSocket: a verified launcher whose VM's
// socket does not exist (its group does not run here) cannot start: the
// error names the VM and the pod and the directory stays empty; once the
// socket exists, kubelet's retry succeeds.
func TestSiblingPreStartFailsWithoutTheSocket(t *testing.T) {
	g := NewWithT(t)
	vm, att := siblingWiring("tenant-a", "db-0")
	e := newSiblingEnv(t, siblingVMI("tenant-a", "db-0", "uid-vmi-0", "uid-pod-0"),
		launcher("tenant-a", "virt-launcher-db-0-abcde", "uid-pod-0", "db-0", "uid-vmi-0", testNode), vm, att)
	e.allocate("vsock0")
	e.res.set(map[string]string{"vsock0": "tenant-a/virt-launcher-db-0-abcde"})
	g.Expect(e.preStart("vsock0")).To(MatchError(And(ContainSubstring("VM tenant-a/db-0"), ContainSubstring("pod tenant-a/virt-launcher-db-0-abcde"),
		ContainSubstring("does not exist"))))
	g.Expect(e.entries("vsock0")).To(BeEmpty())
	g.Expect(<-e.events.Events).To(ContainSubstring("SiblingSocketNotLinked"))
	s := e.serve("tenant-a", "db-0")
	g.Expect(e.preStart("vsock0")).To(Succeed())
	g.Expect(e.entries("vsock0")).To(Equal([]string{filepath.Base(s)}))

	// QEMU connected: vhost-device-vsock unlinks the socket it accepted on.
	// A resync keeps the link QEMU holds and warns of nothing; kubelet's
	// next PreStartContainer, for a new QEMU, still needs a socket to link.
	g.Expect(os.Remove(s)).To(Succeed())
	g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
	g.Expect(e.entries("vsock0")).To(Equal([]string{filepath.Base(s)}))
	g.Consistently(e.events.Events).ShouldNot(Receive(ContainSubstring("SiblingSocketNotLinked")))
	g.Expect(e.preStart("vsock0")).To(MatchError(ContainSubstring("does not exist")))
	g.Expect(e.entries("vsock0")).To(BeEmpty())

	// Start re-links on its own when the backend recreates the socket.
	e.mounts.ResyncInterval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.mounts.Start(ctx) }()
	e.restart(s)
	link := filepath.Join(e.mounts.AllocDir("vsock0"), filepath.Base(s))
	g.Eventually(func() error {
		c, err := net.Dial("unix", link)
		if err == nil {
			c.Close()
		}
		return err
	}, 5*time.Second).Should(Succeed())
	cancel()
	g.Eventually(done).Should(Receive(BeNil()))
}

// TestSiblingLauncherOnAnotherNode: a VMI entry placing the pod elsewhere
// (or a pod bound elsewhere) gets nothing.
func TestSiblingLauncherOnAnotherNode(t *testing.T) {
	g := NewWithT(t)
	vmi := siblingVMI("tenant-a", "db-0", "uid-vmi-0", "uid-pod-0")
	vmi.Status.ActivePods["uid-pod-0"] = "node-2"
	vm, att := siblingWiring("tenant-a", "db-0")
	e := newSiblingEnv(t, vmi, launcher("tenant-a", "virt-launcher-db-0-abcde", "uid-pod-0", "db-0", "uid-vmi-0", testNode), vm, att)
	e.serve("tenant-a", "db-0")
	e.allocate("vsock0")
	e.res.set(map[string]string{"vsock0": "tenant-a/virt-launcher-db-0-abcde"})
	g.Expect(e.preStart("vsock0")).To(Succeed())
	g.Expect(e.entries("vsock0")).To(BeEmpty())
}

func TestSiblingAllocateTakesOneDevicePerContainer(t *testing.T) {
	g := NewWithT(t)
	e := newSiblingEnv(t)
	_, err := e.kubelet.client().Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"vsock0", "vsock1"}}}})
	g.Expect(err).To(MatchError(ContainSubstring(`a container takes exactly 1 device (resources.limits["vsock.fastpath.io/sibling"]: "1"), not 2`)))
	_, err = (&deviceplugin.SiblingMounts{Devices: deviceplugin.MaxSiblingDevices + 1}).Resource()
	g.Expect(err).To(MatchError(ContainSubstring("must be 1-4096")))
	// An allocation replaces whatever the directory held.
	dir := e.mounts.AllocDir("vsock3")
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "left-over"), nil, 0o600)).To(Succeed())
	e.allocate("vsock3")
	g.Expect(e.entries("vsock3")).To(BeEmpty())
}

// siblingVMI is the VMI, in vsock mode Sibling, of VM ns/name (uid
// "uid-vm-<name>"), with the pod podUID in status.activePods on testNode.
func siblingVMI(ns, name, uid, podUID string) *kubevirtv1.VirtualMachineInstance {
	yes := true
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			Annotations:     map[string]string{fastpathv1alpha1.VSOCKModeAnnotation: string(fastpathv1alpha1.VSOCKModeSibling)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: name, UID: types.UID("uid-vm-" + name), Controller: &yes}}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{ActivePods: map[types.UID]string{types.UID(podUID): testNode}},
	}
}

// siblingWiring is what the operator leaves when FastPathAttachment
// "att-<vm>" wires VM ns/vm in vsock mode Sibling: the VM (uid
// "uid-vm-<vm>") with its wiring record and the attachment listing it as
// wired in mode Sibling.
func siblingWiring(ns, vm string) (*kubevirtv1.VirtualMachine, *fastpathv1alpha1.FastPathAttachment) {
	return wiredVM(ns, vm, fastpathv1alpha1.VMStatus{Name: vm, Wired: true, VSOCKMode: fastpathv1alpha1.VSOCKModeSibling},
		wiring.ItemLabel, wiring.ItemVSOCKMode, wiring.ItemSiblingNode, wiring.ItemSiblingResource)
}

// wiredVM is VM ns/vm (uid "uid-vm-<vm>") whose wiring record names
// FastPathAttachment "att-<vm>" (uid "uid-att-<vm>") with items added, and
// that attachment with entry in status.vms.
func wiredVM(ns, vm string, entry fastpathv1alpha1.VMStatus, added ...wiring.Item) (*kubevirtv1.VirtualMachine, *fastpathv1alpha1.FastPathAttachment) {
	att := &fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "att-" + vm, UID: types.UID("uid-att-" + vm)},
		Status: fastpathv1alpha1.FastPathAttachmentStatus{VMs: []fastpathv1alpha1.VMStatus{entry}}}
	rec, err := json.Marshal(wiring.Record{Attachment: att.Name, AttachmentUID: string(att.UID), Added: added})
	if err != nil {
		panic(err)
	}
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm, UID: types.UID("uid-vm-" + vm),
		Annotations: map[string]string{wiring.RecordAnnotation: string(rec)}}}, att
}

// siblingLauncher is a Sibling VM ns/vm the operator wired, running on
// testNode in pod (uid "uid-pod-<vm>"): the VM, its attachment, the VMI
// and the pod.
func siblingLauncher(ns, vm, pod string) []client.Object {
	v, att := siblingWiring(ns, vm)
	return []client.Object{v, att, siblingVMI(ns, vm, "uid-vmi-"+vm, "uid-pod-"+vm), launcher(ns, pod, "uid-pod-"+vm, vm, "uid-vmi-"+vm, testNode)}
}

func launcher(ns, name, uid, vmi, vmiUID, node string) *corev1.Pod {
	yes := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi, UID: types.UID(vmiUID), Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}

func splitKey(s string) types.NamespacedName {
	for i := range s {
		if s[i] == '/' {
			return types.NamespacedName{Namespace: s[:i], Name: s[i+1:]}
		}
	}
	return types.NamespacedName{Name: s}
}

// shortTempDir is a temporary directory short enough for sun_path (108
// bytes), removed at the end of the test.
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "fpsib")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func listen(t *testing.T, path string) net.Listener {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// expectReaches dials path and checks that ln accepts the connection and
// gets the bytes.
func expectReaches(g Gomega, path string, ln net.Listener) {
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	c, err := net.Dial("unix", path)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Write([]byte("hello " + path))
	g.Expect(err).NotTo(HaveOccurred())
	c.Close()
	g.Eventually(got, 5*time.Second).Should(Receive(Equal("hello " + path)))
}

// countingReader counts the API reads of SiblingMounts.
type countingReader struct {
	client.Reader
	gets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestSiblingUndecidedPodBacksOffAndGivesUp: a pod holding a device that
// cannot be decided (it claims a VMI that never lists it in
// status.activePods) is verified again after 4 s, 8 s, 16 s… up to
// SiblingUndecidedMaxBackoff, not on every Sync, and after
// SiblingUndecidedDeadline Sync gives up on it: no more reads, an empty
// directory, a Warning event saying so. The launcher of another VM keeps
// being served throughout.
func TestSiblingUndecidedPodBacksOffAndGivesUp(t *testing.T) {
	g := NewWithT(t)
	db0, l0 := siblingVMI("tenant-a", "db-0", "uid-vmi-0", "uid-pod-0"), launcher("tenant-a", "virt-launcher-db-0-abcde", "uid-pod-0", "db-0", "uid-vmi-0", testNode)
	forger := launcher("tenant-a", "forger", "uid-forger", "db-0", "uid-vmi-0", testNode)
	vm0, att0 := siblingWiring("tenant-a", "db-0")
	e := newSiblingEnv(t, db0, l0, forger, vm0, att0)
	reads := &countingReader{Reader: e.mounts.Reader}
	e.mounts.Reader = reads
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	e.mounts.Clock = clk
	s0 := e.serve("tenant-a", "db-0")
	e.allocate("vsock0")
	e.allocate("vsock1")
	e.res.set(map[string]string{"vsock0": "tenant-a/virt-launcher-db-0-abcde", "vsock1": "tenant-a/forger"})
	g.Expect(e.preStart("vsock0")).To(Succeed())

	undecided := MatchError(ContainSubstring("pod tenant-a/forger"))
	g.Expect(e.mounts.Sync(context.Background())).To(undecided)
	first := reads.gets.Load()
	g.Expect(first).To(BeNumerically(">", 0))
	// Within the back-off: the error stands, nothing is read.
	clk.SetTime(start.Add(3 * time.Second))
	g.Expect(e.mounts.Sync(context.Background())).To(undecided)
	g.Expect(reads.gets.Load()).To(Equal(first), "no reads before the back-off ends")
	clk.SetTime(start.Add(4 * time.Second))
	g.Expect(e.mounts.Sync(context.Background())).To(undecided)
	g.Expect(reads.gets.Load()).To(BeNumerically(">", first), "verified again after 2 × 2 s")

	// Over the deadline, Syncing every 2 s: the reads grow with the number
	// of back-off steps, not with the number of Syncs.
	checks := 0
	for at := 4 * time.Second; at <= deviceplugin.SiblingUndecidedDeadline+time.Minute; at += 2 * time.Second {
		before := reads.gets.Load()
		clk.SetTime(start.Add(at))
		_ = e.mounts.Sync(context.Background())
		if reads.gets.Load() > before {
			checks++
		}
	}
	syncs := int((deviceplugin.SiblingUndecidedDeadline + time.Minute - 4*time.Second) / (2 * time.Second))
	t.Logf("%d Syncs over %s, %d of them verified the undecided pod", syncs, deviceplugin.SiblingUndecidedDeadline+time.Minute, checks)
	g.Expect(checks).To(BeNumerically("<=", 15), "back-off: at most a check a minute once the cap is reached")
	g.Expect(e.mounts.Sync(context.Background())).To(Succeed(), "given up: Sync no longer reports the pod")
	before := reads.gets.Load()
	clk.SetTime(start.Add(deviceplugin.SiblingUndecidedDeadline + time.Hour))
	g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
	g.Expect(reads.gets.Load()).To(Equal(before), "no reads after giving up")
	g.Expect(e.entries("vsock1")).To(BeEmpty())
	var gaveUp []string
	for len(e.events.Events) > 0 {
		if ev := <-e.events.Events; strings.Contains(ev, "gave up after") {
			gaveUp = append(gaveUp, ev)
		}
	}
	g.Expect(gaveUp).To(ConsistOf(ContainSubstring("Warning SiblingSocketNotLinked no vhost-user socket: gave up after 10m0s undecided")))
	// The real launcher kept its socket throughout.
	g.Expect(e.entries("vsock0")).To(Equal([]string{filepath.Base(s0)}))
	// kubelet's next start of the container verifies afresh.
	g.Expect(e.preStart("vsock1")).To(undecided)
}
