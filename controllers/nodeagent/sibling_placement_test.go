package nodeagent_test

import (
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// recordingSupervisor is a SiblingSupervisor that runs nothing and
// remembers the groups of the last Sync; every group it serves "runs".
type recordingSupervisor struct {
	mu     sync.Mutex
	groups []backend.Group
}

func (s *recordingSupervisor) Sync(groups []backend.Group) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append([]backend.Group(nil), groups...)
	return nil
}

func (s *recordingSupervisor) Status() []backend.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []backend.Status
	for _, g := range s.groups {
		out = append(out, backend.Status{Key: g.Key, Running: true, PID: 1, Serving: g.VMs})
	}
	return out
}

// keys are the groups of the last Sync, each with its --vm arguments
// (which must all carry an explicit groups=).
func (s *recordingSupervisor) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, g := range s.groups {
		out = append(out, g.Key)
	}
	return out
}

func (s *recordingSupervisor) args(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		if g.Key == key {
			return backend.Args(g)
		}
	}
	return nil
}

// siblingAttachment creates an attachment in vsock mode Sibling whose VMs
// (name → node, "" while stopped) have group CIDs 3, 4, ...
func siblingAttachment(ctx SpecContext, ns, name string, vms ...[2]string) *fastpathv1alpha1.FastPathAttachment {
	GinkgoHelper()
	att := createAttachment(ctx, ns, name, tenantNetwork(), &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling,
		Services: []fastpathv1alpha1.VSOCKService{{Name: "svc", VM: vms[0][0], Port: 5432}}})
	for i, vm := range vms {
		att.Status.VMs = append(att.Status.VMs, fastpathv1alpha1.VMStatus{Name: vm[0], Node: vm[1],
			VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To(int64(3 + i))})
	}
	Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
	return att
}

// launcherPod creates VM vm's virt-launcher pod bound to node, controlled by
// a VirtualMachineInstance named after the VM (as KubeVirt does), and
// returns a func deleting it at once.
func launcherPod(ctx SpecContext, ns, vm, node string) func() {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-launcher-" + vm + "-" + testutil.UniqueName(""),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vm,
				UID: types.UID(testutil.UniqueName("uid-")), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
	}
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
	})
	return func() { Expect(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed()) }
}

