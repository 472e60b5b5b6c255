package attachment_test

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/attachment"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
	// quiet is how long "nothing changes" is watched.
	quiet = 2 * time.Second
)

var _ = Describe("FastPathAttachment", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		SetDefaultConsistentlyDuration(quiet)
		SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
	})

	It("renders the NetworkAttachmentDefinition from the spec and keeps it in line", func() {
		ns := newNamespace()
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		net := createNetwork("br-fast-"+ns, v1alpha1.FastPathNetworkSpec{
			Datapath: v1alpha1.DatapathOVS, Bridge: "br-fast", MTU: &v1alpha1.MTURange{Max: ptr(int32(65535))},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		})
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: net},
			Network: &v1alpha1.NetworkSpec{
				MTU:      ptr(int32(65000)),
				Offloads: &v1alpha1.Offloads{GRO: v1alpha1.OffloadOff},
				IPAM:     v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24", RangeStart: "10.250.0.10"},
			},
		})

		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		nad, err := getNAD(ns, "db-link")
		Expect(err).NotTo(HaveOccurred())
		Expect(nad.Spec.Config).To(Equal(`{"cniVersion":"1.0.0","name":"fp-` + ns + `.db-link","type":"fastpath","namespace":"` + ns + `","datapath":"OVS","bridge":"br-fast","mtu":65000,` +
			`"offloads":{"tso":true,"gso":true,"gro":false,"txChecksum":true,"rxChecksum":true},"ipam":{"rangeStart":"10.250.0.10","subnet":"10.250.0.0/24","type":"host-local"}}`))
		Expect(nad.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
			APIVersion: "fastpath.io/v1alpha1", Kind: "FastPathAttachment", Name: "db-link", UID: getAttachment(ns, "db-link").UID,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true),
		}))
		Expect(nad.Labels).To(HaveKeyWithValue(v1alpha1.AttachmentLabel, "db-link"))
		st := getAttachment(ns, "db-link").Status
		Expect(st.NetworkAttachmentDefinition).To(Equal(ns + "/db-link"))
		Expect(st.Datapath).To(Equal(v1alpha1.DatapathOVS))
		Expect(st.MTU).To(Equal(int32(65000)))

		By("following a spec change")
		updateAttachment(ns, "db-link", func(a *v1alpha1.FastPathAttachment) { a.Spec.Network.MTU = ptr(int32(9000)) })
		Eventually(func() string { nad, _ := getNAD(ns, "db-link"); return nad.Spec.Config }).Should(ContainSubstring(`"mtu":9000`))
		Eventually(func() int32 { return getAttachment(ns, "db-link").Status.MTU }).Should(Equal(int32(9000)))

		By("deleting the NAD when spec.network goes")
		updateAttachment(ns, "db-link", func(a *v1alpha1.FastPathAttachment) {
			a.Spec.Network = nil
			a.Spec.VSOCK = vsock(v1alpha1.VSOCKService{Name: "db", VM: "db-0", Port: 5432})
		})
		Eventually(isGone(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-link"}})).Should(BeTrue())
		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNotRequested))
		Expect(getAttachment(ns, "db-link").Status.NetworkAttachmentDefinition).To(BeEmpty())
	})

	It("wires the selected VMs and restores their specs byte for byte when the attachment goes", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		createVM(ns, "db-1", minimalVM, map[string]string{"app": "db"})
		web := createVM(ns, "web-0", busyVM, map[string]string{"app": "web"})
		original := map[string]string{"db-0": specJSON(ns, "db-0"), "db-1": specJSON(ns, "db-1")}
		originalAnnotations := getVM(ns, "db-0").GetAnnotations()
		webRV := resourceVersions(web)

		att := newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"),
			Placement:  v1alpha1.PlacementRequired,
			Network:    &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: uniqueSubnet()}},
			VSOCK:      vsock(v1alpha1.VSOCKService{Name: "db", VM: "db-0", Port: 5432}),
		})
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(getAttachment(ns, "db-link").Status.WiredVMs).To(Equal(int32(2)))
		Expect(getAttachment(ns, "db-link").Status.SelectedVMs).To(Equal(int32(2)))

		By("adding exactly our entries after the user's")
		Expect(templatePart(ns, "db-0", "spec", "networks")).To(Equal(
			`[{"name":"default","pod":{}},{"multus":{"networkName":"storage-net"},"name":"storage"},{"multus":{"networkName":"db-link"},"name":"fp-db-link"}]`))
		Expect(templatePart(ns, "db-0", "spec", "domain", "devices")).To(Equal(
			`{"autoattachVSOCK":true,"disks":[{"disk":{"bus":"virtio"},"name":"root"}],` +
				`"interfaces":[{"masquerade":{},"name":"default"},{"bridge":{},"macAddress":"02:00:00:00:00:01","name":"storage"},{"binding":{"name":"fastpath"},"model":"virtio","name":"fp-db-link"}],` +
				`"networkInterfaceMultiqueue":true}`))
		Expect(templatePart(ns, "db-0", "metadata")).To(Equal(
			`{"annotations":{"fastpath.io/tuning":"{\"interfaces\":{\"fp-db-link\":{\"mtu\":9000,\"queues\":4,\"rxQueueSize\":1024,\"txQueueSize\":256,` +
				`\"offloads\":{\"tso\":\"On\",\"gso\":\"On\",\"gro\":\"On\",\"txChecksum\":\"On\",\"rxChecksum\":\"On\"}}}}","hooks.kubevirt.io/hookSidecars":"[]"},` +
				`"labels":{"fastpath.io/attachment":"db-link","kubevirt.io/domain":"db-0"}}`))
		Expect(templatePart(ns, "db-0", "spec", "affinity")).To(Equal(
			`{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"},` +
				`{"labelSelector":{"matchLabels":{"fastpath.io/attachment":"db-link"}},"topologyKey":"kubernetes.io/hostname"}]}}`))
		Expect(templatePart(ns, "db-1", "spec", "networks")).To(Equal(`[{"multus":{"networkName":"db-link"},"name":"fp-db-link"}]`))
		Expect(templatePart(ns, "db-1", "metadata", "labels")).To(Equal(`{"fastpath.io/attachment":"db-link"}`))
		managers := []string{}
		for _, mf := range getVM(ns, "db-0").GetManagedFields() {
			managers = append(managers, mf.Manager)
		}
		Expect(managers).To(ContainElement(v1alpha1.FieldManager))
		Expect(resourceVersions(web)).To(Equal(webRV), "an unselected VM is not touched")

		By("reporting Events, metrics and Ready")
		Eventually(conditionOf(ns, "db-link", v1alpha1.ReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNotReady))
		Expect(conditionMessage(ns, "db-link", v1alpha1.ReadyCondition)).To(ContainSubstring("VSOCKReady is False (TargetNotRunning)"))
		Eventually(eventReasons(ns, "db-link")).Should(ContainElements("Normal/"+v1alpha1.ReasonWired, "Warning/"+v1alpha1.ReasonTargetNotRunning))
		Eventually(func() float64 {
			return metricValue("fastpath_attachment_vms_wired", map[string]string{"namespace": ns, "name": "db-link"})
		}).Should(Equal(2.0))
		Expect(metricValue("fastpath_attachments", map[string]string{"condition": "VMsWired", "status": "True"})).To(BeNumerically(">=", 1))

		By("deleting the attachment")
		Expect(env.Client.Delete(ctx, att)).To(Succeed())
		Eventually(isGone(att)).Should(BeTrue())
		for name, spec := range original {
			Expect(specJSON(ns, name)).To(Equal(spec), "VM %s", name)
		}
		Expect(getVM(ns, "db-0").GetAnnotations()).To(Equal(originalAnnotations))
		Expect(getVM(ns, "db-1").GetAnnotations()).To(BeEmpty())
		_, err := getNAD(ns, "db-link")
		Expect(err).To(HaveOccurred())
		Expect(resourceVersions(web)).To(Equal(webRV))
		Eventually(func() float64 {
			return metricValue("fastpath_attachment_vms_wired", map[string]string{"namespace": ns, "name": "db-link"})
		}).Should(Equal(-1.0))
	})

	It("adds and removes VMs as labels and the selector change", func() {
		ns := newNamespace()
		for _, n := range []string{"vm-a", "vm-b"} {
			createVM(ns, n, busyVM, map[string]string{"app": "db"})
		}
		createVM(ns, "vm-c", minimalVM, map[string]string{"app": "web"})
		original := map[string]string{}
		for _, n := range []string{"vm-a", "vm-b", "vm-c"} {
			original[n] = specJSON(ns, n)
		}
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Placement: v1alpha1.PlacementPreferred, Network: network(uniqueSubnet()),
		})
		Eventually(func() int32 { return getAttachment(ns, "link").Status.WiredVMs }).Should(Equal(int32(2)))
		Expect(templatePart(ns, "vm-a", "spec", "affinity", "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution")).To(Equal(
			`[{"podAffinityTerm":{"labelSelector":{"matchLabels":{"fastpath.io/attachment":"link"}},"topologyKey":"kubernetes.io/hostname"},"weight":100}]`))

		By("unwiring a VM whose labels stop matching")
		relabelVM(ns, "vm-b", map[string]string{"app": "other"})
		Eventually(func() string { return specJSON(ns, "vm-b") }).Should(Equal(original["vm-b"]))
		Eventually(statusVMNames(ns, "link")).Should(Equal([]string{"vm-a"}))
		Expect(getAttachment(ns, "link").Status.SelectedVMs).To(Equal(int32(1)))

		By("wiring the VMs a widened selector matches")
		updateAttachment(ns, "link", func(a *v1alpha1.FastPathAttachment) {
			a.Spec.VMSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "web", "other"}},
			}}
		})
		Eventually(statusVMNames(ns, "link")).Should(Equal([]string{"vm-a", "vm-b", "vm-c"}))
		Eventually(func() int32 { return getAttachment(ns, "link").Status.WiredVMs }).Should(Equal(int32(3)))
		for _, n := range []string{"vm-a", "vm-b", "vm-c"} {
			Expect(vmOwner(ns, n)()).To(Equal("link"))
		}

		By("unwiring everything when the selector matches nothing")
		updateAttachment(ns, "link", func(a *v1alpha1.FastPathAttachment) { a.Spec.VMSelector = selector("nothing") })
		Eventually(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonNoVMsSelected))
		for _, n := range []string{"vm-a", "vm-b", "vm-c"} {
			Eventually(func() string { return specJSON(ns, n) }).Should(Equal(original[n]), "VM %s", n)
		}
	})

	It("reports per-VM status, relay routes, co-location and nodes from VMIs and FastPathNodes", func() {
		ns := newNamespace()
		nodeA, nodeB := "node-a-"+ns, "node-b-"+ns
		for _, n := range []string{"db-0", "db-1", "db-2"} {
			createVM(ns, n, minimalVM, map[string]string{"app": "db"})
		}
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network(uniqueSubnet()),
			VSOCK: vsock(v1alpha1.VSOCKService{Name: "db", VM: "db-0", Port: 5432}, v1alpha1.VSOCKService{Name: "cache", VM: "db-1", Port: 6379}),
		})
		Eventually(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
		Expect(conditionMessage(ns, "link", v1alpha1.VSOCKReadyCondition)).To(ContainSubstring("service db: VM db-0 is not running"))

		createFastPathNode(nodeA, metav1.ConditionTrue)
		createVMI(ns, vmi{name: "db-0", node: nodeA, cid: ptr(uint32(3)), wired: true, attachment: "link", mac: "02:fa:00:00:00:01", ip: "10.250.0.5"})
		createVMI(ns, vmi{name: "db-1", node: nodeA, cid: ptr(uint32(4)), wired: true, attachment: "link", mac: "02:fa:00:00:00:02", ip: "10.250.0.6"})

		Eventually(conditionOf(ns, "link", v1alpha1.ReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonReady))
		att := getAttachment(ns, "link")
		for _, c := range []string{v1alpha1.ColocatedCondition, v1alpha1.NodesReadyCondition, v1alpha1.VSOCKReadyCondition, v1alpha1.NetworkAttachmentReadyCondition} {
			Expect(conditionOf(ns, "link", c)()).To(HavePrefix("True/"), c)
		}
		Expect(att.Status.VSOCKServices).To(HaveLen(2))
		dbPort, cachePort := att.Status.VSOCKServices[0].RelayPort, att.Status.VSOCKServices[1].RelayPort
		Expect(dbPort).To(BeNumerically(">=", relayPorts.First))
		Expect(dbPort).To(BeNumerically("<=", relayPorts.Last))
		Expect(cachePort).NotTo(Equal(dbPort))
		Expect(att.Status.VSOCKServices).To(Equal([]v1alpha1.VSOCKServiceStatus{
			{Name: "db", Mode: v1alpha1.VSOCKModeRelay, Address: v1alpha1.VSOCKAddress(2, dbPort), VM: "db-0", Port: 5432, RelayPort: dbPort, Node: nodeA, TargetCID: ptr(int64(3)), AllowedCIDs: []int64{4}},
			{Name: "cache", Mode: v1alpha1.VSOCKModeRelay, Address: v1alpha1.VSOCKAddress(2, cachePort), VM: "db-1", Port: 6379, RelayPort: cachePort, Node: nodeA, TargetCID: ptr(int64(4)), AllowedCIDs: []int64{3}},
		}))
		Expect(vmStatus(ns, "link", "db-0")()).To(Equal(v1alpha1.VMStatus{
			Name: "db-0", Wired: true, Node: nodeA, Interface: "eth1", PodInterface: "pod0123456789a",
			MAC: "02:fa:00:00:00:01", IPs: []string{"10.250.0.5"}, MTU: 9000, CID: ptr(int64(3)),
			VSOCKMode: v1alpha1.VSOCKModeRelay, VSOCKMessage: attachment.MsgRelayMode,
			RelayPorts: []v1alpha1.RelayPort{{Service: "cache", Port: cachePort}},
		}))
		Expect(vmStatus(ns, "link", "db-2")()).To(Equal(v1alpha1.VMStatus{
			Name: "db-2", Wired: true, MTU: 9000, Message: "not running: the VM has no VirtualMachineInstance",
			VSOCKMode: v1alpha1.VSOCKModeRelay, VSOCKMessage: attachment.MsgRelayMode,
			RelayPorts: []v1alpha1.RelayPort{{Service: "db", Port: dbPort}, {Service: "cache", Port: cachePort}},
		}))

		By("a tuning change that the running VMs have not picked up")
		updateAttachment(ns, "link", func(a *v1alpha1.FastPathAttachment) { a.Spec.Network.MTU = ptr(int32(1500)) })
		Eventually(func() string { return vmStatus(ns, "link", "db-1")().Message }).Should(Equal(
			"restart the VM to apply the fast path: the running VMI lacks the current tuning of fp-link (mtu 1500, running 9000)"))
		Expect(vmStatus(ns, "link", "db-1")().RestartRequired).To(BeTrue())
		updateAttachment(ns, "link", func(a *v1alpha1.FastPathAttachment) { a.Spec.Network.MTU = ptr(int32(9000)) })
		Eventually(func() bool { return vmStatus(ns, "link", "db-1")().RestartRequired }).Should(BeFalse())
		Eventually(conditionOf(ns, "link", v1alpha1.ReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonReady))

		By("a VM started elsewhere, before the wiring and without a CID")
		createVMI(ns, vmi{name: "db-2", node: nodeB})
		Eventually(conditionOf(ns, "link", v1alpha1.ColocatedCondition)).Should(Equal("False/" + v1alpha1.ReasonNotColocated))
		Expect(conditionMessage(ns, "link", v1alpha1.ColocatedCondition)).To(And(
			ContainSubstring("db-0, db-1 on "+nodeA), ContainSubstring("db-2 on "+nodeB)))
		Expect(conditionOf(ns, "link", v1alpha1.NodesReadyCondition)()).To(Equal("Unknown/" + v1alpha1.ReasonNodeUnknown))
		Expect(conditionMessage(ns, "link", v1alpha1.NodesReadyCondition)).To(ContainSubstring(nodeB + " has no FastPathNode"))
		Expect(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonNoCID))
		Expect(conditionMessage(ns, "link", v1alpha1.VSOCKReadyCondition)).To(ContainSubstring("db-2"))
		st := vmStatus(ns, "link", "db-2")()
		Expect(st.RestartRequired).To(BeTrue())
		Expect(st.Message).To(Equal("restart the VM to apply the fast path: the running VMI lacks network fp-link, interface fp-link, autoattachVSOCK"))
		Expect(st.Node).To(Equal(nodeB))
		Expect(conditionOf(ns, "link", v1alpha1.ReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonNotReady))

		By("a node whose agent is not Ready")
		createFastPathNode(nodeB, metav1.ConditionFalse)
		Eventually(conditionOf(ns, "link", v1alpha1.NodesReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNodeNotReady))

		By("the target of a service stopping; relay ports stay")
		deleteVMI(ns, "db-0")
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
		att = getAttachment(ns, "link")
		Expect(att.Status.VSOCKServices[0].RelayPort).To(Equal(dbPort))
		Expect(att.Status.VSOCKServices[1].RelayPort).To(Equal(cachePort))
		Expect(att.Status.VSOCKServices[1].AllowedCIDs).To(BeEmpty())

		By("another attachment getting a relay port only once its target runs, and another one")
		ns2 := newNamespace()
		createVM(ns2, "x-0", minimalVM, map[string]string{"app": "x"})
		newAttachment(ns2, "other", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("x"), VSOCK: vsock(v1alpha1.VSOCKService{Name: "s", VM: "x-0", Port: 1})})
		Eventually(conditionOf(ns2, "other", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
		Expect(getAttachment(ns2, "other").Status.VSOCKServices).To(ConsistOf(HaveField("RelayPort", BeZero())), "a target that never ran holds no port")
		createVMI(ns2, vmi{name: "x-0", node: nodeA})
		Eventually(func() int64 {
			s := getAttachment(ns2, "other").Status.VSOCKServices
			if len(s) == 0 {
				return 0
			}
			return s[0].RelayPort
		}).Should(And(BeNumerically(">=", relayPorts.First), Not(BeElementOf(dbPort, cachePort))))
	})

	It("lets the older of two overlapping attachments wire a VM and never overwrites a user's entry", func() {
		ns := newNamespace()
		createVM(ns, "shared", busyVM, map[string]string{"app": "db"})
		original := specJSON(ns, "shared")
		zOld := newAttachment(ns, "z-old", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("none-yet"), Network: network(uniqueSubnet())})
		// creationTimestamp has one-second resolution. The older attachment has
		// the later name, so the test fails if the name rather than the
		// timestamp decides. The embedded API server stamps with this host's
		// clock: wait until its second has moved past z-old's.
		Eventually(func() time.Time { return time.Now().Truncate(time.Second) }).Should(BeTemporally(">", zOld.CreationTimestamp.Time))
		aNew := newAttachment(ns, "a-new", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network("10.251.0.0/24")})
		Expect(aNew.CreationTimestamp.Time).To(BeTemporally(">", zOld.CreationTimestamp.Time), "z-old must be the older attachment")
		Eventually(vmOwner(ns, "shared")).Should(Equal("a-new"))

		By("the older attachment starting to select the VM takes it over")
		updateAttachment(ns, "z-old", func(a *v1alpha1.FastPathAttachment) { a.Spec.VMSelector = selector("db") })
		Eventually(vmOwner(ns, "shared")).Should(Equal("z-old"))
		Eventually(conditionOf(ns, "a-new", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonVMConflict))
		Expect(conditionMessage(ns, "a-new", v1alpha1.VMsWiredCondition)).To(
			Equal("VM shared is also selected by FastPathAttachment z-old, which is older and wires it"))
		Expect(vmStatus(ns, "a-new", "shared")().Wired).To(BeFalse())
		Eventually(conditionOf(ns, "z-old", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(templatePart(ns, "shared", "spec", "networks")).To(Equal(
			`[{"name":"default","pod":{}},{"multus":{"networkName":"storage-net"},"name":"storage"},{"multus":{"networkName":"z-old"},"name":"fp-z-old"}]`))
		Consistently(vmOwner(ns, "shared")).Should(Equal("z-old"))
		old := getAttachment(ns, "z-old")

		By("handing the VM over when the older attachment goes")
		Expect(env.Client.Delete(ctx, old)).To(Succeed())
		Eventually(vmOwner(ns, "shared")).Should(Equal("a-new"))
		Eventually(conditionOf(ns, "a-new", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(templatePart(ns, "shared", "spec", "networks")).To(Equal(
			`[{"name":"default","pod":{}},{"multus":{"networkName":"storage-net"},"name":"storage"},{"multus":{"networkName":"a-new"},"name":"fp-a-new"}]`))

		Expect(env.Client.Delete(ctx, getAttachment(ns, "a-new"))).To(Succeed())
		Eventually(func() string { return specJSON(ns, "shared") }).Should(Equal(original))

		By("a user's own interface of our name")
		userVM := fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"%%[1]s","labels":%%[2]s},
		 "spec":{"template":{"spec":{"domain":{"devices":{"interfaces":[{"name":"%s","masquerade":{}}]}},"networks":[{"name":"%s","pod":{}}]}}}}`,
			"fp-mine", "fp-mine")
		vm := createVM(ns, "user", userVM, map[string]string{"app": "user"})
		rv := resourceVersions(vm)
		newAttachment(ns, "mine", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("user"), Network: network("10.252.0.0/24")})
		Eventually(conditionOf(ns, "mine", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonVMConflict))
		Expect(conditionMessage(ns, "mine", v1alpha1.VMsWiredCondition)).To(Equal(
			"VM user: spec.template.spec.networks[name=fp-mine] exists and was not written by fastpath-operator"))
		Consistently(func() []string { return resourceVersions(vm) }).Should(Equal(rv))
	})

	It("takes over a VM still wired by an attachment that no longer exists", func() {
		ns := newNamespace()
		vm := &unstructured.Unstructured{}
		Expect(vm.UnmarshalJSON([]byte(fmt.Sprintf(busyVM, "orphan", `{"app":"db"}`)))).To(Succeed())
		original, err := json.Marshal(vm.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		// The wiring of an attachment whose finalizer was removed by force.
		_, err = wiring.Wire(vm.Object, wiring.Desired{Attachment: "gone", VSOCK: true, Placement: v1alpha1.PlacementPreferred})
		Expect(err).NotTo(HaveOccurred())
		vm.SetNamespace(ns)
		Expect(env.Client.Create(ctx, vm)).To(Succeed())

		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		Eventually(vmOwner(ns, "orphan")).Should(Equal("link"))
		// Either the orphan cleanup or the takeover removed the old wiring; both say so.
		Eventually(objectEventReasons(ns, "VirtualMachine", "orphan")).Should(ContainElement("Normal/" + v1alpha1.ReasonOrphanUnwired))
		Expect(templatePart(ns, "orphan", "spec", "domain", "devices", "autoattachVSOCK")).To(Equal("<absent>"))
		Expect(templatePart(ns, "orphan", "spec", "affinity")).To(Equal(
			`{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"},` +
				`{"labelSelector":{"matchLabels":{"fastpath.io/attachment":"link"}},"topologyKey":"kubernetes.io/hostname"}]}}`))

		Expect(env.Client.Delete(ctx, getAttachment(ns, "link"))).To(Succeed())
		Eventually(func() string { return specJSON(ns, "orphan") }).Should(Equal(string(original)))
	})

	It("removes the wiring of an attachment deleted without its finalizer", func() {
		ns := newNamespace()
		vm := &unstructured.Unstructured{}
		Expect(vm.UnmarshalJSON([]byte(fmt.Sprintf(busyVM, "orphan", `{"app":"db"}`)))).To(Succeed())
		original, err := json.Marshal(vm.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		originalAnnotations := vm.GetAnnotations()
		// What a force-deleted attachment leaves: its wiring and record, and no
		// attachment of that name; nothing selects the VM.
		_, err = wiring.Wire(vm.Object, wiring.ForAttachment(&v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "forced"}, Spec: v1alpha1.FastPathAttachmentSpec{Placement: v1alpha1.PlacementRequired, Network: &v1alpha1.NetworkSpec{Queues: ptr(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}, VSOCK: vsock(v1alpha1.VSOCKService{Name: "db", VM: "orphan", Port: 5432})}}))
		Expect(err).NotTo(HaveOccurred())
		vm.SetNamespace(ns)
		Expect(env.Client.Create(ctx, vm)).To(Succeed())
		Expect(wiring.Owner(vm.Object)).To(Equal("forced"), "the VM as created carries the record")

		Eventually(func() string { return specJSON(ns, "orphan") }).Should(Equal(string(original)))
		Expect(getVM(ns, "orphan").GetAnnotations()).To(Equal(originalAnnotations))
		Eventually(objectEventReasons(ns, "VirtualMachine", "orphan")).Should(ContainElement("Normal/" + v1alpha1.ReasonOrphanUnwired))
	})

	It("replaces the wiring of an earlier attachment of the same name", func() {
		ns := newNamespace()
		vm := &unstructured.Unstructured{}
		Expect(vm.UnmarshalJSON([]byte(fmt.Sprintf(busyVM, "again", `{"app":"db"}`)))).To(Succeed())
		original, err := json.Marshal(vm.Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		// What "link" deleted (finalizer removed by force) leaves before a new
		// "link" is created, or what a cache behind an apiserver outage shows.
		_, err = wiring.Wire(vm.Object, wiring.Desired{Attachment: "link", AttachmentUID: "uid-of-an-earlier-link", VSOCK: true, Placement: v1alpha1.PlacementPreferred})
		Expect(err).NotTo(HaveOccurred())
		vm.SetNamespace(ns)
		Expect(env.Client.Create(ctx, vm)).To(Succeed())

		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		uid := string(getAttachment(ns, "link").UID)
		Eventually(func() string { return wiring.OwnerUID(getVM(ns, "again").Object) }).Should(Equal(uid))
		Eventually(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Eventually(objectEventReasons(ns, "VirtualMachine", "again")).Should(ContainElement("Normal/" + v1alpha1.ReasonOrphanUnwired))
		Expect(templatePart(ns, "again", "spec", "domain", "devices", "autoattachVSOCK")).To(Equal("<absent>"))

		Expect(env.Client.Delete(ctx, getAttachment(ns, "link"))).To(Succeed())
		Eventually(func() string { return specJSON(ns, "again") }).Should(Equal(string(original)))
	})

	It("adopts a NetworkAttachmentDefinition left by an earlier attachment of the same name", func() {
		ns := newNamespace()
		// No garbage collector runs in envtest: the NAD of a deleted "link"
		// stays, controlled by a uid that no longer exists.
		left := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "link", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FastPathAttachment",
				Name: "link", UID: "uid-of-an-earlier-link", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}}}
		left.Spec.Config = `{"cniVersion":"1.0.0","name":"old","type":"fastpath"}`
		Expect(env.Client.Create(ctx, left)).To(Succeed())

		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		Eventually(conditionOf(ns, "link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		nad, err := getNAD(ns, "link")
		Expect(err).NotTo(HaveOccurred())
		Expect(metav1.IsControlledBy(nad, getAttachment(ns, "link"))).To(BeTrue())
		Expect(nad.OwnerReferences).To(HaveLen(1))
		Expect(nad.Spec.Config).NotTo(ContainSubstring(`"name":"old"`))

		Expect(env.Client.Delete(ctx, getAttachment(ns, "link"))).To(Succeed())
		Eventually(isGone(nad)).Should(BeTrue())
	})

	It("still refuses a NetworkAttachmentDefinition of its name controlled by something else", func() {
		ns := newNamespace()
		other := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "link", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "link", UID: "uid-of-a-configmap", Controller: ptr(true)}}}}
		other.Spec.Config = `{"cniVersion":"1.0.0","name":"theirs","type":"bridge"}`
		Expect(env.Client.Create(ctx, other)).To(Succeed())
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		Eventually(conditionOf(ns, "link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNADConflict))
		nad, err := getNAD(ns, "link")
		Expect(err).NotTo(HaveOccurred())
		Expect(nad.Spec.Config).To(ContainSubstring(`"name":"theirs"`))
	})

	It("rejects a spec the CRD cannot check with Ready=False/InvalidSpec", func() {
		ns := newNamespace()
		vm := createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		// ghost exists and spec.vmSelector does not select it.
		ghost := createVM(ns, "ghost", minimalVM, map[string]string{"app": "other"})
		rv := resourceVersions(vm, ghost)
		for _, tc := range []struct {
			name, field string
			spec        v1alpha1.FastPathAttachmentSpec
		}{
			{"ghost", `spec.vsock.services[1].vm "ghost" is not a VirtualMachine selected by spec.vmSelector`, v1alpha1.FastPathAttachmentSpec{
				VMSelector: selector("db"),
				VSOCK:      vsock(v1alpha1.VSOCKService{Name: "a", VM: "db-0", Port: 1}, v1alpha1.VSOCKService{Name: "b", VM: "ghost", Port: 2}),
			}},
			{"overlap", "spec.network.ipam.subnet 10.244.7.0/24 overlaps the pod network 10.244.0.0/16 (--pod-network-cidr)", v1alpha1.FastPathAttachmentSpec{
				VMSelector: selector("db"), Network: network("10.244.7.0/24"),
			}},
			{"tso", "spec.network.offloads.tso On requires spec.network.offloads.txChecksum On", v1alpha1.FastPathAttachmentSpec{
				VMSelector: selector("db"),
				Network:    &v1alpha1.NetworkSpec{Offloads: &v1alpha1.Offloads{TXChecksum: v1alpha1.OffloadOff}, IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
			}},
		} {
			newAttachment(ns, tc.name, tc.spec)
			Eventually(conditionOf(ns, tc.name, v1alpha1.ReadyCondition)).Should(Equal("False/"+v1alpha1.ReasonInvalidSpec), tc.name)
			Expect(conditionMessage(ns, tc.name, v1alpha1.ReadyCondition)).To(HavePrefix(tc.field), tc.name)
		}
		Eventually(eventReasons(ns, "ghost")).Should(ContainElement("Warning/" + v1alpha1.ReasonInvalidSpec))
		Consistently(func() []string { return resourceVersions(vm, ghost) }).Should(Equal(rv))
		_, err := getNAD(ns, "overlap")
		Expect(err).To(HaveOccurred())

		By("recovering once the spec is fixed")
		updateAttachment(ns, "ghost", func(a *v1alpha1.FastPathAttachment) { a.Spec.VSOCK.Services = a.Spec.VSOCK.Services[:1] })
		Eventually(conditionOf(ns, "ghost", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(conditionOf(ns, "ghost", v1alpha1.ReadyCondition)()).NotTo(HaveSuffix(v1alpha1.ReasonInvalidSpec))
	})

	It("waits for a vsock target VM that does not exist yet instead of rejecting the spec", func() {
		ns := newNamespace()
		createVM(ns, "app-0", minimalVM, map[string]string{"app": "db"})
		// kubectl apply -f <dir> creates the attachment before the VMs.
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"),
			VSOCK:      vsock(v1alpha1.VSOCKService{Name: "a", VM: "app-0", Port: 1}, v1alpha1.VSOCKService{Name: "b", VM: "late", Port: 2}),
		})
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotFound))
		Expect(conditionMessage(ns, "link", v1alpha1.VSOCKReadyCondition)).To(HavePrefix(
			fmt.Sprintf("service b: VirtualMachine %s/late does not exist; service a: VM app-0 is not running", ns)))
		Expect(conditionOf(ns, "link", v1alpha1.ReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonNotReady))
		Expect(conditionMessage(ns, "link", v1alpha1.ReadyCondition)).To(ContainSubstring("VSOCKReady is False (" + v1alpha1.ReasonTargetNotFound + ")"))
		// The other phases ran: the selected VM is wired and services have relay ports.
		Expect(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)()).To(Equal("True/" + v1alpha1.ReasonWired))
		Expect(getAttachment(ns, "link").Status.VSOCKServices).To(HaveLen(2))
		Eventually(eventReasons(ns, "link")).Should(ContainElement("Warning/" + v1alpha1.ReasonTargetNotFound))
		Consistently(eventReasons(ns, "link")).ShouldNot(ContainElement("Warning/" + v1alpha1.ReasonInvalidSpec))

		By("the VM appearing with labels the selector matches")
		createVM(ns, "late", minimalVM, map[string]string{"app": "db"})
		Eventually(vmOwner(ns, "late")).Should(Equal("link"))
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
		Expect(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)()).To(Equal("True/" + v1alpha1.ReasonWired))
		Expect(getAttachment(ns, "link").Status.WiredVMs).To(Equal(int32(2)))

		By("a target appearing that the selector does not match")
		updateAttachment(ns, "link", func(a *v1alpha1.FastPathAttachment) { a.Spec.VSOCK.Services[1].VM = "stray" })
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotFound))
		createVM(ns, "stray", minimalVM, map[string]string{"app": "other"})
		Eventually(conditionOf(ns, "link", v1alpha1.ReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonInvalidSpec))
		Expect(conditionMessage(ns, "link", v1alpha1.ReadyCondition)).To(HavePrefix(`spec.vsock.services[1].vm "stray" is not a VirtualMachine selected by spec.vmSelector`))
	})
})

