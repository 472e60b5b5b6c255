package nodeagent_test

import (
	"context"
	"fmt"
	"io"
	"slices"
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
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// newNamespace creates a namespace for one spec.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "agent")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// createAttachment creates an attachment and deletes it when the spec ends,
// so the next spec's agent (attachments are cluster-wide) does not see it.
func createAttachment(ctx context.Context, ns, name string, network *fastpathv1alpha1.NetworkSpec, vsockSpec *fastpathv1alpha1.VSOCKSpec) *fastpathv1alpha1.FastPathAttachment {
	GinkgoHelper()
	return createAttachmentOn(ctx, ns, name, "", network, vsockSpec)
}

// createAttachmentOn is createAttachment with spec.networkRef set to net.
func createAttachmentOn(ctx context.Context, ns, name, net string, network *fastpathv1alpha1.NetworkSpec, vsockSpec *fastpathv1alpha1.VSOCKSpec) *fastpathv1alpha1.FastPathAttachment {
	GinkgoHelper()
	a := &fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Network:    network,
			VSOCK:      vsockSpec,
		},
	}
	if net != "" {
		a.Spec.NetworkRef = &fastpathv1alpha1.NetworkReference{Name: net}
	}
	Expect(env.Client.Create(ctx, a)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, a))).To(Succeed())
	})
	return a
}

// createNetwork creates a FastPathNetwork for every namespace (maxMTU 0: the
// default) and deletes it when the spec ends; it returns the network.
func createNetwork(ctx context.Context, dp fastpathv1alpha1.Datapath, br string, maxMTU int32) *fastpathv1alpha1.FastPathNetwork {
	GinkgoHelper()
	n := &fastpathv1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("net-")},
		Spec:       fastpathv1alpha1.FastPathNetworkSpec{Datapath: dp, Bridge: br},
	}
	if maxMTU > 0 {
		n.Spec.MTU = &fastpathv1alpha1.MTURange{Max: ptr.To(maxMTU)}
	}
	Expect(env.Client.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, n))).To(Succeed())
	})
	return n
}

// tenantNetwork is an attachment's spec.network (the bridge comes from its network).
func tenantNetwork() *fastpathv1alpha1.NetworkSpec {
	return &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}
}

var _ = Describe("FastPathNode status", func() {
	It("is created for the node from the probe, owned by the Node, and written only when it changes", func(ctx SpecContext) {
		name := testutil.UniqueName("node-")
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		Expect(env.Client.Create(ctx, node)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Client.Delete(ctx, node)).To(Succeed()) })

		a := startAgent(name, func(r *agent.Reconciler) { r.RelayTransport = vsock.AFVSockTransport{} })
		a.probe.set(func(c *fastpathv1alpha1.NodeCapabilities) { c.VhostVSOCK = false })
		want := goodNode()
		want.VhostVSOCK = false

		var rv string
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.Capabilities).To(Equal(want))
			g.Expect(fpn.Status.AgentVersion).To(Equal("v0.0.0-envtest"))
			g.Expect(fpn.Status.RelayLimits).To(Equal(&fastpathv1alpha1.RelayLimits{
				MaxConns: relay.DefaultMaxTotalConns, MaxConnsPerCID: relay.DefaultMaxConnsPerCID, MaxConnsPerRoute: relay.DefaultMaxConns,
				MaxConnsPerNamespace: relay.DefaultMaxConnsPerNamespace, BufferBudgetBytes: relay.DefaultBufferBudget,
				IdleTimeout: metav1.Duration{Duration: relay.DefaultIdleTimeout}, HalfCloseTimeout: metav1.Duration{Duration: relay.DefaultHalfCloseTimeout}}))
			g.Expect(fpn.OwnerReferences).To(ConsistOf(metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: name, UID: node.UID}))
			g.Expect(condition(fpn, fastpathv1alpha1.ReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonReady))
			g.Expect(condition(fpn, fastpathv1alpha1.BridgesReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonNoBridgesWanted))
			relayCond := condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)
			g.Expect(relayCond).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes))
			g.Expect(relayCond.Message).To(ContainSubstring("vhost_vsock module not loaded: run modprobe vhost_vsock"))
			rv = fpn.ResourceVersion
		}).Should(Succeed())

		By("not writing while nothing changes (the agent resyncs every 200 ms)")
		Consistently(func(g Gomega) string { return a.fpn(g).ResourceVersion }, "1500ms", "100ms").Should(Equal(rv))

		By("following the probe: the admin loaded vhost_vsock")
		a.probe.set(func(c *fastpathv1alpha1.NodeCapabilities) { c.VhostVSOCK = true })
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.Capabilities.VhostVSOCK).To(BeTrue())
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition).Message).NotTo(ContainSubstring("vhost_vsock"))
		}).Should(Succeed())

		By("recreating a deleted FastPathNode")
		old := &fastpathv1alpha1.FastPathNode{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, old)).To(Succeed())
		Expect(env.Client.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.UID).NotTo(Equal(old.UID))
			g.Expect(fpn.Status.Capabilities.VhostVSOCK).To(BeTrue())
		}).Should(Succeed())
	})
})