var _ = Describe("vsock mode Sibling groups that fit the node", func() {
	withSupervisor := func(sup agent.SiblingSupervisor, customise func(*agent.Reconciler)) func(*agent.Reconciler) {
		return func(r *agent.Reconciler) {
			r.Siblings, r.SiblingVersion = sup, "0.3.0"
			if customise != nil {
				customise(r)
			}
		}
	}

	It("runs a group's backend only on a node where a member VM runs or its launcher is bound", func(ctx SpecContext) {
		supA, supB := &recordingSupervisor{}, &recordingSupervisor{}
		a := startAgent("", withSupervisor(supA, nil))
		b := startAgent("", withSupervisor(supB, nil))
		ns := newNamespace(ctx)
		key := ns + "/sib"

		for _, x := range []*agentUnderTest{a, b} {
			Eventually(func(g Gomega) {
				g.Expect(condition(x.fpn(g), fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonNoSiblingBackends))
			}).Should(Succeed())
		}

		By("no member VM runs: neither node runs the group")
		siblingAttachment(ctx, ns, "sib", [2]string{"db-0", ""}, [2]string{"db-1", ""})
		Consistently(func(g Gomega) {
			g.Expect(supA.keys()).To(BeEmpty())
			g.Expect(supB.keys()).To(BeEmpty())
			g.Expect(condition(a.fpn(g), fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonNoSiblingBackends))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

		By("db-0's virt-launcher pod is bound to node A (before its VMI reports a node)")
		deleteLauncher := launcherPod(ctx, ns, "db-0", a.node)
		Eventually(func(g Gomega) {
			g.Expect(supA.keys()).To(Equal([]string{key}))
			fpn := a.fpn(g)
			g.Expect(fpn.Status.SiblingBackends).To(ConsistOf(HaveField("Attachment", key)))
			g.Expect(condition(fpn, fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonSiblingBackendsRunning))
		}).Should(Succeed())
		By("every slot, also db-1's (stopped), with an explicit groups=")
		args := supA.args(key)
		Expect(args).To(HaveLen(4))
		for i := 1; i < len(args); i += 2 {
			Expect(args[i]).To(HaveSuffix(",groups=" + ns + ".sib"))
		}
		Expect(strings.Join(args, " ")).NotTo(Or(ContainSubstring("--forward-cid"), ContainSubstring("--forward-listen"), ContainSubstring("groups=default")))
		Consistently(supB.keys, time.Second, 200*time.Millisecond).Should(BeEmpty())

		By("db-1's VMI reports node B: B runs the group too")
		att := &fastpathv1alpha1.FastPathAttachment{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "sib"}, att)).To(Succeed())
		att.Status.VMs[1].Node = b.node
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		Eventually(supB.keys).Should(Equal([]string{key}))

		By("the launcher on A goes away: A stops the group")
		deleteLauncher()
		Eventually(supA.keys).Should(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(a.fpn(g).Status.SiblingBackends).To(BeEmpty())
		}).Should(Succeed())
		Expect(supB.keys()).To(Equal([]string{key}))
	})

	It("caps the groups per node and per namespace and names the attachments left out", func(ctx SpecContext) {
		sup := &recordingSupervisor{}
		a := startAgent("", withSupervisor(sup, func(r *agent.Reconciler) {
			r.SiblingMaxGroups, r.SiblingMaxGroupsPerNamespace = 2, 1
		}))
		Eventually(func(g Gomega) { a.fpn(g) }).Should(Succeed())
		ns1, ns2, ns3 := newNamespace(ctx), newNamespace(ctx), newNamespace(ctx)
		overCap := func(g Gomega) metav1.Condition {
			c := condition(a.fpn(g), fastpathv1alpha1.SiblingBackendsReadyCondition)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fastpathv1alpha1.ReasonSiblingGroupsOverCap))
			return c
		}

		By("two groups of one namespace with a member here: the namespace cap (1) leaves the second out")
		siblingAttachment(ctx, ns1, "a1", [2]string{"vm-a1", a.node})
		siblingAttachment(ctx, ns1, "a2", [2]string{"vm-a2", a.node})
		Eventually(func(g Gomega) {
			g.Expect(sup.keys()).To(Equal([]string{ns1 + "/a1"}))
			c := overCap(g)
			g.Expect(c.Message).To(ContainSubstring(ns1 + "/a2: not started"))
			g.Expect(c.Message).To(ContainSubstring("namespace " + ns1))
			g.Expect(c.Message).To(ContainSubstring("--sibling-max-groups-per-namespace"))
			g.Expect(a.fpn(g).Status.SiblingBackends).To(ContainElement(And(
				HaveField("Attachment", ns1+"/a2"), HaveField("Running", false), HaveField("Message", ContainSubstring("not started")))))
		}).Should(Succeed())

		By("a group of another namespace fits the node cap (2); a third namespace's does not")
		siblingAttachment(ctx, ns2, "b1", [2]string{"vm-b1", a.node})
		Eventually(func(g Gomega) {
			g.Expect(sup.keys()).To(ConsistOf(ns1+"/a1", ns2+"/b1"))
		}).Should(Succeed())
		siblingAttachment(ctx, ns3, "c1", [2]string{"vm-c1", a.node})
		Eventually(func(g Gomega) {
			c := overCap(g)
			g.Expect(c.Message).To(ContainSubstring(ns3 + "/c1: not started"))
			g.Expect(c.Message).To(ContainSubstring("--sibling-max-groups)"))
		}).Should(Succeed())
		Consistently(sup.keys, time.Second, 200*time.Millisecond).Should(ConsistOf(ns1+"/a1", ns2+"/b1"))

		By("a group whose VMs are elsewhere does not count against the caps")
		siblingAttachment(ctx, ns2, "elsewhere", [2]string{"vm-x", "some-other-node"})
		Consistently(func(g Gomega) {
			g.Expect(overCap(g).Message).NotTo(ContainSubstring("elsewhere"))
		}, time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
