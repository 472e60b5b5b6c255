package nodeagent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

var _ = Describe("vsock mode Sibling on the node", func() {
	It("runs vhost-device-vsock for a Sibling attachment, reports it and restarts it when killed", func(ctx SpecContext) {
		bin := testutil.VhostDeviceVsock(GinkgoT())
		version, err := backend.Version(ctx, bin)
		Expect(err).NotTo(HaveOccurred())
		sockets := GinkgoT().TempDir()
		changes := make(chan event.GenericEvent, 1)
		var node string
		sup := &backend.Supervisor{Binary: bin, LogDir: sockets, OnChange: func() {
			select {
			case changes <- event.GenericEvent{Object: &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
			default:
			}
		}}
		DeferCleanup(sup.Stop)
		a := startAgent("", func(r *agent.Reconciler) {
			node = r.NodeName
			r.Siblings, r.SiblingVersion, r.SiblingSocketDir, r.SiblingChanges = sup, version, sockets, changes
			r.ResyncPeriod = time.Hour // only the supervisor's wake-ups and watches drive it
		})

		By("a node with the backend and no Sibling attachment")
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.Capabilities.VhostUserVSOCK).To(BeTrue())
			g.Expect(fpn.Status.Capabilities.VhostUserVSOCKVersion).To(Equal("0.3.0"))
			g.Expect(condition(fpn, fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonNoSiblingBackends))
		}).Should(Succeed())

		By("an attachment in mode Sibling whose VMs have group CIDs, one of them on this node")
		ns := newNamespace(ctx)
		att := createAttachment(ctx, ns, "sib", tenantNetwork(), &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling,
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}})
		att.Status.VMs = []fastpathv1alpha1.VMStatus{
			{Name: "db-0", Node: node, VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To[int64](3)}, // runs here: the group does
			{Name: "db-1", VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To[int64](4)},
		}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		var first int64
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.SiblingBackends).To(HaveLen(1))
			b := fpn.Status.SiblingBackends[0]
			g.Expect(b).To(And(HaveField("Attachment", ns+"/sib"), HaveField("Running", true),
				HaveField("VMs", Equal([]string{"db-0=3", "db-1=4"})), HaveField("Restarts", int32(0))))
			g.Expect(condition(fpn, fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonSiblingBackendsRunning))
			first = b.PID
		}).Should(Succeed())
		groups := agent.SiblingGroups([]fastpathv1alpha1.FastPathAttachment{*att}, sockets)
		Expect(groups).To(HaveLen(1))
		for _, vm := range groups[0].VMs {
			Expect(vm.Socket).To(BeAnExistingFile())
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.FormatInt(first, 10), "cmdline"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(cmdline)).NotTo(Or(ContainSubstring("--forward-cid"), ContainSubstring("--forward-listen")))

		By("killing the backend")
		Expect(syscall.Kill(int(first), syscall.SIGKILL)).To(Succeed())
		Eventually(func(g Gomega) {
			b := a.fpn(g).Status.SiblingBackends[0]
			g.Expect(b).To(And(HaveField("Running", true), HaveField("Restarts", int32(1)), HaveField("PID", Not(Equal(first)))))
		}).Should(Succeed())

		By("deleting the attachment stops it (no QEMU is connected)")
		Expect(env.Client.Delete(ctx, att)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(a.fpn(g).Status.SiblingBackends).To(BeEmpty())
		}).Should(Succeed())
		Expect(groups[0].VMs[0].Socket).NotTo(BeAnExistingFile())
	})
})

// noopSupervisor is a SiblingSupervisor that runs nothing: the node-label
// specs need an agent that has the backend, not a process.
type noopSupervisor struct{}

func (noopSupervisor) Sync([]backend.Group) error { return nil }
func (noopSupervisor) Status() []backend.Status   { return nil }

var _ = Describe("the Node label of vsock mode Sibling", func() {
	hasLabel := func(ctx SpecContext, name string) func() bool {
		return func() bool {
			n := &corev1.Node{}
			Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, n)).To(Succeed())
			_, ok := n.Labels[fastpathv1alpha1.VhostUserVSOCKNodeLabel]
			return ok
		}
	}
	newNode := func(ctx SpecContext, labels map[string]string) string {
		name := testutil.UniqueName("node-")
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		Expect(env.Client.Create(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Client.Delete(ctx, node)).To(Succeed()) })
		return name
	}

	It("is set while the agent runs with the backend, beside the Node's own labels", func(ctx SpecContext) {
		name := newNode(ctx, map[string]string{"zone": "a"})
		startAgent(name, func(r *agent.Reconciler) { r.Siblings, r.SiblingVersion = noopSupervisor{}, "0.3.0" })
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, n)).To(Succeed())
			g.Expect(n.Labels).To(Equal(map[string]string{"zone": "a", fastpathv1alpha1.VhostUserVSOCKNodeLabel: "true"}))
		}).Should(Succeed())
	})

	It("is removed when the agent runs without the backend, so no Sibling VM is scheduled there", func(ctx SpecContext) {
		name := newNode(ctx, map[string]string{"zone": "b", fastpathv1alpha1.VhostUserVSOCKNodeLabel: "true"})
		a := startAgent(name, nil)
		Eventually(func(g Gomega) { g.Expect(a.fpn(g).Status.Capabilities.VhostUserVSOCK).To(BeFalse()) }).Should(Succeed())
		Eventually(hasLabel(ctx, name)).Should(BeFalse())
		n := &corev1.Node{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, n)).To(Succeed())
		Expect(n.Labels).To(Equal(map[string]string{"zone": "b"}))
	})
})
