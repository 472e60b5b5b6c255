package attachment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/attachment"
)

// createNode writes a Ready Node with room, and its FastPathNode Ready
// with the suite's default network's bridge, as the agent would.
func createNode(name string) {
	GinkgoHelper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	Expect(env.Client.Create(ctx, n)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, n))).To(Succeed()) })
	// The API server's TaintNodesByCondition admission taints a new Node
	// not-ready; the node lifecycle controller, absent here, would lift it.
	n.Spec.Taints = nil
	Expect(env.Client.Update(ctx, n)).To(Succeed())
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity = n.Status.Allocatable
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
	createFastPathNode(name, metav1.ConditionTrue)
	fpn := &v1alpha1.FastPathNode{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, fpn)).To(Succeed())
	fpn.Status.Bridges = []v1alpha1.BridgeStatus{{Name: "fastpath0", Network: defaultNetwork, Ready: true, MTU: 9000}}
	Expect(env.Client.Status().Update(ctx, fpn)).To(Succeed())
}

// moveMigrations lists the migrations the operator created for a move.
func moveMigrations(ns string) func() []kubevirtv1.VirtualMachineInstanceMigration {
	return func() []kubevirtv1.VirtualMachineInstanceMigration {
		l := &kubevirtv1.VirtualMachineInstanceMigrationList{}
		Expect(env.Client.List(ctx, l, client.InNamespace(ns), client.HasLabels{attachment.MoveLabel})).To(Succeed())
		return l.Items
	}
}

// setVMIStatus changes a VMI's status as virt-controller would.
func setVMIStatus(ns, name string, change func(*kubevirtv1.VirtualMachineInstanceStatus)) {
	GinkgoHelper()
	Eventually(func() error {
		v := &kubevirtv1.VirtualMachineInstance{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, v); err != nil {
			return err
		}
		change(&v.Status)
		return env.Client.Status().Update(ctx, v)
	}).Should(Succeed())
}

// wiredPairOn makes nodes move-a-<ns> and move-b-<ns>, VMs db-0 and db-1
// wired by attachment "link" (placement and eviction defaulted) in a new
// namespace, calls between (nil: nothing) and starts both VMIs on node a.
func wiredPairOn(between func(ns, nodeA, nodeB string)) (ns, nodeA, nodeB string) {
	GinkgoHelper()
	ns = newNamespace()
	nodeA, nodeB = "move-a-"+ns, "move-b-"+ns
	createNode(nodeA)
	createNode(nodeB)
	for _, vm := range []string{"db-0", "db-1"} {
		createVM(ns, vm, minimalVM, map[string]string{"app": "db"})
	}
	if between != nil {
		between(ns, nodeA, nodeB)
	}
	newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
	Eventually(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
	if between == nil {
		Expect(templatePart(ns, "db-0", "spec", "evictionStrategy")).To(Equal(`"External"`), "MigrateTogether is the default of placement Required")
		Expect(templatePart(ns, "db-0", "spec", "affinity")).To(ContainSubstring("requiredDuringSchedulingIgnoredDuringExecution"))
	}
	for _, vm := range []string{"db-0", "db-1"} {
		createVMI(ns, vmi{name: vm, node: nodeA, wired: true, attachment: "link", mac: "02:00:00:00:00:0" + vm[3:], ip: "10.250.0.1" + vm[3:]})
	}
	return ns, nodeA, nodeB
}

// setUnschedulable cordons or uncordons a Node.
func setUnschedulable(name string, cordoned bool) {
	GinkgoHelper()
	Eventually(func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			return err
		}
		n.Spec.Unschedulable = cordoned
		return env.Client.Update(ctx, n)
	}).Should(Succeed())
}

