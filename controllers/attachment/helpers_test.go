package attachment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

var ctx = context.Background()

// newNamespace creates the test's own namespace.
func newNamespace() string {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "fpa")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// vmTemplates are VM bodies (JSON) as a user would write them; %[1]s is the
// name and %[2]s the metadata labels object.
var (
	// busyVM has its own interfaces, networks, annotations, affinity and the
	// scalars the operator sets, with other values.
	busyVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"%[1]s","labels":%[2]s,"annotations":{"owner":"team-a"}},
 "spec":{"runStrategy":"Always","template":{
  "metadata":{"labels":{"kubevirt.io/domain":"%[1]s"},"annotations":{"hooks.kubevirt.io/hookSidecars":"[]"}},
  "spec":{
   "domain":{"cpu":{"cores":4},"devices":{
     "networkInterfaceMultiqueue":false,
     "disks":[{"name":"root","disk":{"bus":"virtio"}}],
     "interfaces":[{"name":"default","masquerade":{}},{"name":"storage","bridge":{},"macAddress":"02:00:00:00:00:01"}]},
    "resources":{"requests":{"memory":"2Gi","cpu":"1500m"}}},
   "networks":[{"name":"default","pod":{}},{"name":"storage","multus":{"networkName":"storage-net"}}],
   "affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
     {"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"}]}},
   "terminationGracePeriodSeconds":0,
   "volumes":[{"name":"root","containerDisk":{"image":"quay.io/containerdisks/fedora:41"}}]}}}}`
	// minimalVM has no template metadata, no devices, no networks.
	minimalVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"%[1]s","labels":%[2]s},
 "spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"}}}}}}}`
)

// createVM creates a VM in ns from one of the templates with the given labels.
func createVM(ns, name, body string, labels map[string]string) *unstructured.Unstructured {
	GinkgoHelper()
	l, err := json.Marshal(labels)
	Expect(err).NotTo(HaveOccurred())
	vm := &unstructured.Unstructured{}
	Expect(vm.UnmarshalJSON([]byte(fmt.Sprintf(body, name, l)))).To(Succeed())
	vm.SetNamespace(ns)
	Expect(env.Client.Create(ctx, vm)).To(Succeed())
	return vm
}

// getVM reads a VM from the API server.
func getVM(ns, name string) *unstructured.Unstructured {
	GinkgoHelper()
	vm := &unstructured.Unstructured{}
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vm)).To(Succeed())
	return vm
}

// specJSON is the canonical JSON (sorted keys) of a VM's spec as stored.
func specJSON(ns, name string) string {
	GinkgoHelper()
	data, err := json.Marshal(getVM(ns, name).Object["spec"])
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// templatePart returns the JSON of a field below a VM's spec.template.
func templatePart(ns, name string, path ...string) string {
	GinkgoHelper()
	v, found, err := unstructured.NestedFieldNoCopy(getVM(ns, name).Object, append([]string{"spec", "template"}, path...)...)
	Expect(err).NotTo(HaveOccurred())
	if !found {
		return "<absent>"
	}
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// relabelVM replaces a VM's metadata labels.
func relabelVM(ns, name string, labels map[string]string) {
	GinkgoHelper()
	vm := getVM(ns, name)
	base := vm.DeepCopy()
	vm.SetLabels(labels)
	Expect(env.Client.Patch(ctx, vm, client.MergeFrom(base))).To(Succeed())
}

// newAttachment creates an attachment.
func newAttachment(ns, name string, spec v1alpha1.FastPathAttachmentSpec) *v1alpha1.FastPathAttachment {
	GinkgoHelper()
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	Expect(env.Client.Create(ctx, att)).To(Succeed())
	return att
}

// createNetwork creates a FastPathNetwork (as the cluster admin) that is
// deleted when the test ends, and returns its name.
func createNetwork(name string, spec v1alpha1.FastPathNetworkSpec) string {
	GinkgoHelper()
	net := &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	Expect(env.Client.Create(ctx, net)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, net))).To(Succeed()) })
	return name
}

// getAttachment reads an attachment from the API server.
func getAttachment(ns, name string) *v1alpha1.FastPathAttachment {
	GinkgoHelper()
	att := &v1alpha1.FastPathAttachment{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, att)).To(Succeed())
	return att
}

// updateAttachment applies change to the current attachment and writes it back.
func updateAttachment(ns, name string, change func(*v1alpha1.FastPathAttachment)) {
	GinkgoHelper()
	Eventually(func() error {
		att := getAttachment(ns, name)
		change(att)
		return env.Client.Update(ctx, att)
	}).Should(Succeed())
}