var _ = Describe("Bridges", func() {
	It("shows one bridge per FastPathNetwork with its largest MTU, and keeps bridges no network names", func(ctx SpecContext) {
		a := startAgent("", nil)
		ns := newNamespace(ctx)
		brL, brO := testutil.UniqueName("fpa"), testutil.UniqueName("fpa")
		netL := createNetwork(ctx, fastpathv1alpha1.DatapathLinuxBridge, brL, 65000)
		netO := createNetwork(ctx, fastpathv1alpha1.DatapathOVS, brO, 0)
		createAttachmentOn(ctx, ns, "x", netL.Name, tenantNetwork(), nil)
		createAttachmentOn(ctx, ns, "y", netL.Name, tenantNetwork(), nil)
		createAttachmentOn(ctx, ns, "z", netO.Name, tenantNetwork(), nil)

		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(bridgeStatus(fpn, brL)).To(Equal(&fastpathv1alpha1.BridgeStatus{
				Name: brL, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 65000, Ready: true, Network: netL.Name, Attachments: []string{ns + "/x", ns + "/y"}}))
			g.Expect(bridgeStatus(fpn, brO)).To(Equal(&fastpathv1alpha1.BridgeStatus{
				Name: brO, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000, Ready: true, Network: netO.Name, Attachments: []string{ns + "/z"}}))
			c := condition(fpn, fastpathv1alpha1.BridgesReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonBridgesReady))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("%s (LinuxBridge, MTU 65000)", brL)))
		}).Should(Succeed())
		Expect(a.bridges.ensured(brL)).To(HaveEach(HaveField("Datapath", fastpathv1alpha1.DatapathLinuxBridge)))

		By("following the network's spec.mtu.max when an admin changes it")
		netL.Spec.MTU.Max = ptr.To[int32](9216)
		Expect(env.Client.Update(ctx, netL)).To(Succeed())
		Eventually(func(g Gomega) *fastpathv1alpha1.BridgeStatus { return bridgeStatus(a.fpn(g), brL) }).
			Should(HaveField("MTU", int32(9216)))

		By("leaving a bridge in place while a port uses it when its network is gone")
		a.bridges.setPorts(brL, "fp0123456789abc")
		Expect(env.Client.Delete(ctx, netL)).To(Succeed())
		Eventually(func(g Gomega) {
			b := bridgeStatus(a.fpn(g), brL)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Attachments).To(BeEmpty())
			g.Expect(b.Ready).To(BeTrue())
			g.Expect(b.Message).To(Equal("no FastPathNetwork names this bridge any more; left in place while 1 ports use it (fp0123456789abc), removed once none does"))
		}).Should(Succeed())

		By("removing it once no port uses it")
		a.bridges.setPorts(brL)
		Expect(env.Client.Delete(ctx, netO)).To(Succeed()) // an API event; the agent would also look again within 30 s
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(bridgeStatus(fpn, brL)).To(BeNil())
			g.Expect(bridgeStatus(fpn, brO)).To(BeNil())
		}).Should(Succeed())
	})

	It("reports one bridge named by two FastPathNetworks as a conflict and touches it for neither", func(ctx SpecContext) {
		a := startAgent("", nil)
		ns := newNamespace(ctx)
		br := testutil.UniqueName("fpa")
		netA := createNetwork(ctx, fastpathv1alpha1.DatapathLinuxBridge, br, 9000)
		netB := createNetwork(ctx, fastpathv1alpha1.DatapathOVS, br, 9000)
		createAttachmentOn(ctx, ns, "lb", netA.Name, tenantNetwork(), nil)
		createAttachmentOn(ctx, ns, "ovs", netB.Name, tenantNetwork(), nil)
		names := []string{netA.Name, netB.Name}
		slices.Sort(names)

		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			c := condition(fpn, fastpathv1alpha1.BridgesReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonBridgeConflict))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("bridge %s is named by FastPathNetworks %s, %s", br, names[0], names[1])))
			g.Expect(condition(fpn, fastpathv1alpha1.ReadyCondition)).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady))
			b := bridgeStatus(fpn, br)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Ready).To(BeFalse())
			g.Expect(b.Attachments).To(Equal([]string{ns + "/lb", ns + "/ovs"}))
		}).Should(Succeed())
		calls := len(a.bridges.ensured(br))
		Consistently(func() []bridge.Spec { return a.bridges.ensured(br) }, "1s", "100ms").Should(HaveLen(calls),
			"a conflicting bridge is neither created nor changed")

		By("resolving when one network moves to another bridge")
		other := testutil.UniqueName("fpa")
		netB.Spec.Bridge = other
		Expect(env.Client.Update(ctx, netB)).To(Succeed())
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(condition(fpn, fastpathv1alpha1.BridgesReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonBridgesReady))
			g.Expect(bridgeStatus(fpn, br)).To(HaveField("Datapath", fastpathv1alpha1.DatapathLinuxBridge))
			g.Expect(bridgeStatus(fpn, other)).To(HaveField("Datapath", fastpathv1alpha1.DatapathOVS))
		}).Should(Succeed())
	})

	It("says OVS is unreachable when an OVS bridge is wanted, and recovers", func(ctx SpecContext) {
		a := startAgent("", nil)
		const ovsDown = "OVSDB at unix:/nowhere does not answer: is Open vSwitch installed and running?"
		a.probe.set(func(c *fastpathv1alpha1.NodeCapabilities) {
			c.OVS = &fastpathv1alpha1.OVSInfo{Message: ovsDown}
		})
		br := testutil.UniqueName("fpa")
		a.bridges.setErr(br, fmt.Errorf("failed to ensure OVS bridge %s: %w", br, bridge.ErrOVSUnreachable))
		createAttachmentOn(ctx, newNamespace(ctx), "ovs", createNetwork(ctx, fastpathv1alpha1.DatapathOVS, br, 9000).Name, tenantNetwork(), nil)

		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			c := condition(fpn, fastpathv1alpha1.BridgesReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonOVSUnreachable))
			g.Expect(c.Message).To(HavePrefix(ovsDown))
			g.Expect(bridgeStatus(fpn, br)).To(HaveField("Ready", false))
		}).Should(Succeed())

		a.bridges.setErr(br, nil)
		a.probe.set(func(c *fastpathv1alpha1.NodeCapabilities) { *c = goodNode() })
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(condition(fpn, fastpathv1alpha1.BridgesReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonBridgesReady))
			g.Expect(bridgeStatus(fpn, br)).To(HaveField("Ready", true))
		}).Should(Succeed())
	})
})

