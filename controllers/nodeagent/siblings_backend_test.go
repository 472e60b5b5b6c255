package nodeagent_test

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

var _ = Describe("vsock mode Sibling through the backend pod", func() {
	// backendClient is what fastpath-agent --sibling-backend-socket wires:
	// a client of the socket polled by its own goroutine, waking the agent.
	backendClient := func(socket string, node *string) (*backend.Client, chan event.GenericEvent) {
		changes := make(chan event.GenericEvent, 1)
		c := backend.NewClient(socket)
		c.PollInterval = 50 * time.Millisecond
		c.OnChange = func() {
			select {
			case changes <- event.GenericEvent{Object: &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: *node}}}:
			default:
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		DeferCleanup(func() { cancel(); <-done })
		return c, changes
	}

	It("says which socket does not answer, then runs the groups it is given and keeps them across an agent restart", func(ctx SpecContext) {
		bin := testutil.VhostDeviceVsock(GinkgoT())
		dir := GinkgoT().TempDir()
		socket := filepath.Join(dir, backend.ControlSocketName)
		node := ""
		c, changes := backendClient(socket, &node)
		a := startAgent("", func(r *agent.Reconciler) {
			node = r.NodeName
			r.Siblings, r.SiblingSocketDir, r.SiblingChanges = c, dir, changes
			r.ResyncPeriod = time.Hour
		})

		By("no backend pod yet: no capability, and the condition names the socket")
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.Capabilities.VhostUserVSOCK).To(BeFalse())
			cond := condition(fpn, fastpathv1alpha1.SiblingBackendsReadyCondition)
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Message).To(ContainSubstring("the vsock backend at " + socket + " is unreachable"))
		}).Should(Succeed())

		By("the backend pod starts: the agent learns its version from it")
		sup := &backend.Supervisor{Binary: bin}
		DeferCleanup(sup.Stop)
		version, err := backend.Version(ctx, bin)
		Expect(err).NotTo(HaveOccurred())
		srv, err := backend.NewServer(sup, version)
		Expect(err).NotTo(HaveOccurred())
		srv.SocketDir = dir
		sctx, stopServer := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- srv.Serve(sctx, socket, 0o660) }()
		DeferCleanup(func() { stopServer(); <-served })
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.Capabilities.VhostUserVSOCK).To(BeTrue())
			g.Expect(fpn.Status.Capabilities.VhostUserVSOCKVersion).To(Equal(version))
			g.Expect(condition(fpn, fastpathv1alpha1.SiblingBackendsReadyCondition).Reason).To(Equal(fastpathv1alpha1.ReasonNoSiblingBackends))
		}).Should(Succeed())

		By("a Sibling attachment with a VM here runs in the backend")
		ns := newNamespace(ctx)
		att := createAttachment(ctx, ns, "sib", tenantNetwork(), &fastpathv1alpha1.VSOCKSpec{Mode: fastpathv1alpha1.VSOCKModeSibling,
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}})
		att.Status.VMs = []fastpathv1alpha1.VMStatus{
			{Name: "db-0", Node: node, VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To[int64](3)},
			{Name: "db-1", VSOCKMode: fastpathv1alpha1.VSOCKModeSibling, CID: ptr.To[int64](4)},
		}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		var pid int64
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.SiblingBackends).To(ConsistOf(And(HaveField("Attachment", ns+"/sib"), HaveField("Running", true))))
			pid = fpn.Status.SiblingBackends[0].PID
		}).Should(Succeed())
		groups := agent.SiblingGroups([]fastpathv1alpha1.FastPathAttachment{*att}, dir)
		Expect(groups[0].VMs[0].Socket).To(BeAnExistingFile())

		By("an agent restart (a new agent, a new client) keeps the process")
		a.stop()
		c2, changes2 := backendClient(socket, &node)
		a2 := startAgent(node, func(r *agent.Reconciler) {
			r.Siblings, r.SiblingSocketDir, r.SiblingChanges = c2, dir, changes2
			r.ResyncPeriod = time.Hour
		})
		Eventually(func(g Gomega) {
			rep, err := c2.Report()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep).NotTo(BeNil())
			g.Expect(rep.Groups).To(ConsistOf(And(HaveField("Key", ns+"/sib"), HaveField("Running", true), HaveField("PID", int(pid)))))
			fpn := a2.fpn(g)
			g.Expect(fpn.Status.SiblingBackends).To(ConsistOf(And(HaveField("Running", true), HaveField("PID", pid))))
		}).Should(Succeed())
		Consistently(func() []backend.Status { return sup.Status() }, time.Second, 100*time.Millisecond).Should(
			ConsistOf(And(HaveField("PID", int(pid)), HaveField("Running", true))))
	})
})
