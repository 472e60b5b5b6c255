package attachment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/attachment"
)

var _ = Describe("FastPathAttachment in vsock mode Sibling", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
	})

	It("rejects an unknown spec.vsock.mode, naming the field", func() {
		ns := newNamespace()
		att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"),
			VSOCK:      &v1alpha1.VSOCKSpec{Mode: "Direct", Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 1}}},
		}}
		err := env.Client.Create(ctx, att)
		Expect(err).To(MatchError(And(ContainSubstring("spec.vsock.mode"), ContainSubstring(`"Relay", "Sibling"`))))
	})

	It("gives each VM a CID in the group, keeps it on nodes with the backend, lists services as <cid>:<port> and says which node cannot do Sibling", func() {
		ns := newNamespace()
		nodeA, nodeB := "node-a-"+ns, "node-b-"+ns
		for _, n := range []string{"db-0", "db-1", "db-2", "db-3"} {
			createVM(ns, n, minimalVM, map[string]string{"app": "db"})
		}
		newAttachment(ns, "sib", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network(uniqueSubnet()),
			VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{
				{Name: "db", VM: "db-0", Port: 5432}, {Name: "cache", VM: "db-1", Port: 6379}}},
		})
		Eventually(conditionOf(ns, "sib", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(templatePart(ns, "db-0", "metadata", "annotations", v1alpha1.VSOCKModeAnnotation)).To(Equal(`"Sibling"`))
		Expect(templatePart(ns, "db-0", "spec", "domain", "devices", "autoattachVSOCK")).To(Equal("<absent>"))
		// Scheduled only where a node agent runs the backend (it labels its Node).
		Expect(templatePart(ns, "db-0", "spec", "nodeSelector")).To(Equal(`{"` + v1alpha1.VhostUserVSOCKNodeLabel + `":"true"}`))
		// The device plugin resource that brings the VM's socket into its
		// compute container, next to the user's own resources.
		Expect(templatePart(ns, "db-0", "spec", "domain", "resources")).To(Equal(`{"limits":{"` + v1alpha1.SiblingResourceName + `":"1"},"requests":{"memory":"1Gi"}}`))
		Eventually(conditionOf(ns, "sib", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
		for i, n := range []string{"db-0", "db-1", "db-2", "db-3"} {
			st := vmStatus(ns, "sib", n)()
			Expect(st.VSOCKMode).To(Equal(v1alpha1.VSOCKModeSibling), n)
			Expect(st.CID).To(Equal(ptr(int64(3+i))), n)
			Expect(st.RelayPorts).To(BeEmpty(), n)
		}

		By("two VMs on a node that runs the backend")
		createFastPathNode(nodeA, metav1.ConditionTrue)
		setSiblingCapability(nodeA, "0.3.0")
		createVMI(ns, vmi{name: "db-0", node: nodeA, wired: true, attachment: "sib"})
		createVMI(ns, vmi{name: "db-1", node: nodeA, wired: true, attachment: "sib"})
		Eventually(conditionOf(ns, "sib", v1alpha1.VSOCKReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonSiblingReady))
		// The VMI's status (its node) may land after the VMI: wait for it too.
		Eventually(func() []v1alpha1.VSOCKServiceStatus { return getAttachment(ns, "sib").Status.VSOCKServices }).Should(Equal([]v1alpha1.VSOCKServiceStatus{
			{Name: "db", Mode: v1alpha1.VSOCKModeSibling, Address: "3:5432", VM: "db-0", Port: 5432, Node: nodeA, TargetCID: ptr(int64(3)), AllowedCIDs: []int64{4, 5, 6}},
			{Name: "cache", Mode: v1alpha1.VSOCKModeSibling, Address: "4:6379", VM: "db-1", Port: 6379, Node: nodeA, TargetCID: ptr(int64(4)), AllowedCIDs: []int64{3, 5, 6}},
		}))
		Expect(vmStatus(ns, "sib", "db-0")().VSOCKMessage).To(Equal(attachment.MsgSiblingMode))

		By("a third VM on a node without the backend")
		createFastPathNode(nodeB, metav1.ConditionTrue)
		createVMI(ns, vmi{name: "db-2", node: nodeB, wired: true, attachment: "sib"})
		Eventually(conditionOf(ns, "sib", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNodeCannotSibling))
		Expect(conditionMessage(ns, "sib", v1alpha1.VSOCKReadyCondition)).To(And(ContainSubstring("VM db-2"), ContainSubstring(nodeB), ContainSubstring("vhostUserVSOCK")))
		Expect(vmStatus(ns, "sib", "db-2")().VSOCKMessage).To(HavePrefix("mode Sibling, not working: node " + nodeB))

		By("the CIDs survive a VM leaving the selection")
		relabelVM(ns, "db-2", map[string]string{"app": "other"})
		Eventually(statusVMNames(ns, "sib")).Should(Equal([]string{"db-0", "db-1", "db-3"}))
		Expect(vmStatus(ns, "sib", "db-3")().CID).To(Equal(ptr(int64(6))))
		Eventually(conditionOf(ns, "sib", v1alpha1.VSOCKReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonSiblingReady))

		By("back to Relay: no group CIDs, relay ports again")
		updateAttachment(ns, "sib", func(a *v1alpha1.FastPathAttachment) { a.Spec.VSOCK.Mode = v1alpha1.VSOCKModeRelay })
		Eventually(func() v1alpha1.VSOCKMode { return vmStatus(ns, "sib", "db-0")().VSOCKMode }).Should(Equal(v1alpha1.VSOCKModeRelay))
		Eventually(func() int64 { return getAttachment(ns, "sib").Status.VSOCKServices[0].RelayPort }).Should(BeNumerically(">", 0))
		Eventually(func() string {
			return templatePart(ns, "db-0", "metadata", "annotations", v1alpha1.VSOCKModeAnnotation)
		}).Should(Equal("<absent>"))
		Expect(templatePart(ns, "db-0", "spec", "nodeSelector")).To(Equal("<absent>"))
		Expect(templatePart(ns, "db-0", "spec", "domain", "resources")).To(Equal(`{"requests":{"memory":"1Gi"}}`))
	})

	It("quotes the scheduler when a target VM cannot be placed, and says where Sibling places VMs", func() {
		ns := newNamespace()
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		newAttachment(ns, "sib", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network(uniqueSubnet()),
			VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}},
		})
		Eventually(conditionOf(ns, "sib", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		const why = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
		createVMI(ns, vmi{name: "db-0", wired: true, attachment: "sib", unschedulable: why})
		Eventually(func() string { return conditionMessage(ns, "sib", v1alpha1.VSOCKReadyCondition) }).Should(And(
			ContainSubstring("VM db-0 is not running on a node yet (the scheduler: "+why),
			ContainSubstring(v1alpha1.VhostUserVSOCKNodeLabel+"=true"), ContainSubstring("agent.sibling.enabled")))
		Expect(conditionOf(ns, "sib", v1alpha1.VSOCKReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonTargetNotRunning))
	})

	It("refuses a VM whose own limit of the sibling resource differs, naming the field", func() {
		ns := newNamespace()
		createVM(ns, "db-0", `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"%[1]s","labels":%[2]s},
 "spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"},"limits":{"vsock.fastpath.io/sibling":"2"}}}}}}}`, map[string]string{"app": "db"})
		newAttachment(ns, "sib", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network(uniqueSubnet()),
			VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}},
		})
		Eventually(conditionOf(ns, "sib", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonVMConflict))
		Expect(conditionMessage(ns, "sib", v1alpha1.VMsWiredCondition)).To(ContainSubstring(`spec.template.spec.domain.resources.limits["vsock.fastpath.io/sibling"]`))
		Expect(templatePart(ns, "db-0", "spec", "domain", "resources", "limits")).To(Equal(`{"vsock.fastpath.io/sibling":"2"}`))
	})
})