// echo serves an emulated guest's vsock port: every connection gets back
// what it sends.
func echo(root string, cid, port uint32) {
	GinkgoHelper()
	ln, err := vsock.NewUnixTransport(root, cid).Listen(port)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ln.Close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// roundTrip dials the relay port on the host from guest cid and returns what
// comes back for "ping", or the error.
func roundTrip(root string, cid, port uint32) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := vsock.NewUnixTransport(root, cid).Dial(ctx, vsock.HostCID, port)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

var _ = Describe("vsock relay (over the UNIX-socket EMULATION of vsock)", func() {
	It("serves this node's routes from the attachments' status and lists them", func(ctx SpecContext) {
		a := startAgent("", nil)
		ns := newNamespace(ctx)
		const (
			clientCID, strangerCID, targetCID = 3, 9, 5
			relayPort, targetPort             = 20001, 5432
		)
		echo(a.vsockRoot, targetCID, targetPort)
		att := createAttachment(ctx, ns, "db-link", nil, &fastpathv1alpha1.VSOCKSpec{
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: targetPort}, {Name: "far", VM: "db-1", Port: targetPort}},
		})
		att.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{
			{Name: "db", VM: "db-0", Port: targetPort, RelayPort: relayPort, Node: a.node, TargetCID: ptr.To[int64](targetCID), AllowedCIDs: []int64{clientCID}},
			{Name: "far", VM: "db-1", Port: targetPort, RelayPort: relayPort + 1, Node: "another-node", TargetCID: ptr.To[int64](6), AllowedCIDs: []int64{clientCID}},
		}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())

		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.RelayListeners).To(Equal([]fastpathv1alpha1.RelayListenerStatus{{
				Port: relayPort, Attachment: ns + "/db-link", Service: "db", TargetCID: targetCID, TargetPort: targetPort, AllowedCIDs: []int64{clientCID},
			}}))
			c := condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonRelayReady))
			g.Expect(c.Message).To(Equal("relay serves 1 routes on ports 20001 (" + agent.EmulatedTransportLabel + ": vsock emulated over UNIX sockets under " + a.vsockRoot + " (this end is CID 2))"))
		}).Should(Succeed())

		By("relaying an allowed guest and refusing another")
		Expect(roundTrip(a.vsockRoot, clientCID, relayPort)).To(Equal("ping"))
		_, err := roundTrip(a.vsockRoot, strangerCID, relayPort)
		Expect(err).To(HaveOccurred())

		By("taking an allow-list update live")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(att), att)).To(Succeed())
		att.Status.VSOCKServices[0].AllowedCIDs = []int64{clientCID, strangerCID}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		Eventually(func() (string, error) { return roundTrip(a.vsockRoot, strangerCID, relayPort) }).Should(Equal("ping"))

		By("reporting a relay port used twice")
		dup := createAttachment(ctx, ns, "dup", nil, &fastpathv1alpha1.VSOCKSpec{
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-9", Port: targetPort}},
		})
		dup.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{
			{Name: "db", VM: "db-9", Port: targetPort, RelayPort: relayPort, Node: a.node, TargetCID: ptr.To[int64](7), AllowedCIDs: []int64{clientCID}},
		}
		Expect(env.Client.Status().Update(ctx, dup)).To(Succeed())
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			c := condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonRelayFailed))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("listen port %d is already used", relayPort)))
			g.Expect(fpn.Status.RelayListeners).To(HaveLen(1))
		}).Should(Succeed())
		Expect(env.Client.Delete(ctx, dup)).To(Succeed())

		By("closing the listener when the route goes away")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(att), att)).To(Succeed())
		att.Status.VSOCKServices = att.Status.VSOCKServices[1:]
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			g.Expect(fpn.Status.RelayListeners).To(BeEmpty())
			g.Expect(condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)).To(haveCondition(fpn, metav1.ConditionTrue, fastpathv1alpha1.ReasonNoRoutes))
		}).Should(Succeed())
		_, err = roundTrip(a.vsockRoot, clientCID, relayPort)
		Expect(err).To(HaveOccurred())
	})

	It("needs /dev/vhost-vsock for routes on the real transport", func(ctx SpecContext) {
		a := startAgent("", func(r *agent.Reconciler) { r.RelayTransport = vsock.AFVSockTransport{} })
		a.probe.set(func(c *fastpathv1alpha1.NodeCapabilities) { c.VhostVSOCK = false })
		att := createAttachment(ctx, newNamespace(ctx), "db-link", nil, &fastpathv1alpha1.VSOCKSpec{
			Services: []fastpathv1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}},
		})
		att.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{
			{Name: "db", VM: "db-0", Port: 5432, RelayPort: 20005, Node: a.node, TargetCID: ptr.To[int64](5), AllowedCIDs: []int64{3}},
		}
		Expect(env.Client.Status().Update(ctx, att)).To(Succeed())
		Eventually(func(g Gomega) {
			fpn := a.fpn(g)
			c := condition(fpn, fastpathv1alpha1.VSOCKRelayReadyCondition)
			g.Expect(c).To(haveCondition(fpn, metav1.ConditionFalse, fastpathv1alpha1.ReasonVhostVSOCKMissing))
			g.Expect(c.Message).To(ContainSubstring(probe.MsgVhostVSOCKMissing))
			g.Expect(condition(fpn, fastpathv1alpha1.ReadyCondition).Message).To(ContainSubstring("vhost_vsock module not loaded"))
			g.Expect(fpn.Status.RelayListeners).To(BeEmpty(), "no kernel-vsock listener without /dev/vhost-vsock")
		}).Should(Succeed())
		_, err := roundTrip(a.vsockRoot, 3, 20005)
		Expect(err).To(HaveOccurred(), "the relay must not listen on port 20005")
	})
})

// MatchFields matches a condition's status and reason, and that it describes
// fpn's current generation.
func haveCondition(fpn *fastpathv1alpha1.FastPathNode, status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(HaveField("Status", status), HaveField("Reason", reason), HaveField("ObservedGeneration", fpn.Generation))
}