// updateNetwork applies change to the current FastPathNetwork and writes it
// back, again on a conflict: the operator writes the network's status
// (status.inUse) while a test edits its spec.
func updateNetwork(name string, change func(*v1alpha1.FastPathNetwork)) {
	GinkgoHelper()
	Eventually(func() error {
		n := &v1alpha1.FastPathNetwork{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			return err
		}
		change(n)
		return env.Client.Update(ctx, n)
	}).Should(Succeed())
}

// conditionOf returns "Status/Reason" of a condition, or "" when absent.
func conditionOf(ns, name, conditionType string) func() string {
	return func() string {
		att := &v1alpha1.FastPathAttachment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, att); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(att.Status.Conditions, conditionType)
		if c == nil || c.ObservedGeneration != att.Generation {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}
}

// conditionMessage returns a condition's message.
func conditionMessage(ns, name, conditionType string) string {
	GinkgoHelper()
	c := meta.FindStatusCondition(getAttachment(ns, name).Status.Conditions, conditionType)
	Expect(c).NotTo(BeNil())
	return c.Message
}

// vmStatus returns the status entry of one VM.
func vmStatus(ns, name, vm string) func() v1alpha1.VMStatus {
	return func() v1alpha1.VMStatus {
		for _, v := range getAttachment(ns, name).Status.VMs {
			if v.Name == vm {
				return v
			}
		}
		return v1alpha1.VMStatus{}
	}
}

// statusVMNames lists the VM names in an attachment's status.
func statusVMNames(ns, name string) func() []string {
	return func() []string {
		var out []string
		for _, v := range getAttachment(ns, name).Status.VMs {
			out = append(out, v.Name)
		}
		return out
	}
}

// vmOwner returns the attachment named in a VM's wiring record ("" if none).
func vmOwner(ns, name string) func() string {
	return func() string {
		rec := getVM(ns, name).GetAnnotations()["fastpath.io/wiring"]
		var r struct {
			Attachment string `json:"attachment"`
		}
		_ = json.Unmarshal([]byte(rec), &r)
		return r.Attachment
	}
}

// vmi is what a test says about a running VM.
type vmi struct {
	name, node string
	cid        *uint32
	// wired: the VMI spec has the attachment's network, interface and vsock.
	wired bool
	// bridgeBinding: the wired interface is on KubeVirt's bridge binding, as
	// an earlier Fastpath wired it, not on the binding plugin.
	bridgeBinding bool
	attachment    string
	mac, ip       string
	// unschedulable: the launcher pod cannot be scheduled, with this
	// message from the scheduler (node is then empty).
	unschedulable string
}

// createVMI writes a VMI and its status as virt-controller and virt-handler would.
func createVMI(ns string, v vmi) {
	GinkgoHelper()
	obj := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: v.name, Labels: map[string]string{"kubevirt.io/domain": v.name},
	}}
	obj.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}
	obj.Spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
	if v.wired {
		net := v1alpha1.NetworkName(v.attachment)
		obj.Labels[v1alpha1.AttachmentLabel] = v.attachment
		// KubeVirt copies the template's annotations to the VMI; of them, the
		// VMI gets the current tuning (tests of the hook sidecar annotation
		// start VMIs without it, as if started before the hook was added).
		tmpl, _, err := unstructured.NestedStringMap(getVM(ns, v.name).Object, "spec", "template", "metadata", "annotations")
		Expect(err).NotTo(HaveOccurred())
		for _, key := range []string{v1alpha1.TuningAnnotation, v1alpha1.VSOCKModeAnnotation} {
			if t, ok := tmpl[key]; ok {
				if obj.Annotations == nil {
					obj.Annotations = map[string]string{}
				}
				obj.Annotations[key] = t
			}
		}
		obj.Spec.Domain.Devices.AutoattachVSOCK = ptr(true)
		obj.Spec.Domain.Devices.Interfaces = append(obj.Spec.Domain.Devices.Interfaces, kubevirtv1.Interface{
			Name: net, Model: "virtio", Binding: &kubevirtv1.PluginBinding{Name: wiring.DefaultBinding},
		})
		if v.bridgeBinding {
			last := &obj.Spec.Domain.Devices.Interfaces[len(obj.Spec.Domain.Devices.Interfaces)-1]
			last.Binding, last.Bridge = nil, &kubevirtv1.InterfaceBridge{}
		}
		obj.Spec.Networks = append(obj.Spec.Networks, kubevirtv1.Network{
			Name: net, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: v.attachment}},
		})
	}
	Expect(env.Client.Create(ctx, obj)).To(Succeed())
	obj.Status = kubevirtv1.VirtualMachineInstanceStatus{
		Phase:    kubevirtv1.Running,
		NodeName: v.node,
		VSOCKCID: v.cid,
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", InterfaceName: "eth0", IP: "10.244.1.7", IPs: []string{"10.244.1.7"}, MAC: "02:00:00:aa:00:01", PodInterfaceName: "eth0"},
		},
	}
	if v.unschedulable != "" {
		obj.Status.Phase = kubevirtv1.Scheduling
		obj.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
			Type: kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled), Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: v.unschedulable,
		}}
	}
	if v.wired {
		obj.Status.Interfaces = append(obj.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{
			Name: v1alpha1.NetworkName(v.attachment), InterfaceName: "eth1", MAC: v.mac, IP: v.ip, IPs: []string{v.ip},
			PodInterfaceName: "pod0123456789a", InfoSource: "domain, guest-agent, multus-status",
		})
	}
	Expect(env.Client.Status().Update(ctx, obj)).To(Succeed())
}