var _ = Describe("An operator restart", Serial, func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		SetDefaultConsistentlyDuration(quiet)
	})

	It("changes nothing that is in place and finishes what changed while it was down", func() {
		ns := newNamespace()
		vm0 := createVM(ns, "vm-0", busyVM, map[string]string{"app": "db"})
		vm1 := createVM(ns, "vm-1", minimalVM, map[string]string{"app": "db"})
		createVM(ns, "vm-2", busyVM, map[string]string{"app": "db"})
		original2 := specJSON(ns, "vm-2")
		att := newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network(uniqueSubnet()),
			VSOCK: vsock(v1alpha1.VSOCKService{Name: "db", VM: "vm-0", Port: 5432}),
		})
		createVMI(ns, vmi{name: "vm-0", node: "node-r", cid: ptr(uint32(7)), wired: true, attachment: "link", mac: "02:fa:00:00:00:07", ip: "10.250.0.7"})
		Eventually(func() int32 { return getAttachment(ns, "link").Status.WiredVMs }).Should(Equal(int32(3)))
		Eventually(conditionOf(ns, "link", v1alpha1.VSOCKReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonVSOCKReady))
		port := getAttachment(ns, "link").Status.VSOCKServices[0].RelayPort
		nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "link"}}
		// Let the last status write settle before taking the snapshot.
		Eventually(func() []string { return resourceVersions(att) }).WithTimeout(5 * time.Second).Should(Not(BeEmpty()))
		Consistently(func() []string { return resourceVersions(att, vm0, vm1, nad) }).WithTimeout(time.Second).Should(Equal(resourceVersions(att, vm0, vm1, nad)))

		By("stopping the operator and changing things while it is down")
		stopManager()
		stopManager = nil
		before := resourceVersions(vm0, vm1, nad)
		relabelVM(ns, "vm-2", map[string]string{"app": "gone"})
		createVM(ns, "vm-3", minimalVM, map[string]string{"app": "db"})

		By("starting a new operator")
		stopManager = startManager(env.Config)
		Eventually(func() string { return specJSON(ns, "vm-2") }).Should(Equal(original2))
		Eventually(vmOwner(ns, "vm-3")).Should(Equal("link"))
		Eventually(statusVMNames(ns, "link")).Should(Equal([]string{"vm-0", "vm-1", "vm-3"}))
		Expect(resourceVersions(vm0, vm1, nad)).To(Equal(before))
		Expect(getAttachment(ns, "link").Status.VSOCKServices[0].RelayPort).To(Equal(port))

		By("restarting again with nothing to do")
		Eventually(func() []string { return resourceVersions(att) }).Should(Not(BeEmpty()))
		Consistently(func() []string { return resourceVersions(att, vm0, vm1, nad) }).WithTimeout(time.Second).Should(Equal(resourceVersions(att, vm0, vm1, nad)))
		stopManager()
		stopManager = nil
		snapshot := resourceVersions(att, vm0, vm1, nad)
		reconciles := metricValue("controller_runtime_reconcile_total", map[string]string{"controller": "fastpathattachment"})
		counter := &apiCounter{}
		stopManager = startManager(counter.wrap(env.Config))
		Eventually(func() float64 {
			return metricValue("controller_runtime_reconcile_total", map[string]string{"controller": "fastpathattachment"})
		}).Should(BeNumerically(">", reconciles), "the new operator reconciles")
		Consistently(func() []string { return resourceVersions(att, vm0, vm1, nad) }).Should(Equal(snapshot))
		Expect(counter.reads.Load()).To(BeNumerically(">", 0))
		Expect(counter.writes.Load()).To(BeZero(), "the new operator sends no write at all")
	})
})
