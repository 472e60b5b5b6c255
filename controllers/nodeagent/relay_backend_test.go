package nodeagent_test

import (
	"context"
	"io"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

var _ = Describe("vsock relay through the backend process (over the UNIX-socket EMULATION of vsock)", func() {
	// relayClient is what fastpath-agent --relay-backend-socket wires: a
	// client of the socket polled by its own goroutine, waking the agent.
	relayClient := func(socket, note string, node *string) (*backend.RelayClient, chan event.GenericEvent) {
		changes := make(chan event.GenericEvent, 1)
		c := backend.NewRelayClient(socket, note)
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

	It("names a backend that does not answer, serves the routes through it and keeps a relayed connection across an agent restart", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		socket := filepath.Join(dir, backend.ControlSocketName)
		node := ""
		const (
			clientCID, targetCID  = 3, 5
			relayPort, targetPort = 20001, 5432
		)
		a := startAgent("", func(r *agent.Reconciler) {
			node = r.NodeName
			c, changes := relayClient(socket, vsock.EmulationNote(r.RelayTransport), &node)
			r.Relay, r.SiblingChanges = c, changes
		})
		echo(a.vsockRoot, targetCID, targetPort)
		ns := newNamespace(ctx)
		att := createAttachment(ctx, ns, "db-link", nil, &fastpathv1alpha1.VSOCKSpec{
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: targetPort}},
		})
		att.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{
			{Name: "db", VM: "db-0", Port: targetPort, RelayPort: relayPort, Node: a.node, TargetCID: ptr.To[int64](targetCID), AllowedCIDs: []int64{clientCID}},
		}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())

		By("no backend yet: VSOCKRelayReady is False naming the socket, and no limits are claimed")
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonRelayFailed))
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition).Message).To(ContainSubstring("the vsock backend at " + socket + " is unreachable"))
			g.Expect(fpn.Status.RelayListeners).To(BeEmpty())
			g.Expect(fpn.Status.RelayLimits).To(BeNil())
		}).Should(Succeed())

		By("the backend starts: the agent's routes are served there, its listeners and limits reported")
		tr := vsock.NewUnixTransport(a.vsockRoot, vsock.HostCID)
		rl, err := relay.New(relay.Options{Transport: tr, Registerer: prometheus.NewRegistry(), MaxTotalConns: 99})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rl.Close)
		srv, err := backend.NewServer(nil, "")
		Expect(err).NotTo(HaveOccurred())
		srv.Relay, srv.RelayEmulation = rl, vsock.EmulationNote(tr)
		sctx, stopServer := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- srv.Serve(sctx, socket, 0o660) }()
		DeferCleanup(func() { stopServer(); <-served })
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.RelayListeners).To(Equal([]fastpathv1alpha1.RelayListenerStatus{{
				Port: relayPort, Attachment: ns + "/db-link", Service: "db", TargetCID: targetCID, TargetPort: targetPort, AllowedCIDs: []int64{clientCID},
			}}))
			g.Expect(fpn.Status.RelayLimits).NotTo(BeNil())
			g.Expect(fpn.Status.RelayLimits.MaxConns).To(BeEquivalentTo(99), "the backend's limits, not the agent's")
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady))
		}).Should(Succeed())

		By("an agent restart (a new agent, a new client) keeps an open relayed connection")
		conn, err := vsock.NewUnixTransport(a.vsockRoot, clientCID).Dial(ctx, vsock.HostCID, relayPort)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		Expect(conn.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		Expect(pingOn(conn)).To(Equal("ping"))
		a.stop()
		var c2 *backend.RelayClient
		a2 := startAgent(node, func(r *agent.Reconciler) {
			c, changes := relayClient(socket, vsock.EmulationNote(r.RelayTransport), &node)
			c2, r.Relay, r.SiblingChanges = c, c, changes
		})
		Eventually(func(g Gomega) {
			rep, err := c2.Report()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rep).NotTo(BeNil())
			g.Expect(rep.Listeners).To(ConsistOf(And(HaveField("Port", BeEquivalentTo(relayPort)), HaveField("ActiveConns", 1))))
			fpn := a2.fpn(g)
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady))
		}).Should(Succeed())
		Expect(pingOn(conn)).To(Equal("ping"), "the connection opened under the first agent still carries bytes")

		By("the backend stops: the relayed connection ends at once and the agent says the backend does not answer")
		stopServer()
		Expect(<-served).To(Succeed())
		served <- nil // for the cleanup
		Expect(conn.SetReadDeadline(time.Now().Add(2 * time.Second))).To(Succeed())
		_, err = io.Copy(io.Discard, conn)
		if err != nil { // nil: EOF
			Expect(err.Error()).NotTo(ContainSubstring("timeout"), "a reset or EOF, not a hang")
		}
		Eventually(func(g Gomega) {
			fpn := a2.fpn(g)
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonRelayFailed))
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition).Message).To(ContainSubstring("the vsock backend at " + socket + " is unreachable"))
			g.Expect(fpn.Status.RelayListeners).To(BeEmpty())
		}).Should(Succeed())
	})
})

// pingOn writes "ping" on c and reads it back.
func pingOn(c io.ReadWriter) (string, error) {
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}