// deleteVMI deletes a VMI.
func deleteVMI(ns, name string) {
	GinkgoHelper()
	Expect(env.Client.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
}

// createFastPathNode writes a FastPathNode with a Ready condition, as the agent would.
func createFastPathNode(name string, ready metav1.ConditionStatus) {
	GinkgoHelper()
	fpn := &v1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(env.Client.Create(ctx, fpn)).To(Succeed())
	reason := "AgentReady"
	if ready != metav1.ConditionTrue {
		reason = "BridgeFailed"
	}
	meta.SetStatusCondition(&fpn.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: ready, Reason: reason, Message: "set by the test"})
	Expect(env.Client.Status().Update(ctx, fpn)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, fpn))).To(Succeed()) })
}

// setSiblingCapability sets capabilities.vhostUserVSOCK of a FastPathNode,
// as the agent does when it runs vhost-device-vsock.
func setSiblingCapability(name string, version string) {
	GinkgoHelper()
	fpn := &v1alpha1.FastPathNode{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, fpn)).To(Succeed())
	fpn.Status.Capabilities.VhostUserVSOCK, fpn.Status.Capabilities.VhostUserVSOCKVersion = version != "", version
	Expect(env.Client.Status().Update(ctx, fpn)).To(Succeed())
}

// getNAD reads the NetworkAttachmentDefinition of an attachment.
func getNAD(ns, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	nad := &nadv1.NetworkAttachmentDefinition{}
	return nad, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad)
}

// isGone reports whether an object no longer exists.
func isGone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
}

// eventReasons lists the reasons of the Events about an attachment.
func eventReasons(ns, name string) func() []string {
	return objectEventReasons(ns, "FastPathAttachment", name)
}

// objectEventReasons lists the reasons of the Events about an object of kind.
func objectEventReasons(ns, kind, name string) func() []string {
	return func() []string {
		events := &corev1.EventList{}
		Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == kind {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}

// metricValue returns the value of a gauge or counter sample in
// controller-runtime's registry whose labels include want (summed over
// matching samples), or -1 when there is none.
func metricValue(name string, want map[string]string) float64 {
	GinkgoHelper()
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			found = true
			switch {
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// resourceVersions returns the resourceVersion of each object.
func resourceVersions(objs ...client.Object) []string {
	GinkgoHelper()
	var out []string
	for _, o := range objs {
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		out = append(out, fmt.Sprintf("%T %s=%s", o, o.GetName(), o.GetResourceVersion()))
	}
	return out
}

// selector selects app=<app>.
func selector(app string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// subnets counts the subnets uniqueSubnet handed out.
var subnets atomic.Int32

// uniqueSubnet returns a /24 no other caller in the suite gets, inside
// 10.128.0.0/10 (outside the suite's pod network podNetwork): the
// attachments of all specs stay in the API server, most of them on the
// default network, where overlapping subnets are refused (SubnetConflict).
func uniqueSubnet() string {
	n := subnets.Add(1)
	return fmt.Sprintf("10.%d.%d.0/24", 128+n/256, n%256)
}

func network(subnet string) *v1alpha1.NetworkSpec {
	return &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: subnet}}
}

func vsock(services ...v1alpha1.VSOCKService) *v1alpha1.VSOCKSpec {
	return &v1alpha1.VSOCKSpec{Services: services}
}

// apiCounter counts the requests a rest.Config made through it sends.
type apiCounter struct {
	// reads are GET requests (gets, lists and watches); writes are the rest.
	reads, writes atomic.Int64
}

// wrap returns a copy of cfg whose requests c counts.
func (c *apiCounter) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet {
				c.reads.Add(1)
			} else {
				c.writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
