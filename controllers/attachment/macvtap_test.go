package attachment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

var _ = Describe("Datapath Macvtap", func() {
	It("refuses networks whose lower device or offloads cannot be, naming the field", func() {
		type refusal struct {
			spec v1alpha1.FastPathNetworkSpec
			msg  string
		}
		cases := []refusal{
			{v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathMacvtap, Bridge: "fp-lower."},
				"spec.bridge must start and end with a letter or digit when spec.datapath is Macvtap"},
		}
		// The CRD rule names every offload: one it forgets passes here.
		for _, row := range wellknown.Offloads {
			o := &v1alpha1.Offloads{}
			*o.Offload(row.Name) = v1alpha1.OffloadOff
			cases = append(cases, refusal{v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathMacvtap, Bridge: "fplower", Offloads: o},
				"spec.offloads must all be On when spec.datapath is Macvtap"})
		}
		for _, tc := range cases {
			tc.spec.NamespaceSelector = metav1.LabelSelector{}
			err := env.Client.Create(ctx, &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: "macvtap-refused"}, Spec: tc.spec})
			Expect(err).To(MatchError(ContainSubstring(tc.msg)))
		}
		// The same name on another datapath is fine.
		createNetwork("lb-dot-"+newNamespace(), v1alpha1.FastPathNetworkSpec{Bridge: "fp-lower."})
	})

	It("renders the NAD with the device plugin resource and wires VMs with KubeVirt's macvtap binding", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		createVM(ns, "db-1", minimalVM, map[string]string{"app": "db"})
		net := createNetwork("macvtap-"+ns, v1alpha1.FastPathNetworkSpec{
			Datapath: v1alpha1.DatapathMacvtap, Bridge: "fpmv0", MTU: &v1alpha1.MTURange{Max: ptr(int32(65535)), Default: ptr(int32(65535))},
			NamespaceSelector: metav1.LabelSelector{},
		})
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(uniqueSubnet())})

		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		Expect(conditionMessage(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).To(And(
			ContainSubstring("datapath Macvtap, lower device fpmv0, MTU 65535"),
			ContainSubstring("device plugin resource macvtap.fastpath.io/fpmv0"),
			ContainSubstring("KubeVirt network binding fastpath-macvtap")))
		nad, err := getNAD(ns, "db-link")
		Expect(err).NotTo(HaveOccurred())
		Expect(nad.Annotations).To(HaveKeyWithValue("k8s.v1.cni.cncf.io/resourceName", "macvtap.fastpath.io/fpmv0"))
		Expect(nad.Spec.Config).To(And(ContainSubstring(`"datapath":"Macvtap"`), ContainSubstring(`"bridge":"fpmv0"`),
			ContainSubstring(`"mtu":65535`), ContainSubstring(`"offloads":{"tso":true,"gso":true,"gro":true,"txChecksum":true,"rxChecksum":true}`)))

		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		for _, vm := range []string{"db-0", "db-1"} {
			Expect(templatePart(ns, vm, "spec", "domain", "devices", "interfaces")).To(ContainSubstring(
				`{"binding":{"name":"fastpath-macvtap"},"model":"virtio","name":"fp-db-link"}`))
			Expect(templatePart(ns, vm, "spec", "networks")).To(ContainSubstring(
				`{"multus":{"networkName":"db-link"},"name":"fp-db-link"}`))
		}
		Expect(templatePart(ns, "db-0", "spec", "domain", "devices", "interfaces")).To(ContainSubstring(
			`{"bridge":{},"macAddress":"02:00:00:00:00:01","name":"storage"}`), "the user's interfaces stay")

		By("the admin moving the network to LinuxBridge: the NAD loses the resource, the VMs get the fastpath binding plugin")
		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.Datapath = v1alpha1.DatapathLinuxBridge })
		Eventually(func() map[string]string {
			nad, err := getNAD(ns, "db-link")
			Expect(err).NotTo(HaveOccurred())
			return nad.Annotations
		}).ShouldNot(HaveKey("k8s.v1.cni.cncf.io/resourceName"))
		Eventually(func() string { return templatePart(ns, "db-1", "spec", "domain", "devices", "interfaces") }).Should(
			ContainSubstring(`{"binding":{"name":"fastpath"},"model":"virtio","name":"fp-db-link"}`))
	})

	It("refuses a tenant's offloads Off on a Macvtap network, naming the field", func() {
		ns := newNamespace()
		net := createNetwork("macvtap-off-"+ns, v1alpha1.FastPathNetworkSpec{
			Datapath: v1alpha1.DatapathMacvtap, Bridge: "fpmv1", NamespaceSelector: metav1.LabelSelector{},
		})
		spec := network(uniqueSubnet())
		spec.Offloads = &v1alpha1.Offloads{TSO: v1alpha1.OffloadOff, TXChecksum: v1alpha1.OffloadOff}
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: spec})
		Eventually(conditionOf(ns, "db-link", v1alpha1.ReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonInvalidSpec))
		Expect(conditionMessage(ns, "db-link", v1alpha1.ReadyCondition)).To(ContainSubstring(
			"spec.network.offloads.tso Off is not accepted: FastPathNetwork " + net + " uses datapath Macvtap"))
	})
})