var _ = Describe("Group moves (spec.eviction MigrateTogether)", func() {
	It("moves the VMs of a drained node together to a node that can take them all, and puts the placement back", func() {
		ns, nodeA, nodeB := wiredPairOn(nil)
		Eventually(conditionOf(ns, "link", v1alpha1.MovedTogetherCondition)).Should(Equal("True/" + v1alpha1.ReasonIdle))

		By("a drain's eviction marks one VMI for evacuation")
		setVMIStatus(ns, "db-0", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = nodeA })
		Eventually(func() *v1alpha1.MoveStatus { return getAttachment(ns, "link").Status.Move }).Should(And(
			Not(BeNil()), HaveField("From", nodeA), HaveField("To", nodeB), HaveField("VMs", ConsistOf("db-0", "db-1")), HaveField("Cause", v1alpha1.MoveCauseEviction)))
		Expect(conditionOf(ns, "link", v1alpha1.MovedTogetherCondition)()).To(Equal("False/" + v1alpha1.ReasonMoving))
		Eventually(func() string { return templatePart(ns, "db-0", "spec", "affinity") }).ShouldNot(ContainSubstring("requiredDuringSchedulingIgnoredDuringExecution"),
			"the required term would make the migration target unschedulable")
		Expect(templatePart(ns, "db-0", "spec", "evictionStrategy")).To(Equal(`"External"`))

		By("one migration per VM, each naming the target node")
		Eventually(moveMigrations(ns)).Should(HaveLen(2))
		for _, m := range moveMigrations(ns)() {
			Expect(m.Spec.AddedNodeSelector).To(Equal(map[string]string{corev1.LabelHostname: nodeB}))
			Expect(m.Spec.VMIName).To(BeElementOf("db-0", "db-1"))
		}
		Consistently(moveMigrations(ns)).Should(HaveLen(2), "no second migration while the first is on its way")

		By("both arrive")
		for _, m := range moveMigrations(ns)() {
			m.Status.Phase = kubevirtv1.MigrationSucceeded
			Expect(env.Client.Status().Update(ctx, &m)).To(Succeed())
		}
		Consistently(moveMigrations(ns)).Should(HaveLen(2), "a migration that succeeded is not repeated while the VMI does not yet show its new node")
		for _, m := range moveMigrations(ns)() {
			setVMIStatus(ns, m.Spec.VMIName, func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.NodeName, s.EvacuationNodeName = nodeB, "" })
		}
		Eventually(conditionOf(ns, "link", v1alpha1.MovedTogetherCondition)).Should(Equal("True/"+v1alpha1.ReasonMoved),
			func() string { return conditionMessage(ns, "link", v1alpha1.MovedTogetherCondition) })
		Expect(getAttachment(ns, "link").Status.Move).To(BeNil())
		Expect(conditionMessage(ns, "link", v1alpha1.MovedTogetherCondition)).To(ContainSubstring("from node " + nodeA + " to node " + nodeB))
		Eventually(func() string { return templatePart(ns, "db-0", "spec", "affinity") }).Should(ContainSubstring("requiredDuringSchedulingIgnoredDuringExecution"),
			"the placement is back once the group is together again")
		Eventually(eventReasons(ns, "link")).Should(ContainElements("Normal/"+v1alpha1.ReasonMoving, "Normal/"+v1alpha1.ReasonMoved))
		Expect(conditionOf(ns, "link", v1alpha1.ColocatedCondition)()).To(Equal("True/" + v1alpha1.ReasonColocated))
	})

	It("tries a failed migration again only once its target pod ended", func() {
		ns, nodeA, nodeB := wiredPairOn(nil)
		setVMIStatus(ns, "db-0", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = nodeA })
		Eventually(moveMigrations(ns)).Should(HaveLen(2))
		var first kubevirtv1.VirtualMachineInstanceMigration
		for _, m := range moveMigrations(ns)() {
			if m.Spec.VMIName == "db-0" {
				first = m
			}
		}
		By("db-0's migration fails while its target pod still runs")
		target := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-launcher-db-0-target",
				Labels: map[string]string{kubevirtv1.MigrationJobLabel: string(first.UID)}},
			Spec: corev1.PodSpec{NodeName: nodeB, Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
		}
		Expect(env.Client.Create(ctx, target)).To(Succeed())
		target.Status.Phase = corev1.PodRunning
		Expect(env.Client.Status().Update(ctx, target)).To(Succeed())
		first.Status.Phase = kubevirtv1.MigrationFailed
		Expect(env.Client.Status().Update(ctx, &first)).To(Succeed())
		Eventually(func() string { return conditionMessage(ns, "link", v1alpha1.MovedTogetherCondition) }).Should(
			ContainSubstring("db-0 waiting for target pod virt-launcher-db-0-target of its failed migration to end"))
		Consistently(moveMigrations(ns)).Should(HaveLen(2), "no next attempt while the failed one's target pod runs")

		By("the target pod ends")
		target.Status.Phase = corev1.PodFailed
		Expect(env.Client.Status().Update(ctx, target)).To(Succeed())
		Eventually(moveMigrations(ns)).Should(HaveLen(3))
		Expect(moveMigrations(ns)()).To(ContainElement(And(HaveField("Spec.VMIName", "db-0"), HaveField("Name", HaveSuffix("-2")))))
	})

	It("moves no VM of vsock mode Sibling, which QEMU cannot migrate, and says what would let a drain finish", func() {
		ns := newNamespace()
		nodeA, nodeB := "move-a-"+ns, "move-b-"+ns
		createNode(nodeA)
		createNode(nodeB)
		for _, vm := range []string{"db-0", "db-1"} {
			createVM(ns, vm, minimalVM, map[string]string{"app": "db"})
		}
		newAttachment(ns, "sib", v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"), Network: network("10.250.0.0/24"),
			VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}},
		})
		Eventually(conditionOf(ns, "sib", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		for _, vm := range []string{"db-0", "db-1"} {
			createVMI(ns, vmi{name: vm, node: nodeA, wired: true, attachment: "sib"})
		}
		setVMIStatus(ns, "db-0", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = nodeA })
		Eventually(conditionOf(ns, "sib", v1alpha1.MovedTogetherCondition)).Should(Equal("False/" + v1alpha1.ReasonNotMigratable))
		Expect(conditionMessage(ns, "sib", v1alpha1.MovedTogetherCondition)).To(And(
			ContainSubstring("VMs db-0, db-1 must leave node "+nodeA), ContainSubstring("vhost-user-vsock"), ContainSubstring("virtctl restart")))
		Eventually(eventReasons(ns, "sib")).Should(ContainElement("Warning/" + v1alpha1.ReasonNotMigratable))
		Consistently(moveMigrations(ns)).Should(BeEmpty(), "a migration could only fail")
		Expect(getAttachment(ns, "sib").Status.Move).To(BeNil())

		By("the VM restarted elsewhere: nothing has to leave any more")
		setVMIStatus(ns, "db-0", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName, s.NodeName = "", nodeB })
		Eventually(conditionOf(ns, "sib", v1alpha1.MovedTogetherCondition)).Should(Equal("True/" + v1alpha1.ReasonIdle))
	})

	It("replaces a migration of one member that it did not start with a move of the group", func() {
		ns, _, nodeB := wiredPairOn(nil)
		// KubeVirt's finalizer keeps a deleted migration listed until
		// virt-controller lets go of it; its admission counts it in flight.
		const finalizer = "kubevirt.io/migrationJobFinalize"
		users := &kubevirtv1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users-migration", Finalizers: []string{finalizer}},
			Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "db-1"},
		}
		Expect(env.Client.Create(ctx, users)).To(Succeed())
		Eventually(func() *v1alpha1.MoveStatus { return getAttachment(ns, "link").Status.Move }).Should(And(
			Not(BeNil()), HaveField("To", nodeB), HaveField("VMs", ConsistOf("db-0", "db-1")), HaveField("Cause", v1alpha1.MoveCauseMigration)))
		Eventually(eventReasons(ns, "link")).Should(ContainElement("Normal/" + v1alpha1.ReasonMigrationReplaced))
		Eventually(moveMigrations(ns)).Should(ConsistOf(HaveField("Spec.VMIName", "db-0")))
		Consistently(moveMigrations(ns)).Should(HaveLen(1), "db-1 waits while the migration it replaces is still listed")
		Expect(conditionMessage(ns, "link", v1alpha1.MovedTogetherCondition)).To(ContainSubstring("db-1 waiting for the migration it replaced to end"))

		By("KubeVirt lets go of the deleted migration")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(users), users)).To(Succeed())
		Expect(users.DeletionTimestamp).NotTo(BeNil(), "the operator deleted it")
		users.Finalizers = nil
		Expect(env.Client.Update(ctx, users)).To(Succeed())
		Eventually(isGone(users)).Should(BeTrue())
		Eventually(moveMigrations(ns)).Should(HaveLen(2))
	})

	It("moves nothing when no node can take the whole group, says why, and moves once one can", func() {
		ns, nodeA, nodeB := wiredPairOn(func(_, _, nodeB string) { setUnschedulable(nodeB, true) })
		setVMIStatus(ns, "db-1", func(s *kubevirtv1.VirtualMachineInstanceStatus) { s.EvacuationNodeName = nodeA })
		Eventually(conditionOf(ns, "link", v1alpha1.MovedTogetherCondition)).Should(Equal("False/" + v1alpha1.ReasonNoTargetNode))
		Expect(conditionMessage(ns, "link", v1alpha1.MovedTogetherCondition)).To(And(
			ContainSubstring("must leave node "+nodeA), ContainSubstring(nodeB+": cordoned")))
		Eventually(eventReasons(ns, "link")).Should(ContainElement("Warning/" + v1alpha1.ReasonNoTargetNode))
		Consistently(moveMigrations(ns)).Should(BeEmpty())
		Expect(getAttachment(ns, "link").Status.Move).To(BeNil())
		Expect(templatePart(ns, "db-0", "spec", "affinity")).To(ContainSubstring("requiredDuringSchedulingIgnoredDuringExecution"), "nothing moves, nothing changes")

		By("the node is uncordoned")
		setUnschedulable(nodeB, false)
		Eventually(func() *v1alpha1.MoveStatus { return getAttachment(ns, "link").Status.Move }).Should(And(Not(BeNil()), HaveField("To", nodeB)))
		c := meta.FindStatusCondition(getAttachment(ns, "link").Status.Conditions, v1alpha1.MovedTogetherCondition)
		Expect(c.Reason).To(Equal(v1alpha1.ReasonMoving))
	})
})
