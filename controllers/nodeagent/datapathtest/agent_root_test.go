package datapathtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// Names made here start with "fpag" (fast-path agent).

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// node is one agent instance's dependencies for one node; newInstance builds
// a fresh set, as a restarted agent process would.
type node struct {
	t      *testing.T
	name   string
	socket string // OVSDB endpoint
	marker string // bridge marker of this test
	// vsockRoot is the node's emulated vsock directory: every agent
	// instance of the node relays under it, as a restarted agent keeps its
	// --vsock-transport.
	vsockRoot string
}

func newNode(t *testing.T) *node {
	testutil.RequireRoot(t)
	return &node{t: t, name: testutil.UniqueName("node-"), socket: testutil.StartOVS(t), marker: testutil.UniqueName("test-"), vsockRoot: t.TempDir()}
}

// newInstance returns a reconciler with its own OVSDB connection, bridge
// manager and relay: a new agent process for the same node.
func (n *node) newInstance() *agent.Reconciler {
	t := n.t
	conn := ovsdb.NewConn(n.socket, testr.New(t))
	t.Cleanup(conn.Close)
	transport := vsock.NewUnixTransport(n.vsockRoot, vsock.HostCID)
	rl, err := relay.New(relay.Options{Transport: transport, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Close() })
	return &agent.Reconciler{
		Client:         env.Client,
		APIReader:      env.Client,
		NodeName:       n.name,
		Prober:         &probe.Host{OVS: conn},
		Bridges:        &bridge.Manager{OVS: conn, OVSDatapathType: ovsdb.DatapathNetdev, Marker: n.marker, Log: testr.New(t)},
		Relay:          rl,
		RelayTransport: transport,
		AgentVersion:   "v0.0.0-root-test",
	}
}

func reconcile(t *testing.T, r *agent.Reconciler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctrl.LoggerInto(context.Background(), testr.New(t)), time.Minute)
	defer cancel()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}}); err != nil {
		t.Fatalf("reconcile failed: %v", err)
	}
}

func (n *node) fpn() *fastpathv1alpha1.FastPathNode {
	n.t.Helper()
	fpn := &fastpathv1alpha1.FastPathNode{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: n.name}, fpn); err != nil {
		n.t.Fatalf("failed to get FastPathNode %s: %v", n.name, err)
	}
	return fpn
}

func namespace(t *testing.T) string {
	ns, err := env.NewNamespace(context.Background(), "agent-root")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// network creates a FastPathNetwork for every namespace with bridge br and
// spec.mtu.max maxMTU, deleted at cleanup (networks are cluster-wide).
func network(t *testing.T, dp fastpathv1alpha1.Datapath, br string, maxMTU int32) *fastpathv1alpha1.FastPathNetwork {
	n := &fastpathv1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("net-")},
		Spec:       fastpathv1alpha1.FastPathNetworkSpec{Datapath: dp, Bridge: br, MTU: &fastpathv1alpha1.MTURange{Max: ptr.To(maxMTU)}},
	}
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(context.Background(), n)) })
	return n
}

// attach creates an attachment on FastPathNetwork net and deletes it at
// cleanup (attachments are cluster-wide: the next test's agent must not see it).
func attach(t *testing.T, ns, name, net string) *fastpathv1alpha1.FastPathAttachment {
	a := &fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			NetworkRef: &fastpathv1alpha1.NetworkReference{Name: net},
			Network:    &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
		},
	}
	if err := env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(context.Background(), a)) })
	return a
}

func deleteLinuxBridgeAtCleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("failed to delete bridge %s: %v", name, err)
			}
		}
	})
}

func deleteOVSBridgeAtCleanup(t *testing.T, socket, name string) {
	t.Cleanup(func() {
		if out, err := exec.Command("ovs-vsctl", "--db="+socket, "--timeout=30", "--if-exists", "del-br", name).CombinedOutput(); err != nil {
			t.Errorf("failed to delete OVS bridge %s: %v: %s", name, err, out)
		}
	})
}

func vsctl(t *testing.T, socket string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovs-vsctl", append([]string{"--db=" + socket, "--timeout=30"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-vsctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// link returns the kernel's view of name: type, MTU, ifindex, up.
func link(t *testing.T, name string) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("failed to find link %s: %v", name, err)
	}
	return l
}

func condition(fpn *fastpathv1alpha1.FastPathNode, typ string) metav1.Condition {
	for _, c := range fpn.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func bridgeStatus(fpn *fastpathv1alpha1.FastPathNode, name string) fastpathv1alpha1.BridgeStatus {
	for _, b := range fpn.Status.Bridges {
		if b.Name == name {
			return b
		}
	}
	return fastpathv1alpha1.BridgeStatus{}
}

func TestBridgesCreatedRaisedAndConvergedAfterRestart(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	brL, brO := testutil.UniqueName("fpag"), testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, brL)
	deleteOVSBridgeAtCleanup(t, n.socket, brO)
	netL := network(t, fastpathv1alpha1.DatapathLinuxBridge, brL, 9000)
	netO := network(t, fastpathv1alpha1.DatapathOVS, brO, 9000)
	attach(t, ns, "lb", netL.Name)
	attach(t, ns, "ovs", netO.Name)

	r := n.newInstance()
	reconcile(t, r)

	l := link(t, brL)
	g.Expect(l.Type()).To(Equal("bridge"))
	g.Expect(l.Attrs().MTU).To(Equal(9000))
	g.Expect(l.Attrs().Flags & net.FlagUp).NotTo(BeZero())
	g.Expect(vsctl(t, n.socket, "get", "Bridge", brO, "datapath_type")).To(Equal("netdev"))
	g.Expect(vsctl(t, n.socket, "get", "Interface", brO, "mtu")).To(Equal("9000"))
	g.Expect(link(t, brO).Attrs().MTU).To(Equal(9000))

	fpn := n.fpn()
	g.Expect(bridgeStatus(fpn, brL)).To(Equal(fastpathv1alpha1.BridgeStatus{Name: brL, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000, Ready: true, Network: netL.Name, Attachments: []string{ns + "/lb"}}))
	g.Expect(bridgeStatus(fpn, brO)).To(Equal(fastpathv1alpha1.BridgeStatus{Name: brO, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000, Ready: true, Network: netO.Name, Attachments: []string{ns + "/ovs"}}))
	g.Expect(condition(fpn, fastpathv1alpha1.BridgesReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(fpn.Status.Capabilities.OVS).NotTo(BeNil())
	g.Expect(fpn.Status.Capabilities.OVS.Reachable).To(BeTrue())
	g.Expect(fpn.Status.Capabilities.OVS.DatapathTypes).To(ContainElement("netdev"))

	t.Log("The admin allows more: the MTU is raised")
	netL.Spec.MTU.Max = ptr.To[int32](65000)
	g.Expect(env.Client.Update(context.Background(), netL)).To(Succeed())
	netO.Spec.MTU.Max = ptr.To[int32](9216)
	g.Expect(env.Client.Update(context.Background(), netO)).To(Succeed())
	reconcile(t, r)
	g.Expect(link(t, brL).Attrs().MTU).To(Equal(65000))
	g.Expect(vsctl(t, n.socket, "get", "Interface", brO, "mtu")).To(Equal("9216"))
	fpn = n.fpn()
	g.Expect(bridgeStatus(fpn, brL).MTU).To(Equal(int32(65000)))
	g.Expect(bridgeStatus(fpn, brO).MTU).To(Equal(int32(9216)))

	t.Log("A new agent instance converges to the same bridges and writes nothing")
	indexL, indexO, rv := link(t, brL).Attrs().Index, link(t, brO).Attrs().Index, fpn.ResourceVersion
	r2 := n.newInstance()
	reconcile(t, r2)
	reconcile(t, r2)
	g.Expect(link(t, brL).Attrs().Index).To(Equal(indexL))
	g.Expect(link(t, brO).Attrs().Index).To(Equal(indexO))
	g.Expect(strings.Count("\n"+vsctl(t, n.socket, "list-br")+"\n", "\n"+brO+"\n")).To(Equal(1))
	g.Expect(vsctl(t, n.socket, "list-ports", brO)).To(BeEmpty(), "no port was added to the bridge")
	var fpns fastpathv1alpha1.FastPathNodeList
	g.Expect(env.Client.List(context.Background(), &fpns)).To(Succeed())
	count := 0
	for _, f := range fpns.Items {
		if f.Name == n.name {
			count++
		}
	}
	g.Expect(count).To(Equal(1))
	g.Expect(n.fpn().ResourceVersion).To(Equal(rv), "an unchanged status is not written again")
}

func TestConflictIsReportedAndTheBridgeLeftAlone(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	br := testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, br)
	deleteOVSBridgeAtCleanup(t, n.socket, br)
	first := network(t, fastpathv1alpha1.DatapathLinuxBridge, br, 9000)
	attach(t, ns, "first", first.Name)
	r := n.newInstance()
	reconcile(t, r)
	before := link(t, br)
	g.Expect(before.Type()).To(Equal("bridge"))

	second := network(t, fastpathv1alpha1.DatapathOVS, br, 65000)
	attach(t, ns, "second", second.Name)
	reconcile(t, r)
	names := []string{first.Name, second.Name}
	slices.Sort(names)

	c := condition(n.fpn(), fastpathv1alpha1.BridgesReadyCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(fastpathv1alpha1.ReasonBridgeConflict))
	g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("bridge %s is named by FastPathNetworks %s, %s", br, names[0], names[1])))
	g.Expect(condition(n.fpn(), fastpathv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
	after := link(t, br)
	g.Expect(after.Type()).To(Equal("bridge"))
	g.Expect(after.Attrs().Index).To(Equal(before.Attrs().Index))
	g.Expect(after.Attrs().MTU).To(Equal(9000), "neither datapath's wish is applied")
	g.Expect(vsctl(t, n.socket, "list-br")).NotTo(ContainSubstring(br))
}

func TestConvergesFromWhereAKilledAgentStopped(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	br := testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, br)
	attach(t, ns, "a", network(t, fastpathv1alpha1.DatapathLinuxBridge, br, 9000).Name)

	// Killed after creating the bridge (marked, renamed, MTU 1500, down) and
	// after creating the FastPathNode (status not yet written).
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br}})).To(Succeed())
	g.Expect(netlink.LinkSetAlias(link(t, br), wellknown.MarkerKey+"="+n.marker)).To(Succeed())
	index := link(t, br).Attrs().Index
	g.Expect(env.Client.Create(context.Background(), &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: n.name}})).To(Succeed())

	reconcile(t, n.newInstance())
	l := link(t, br)
	g.Expect(l.Attrs().Index).To(Equal(index))
	g.Expect(l.Attrs().MTU).To(Equal(9000))
	g.Expect(l.Attrs().Alias).To(Equal(wellknown.MarkerKey + "=" + n.marker))
	fpn := n.fpn()
	g.Expect(bridgeStatus(fpn, br)).To(HaveField("Ready", true))
	g.Expect(condition(fpn, fastpathv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue), condition(fpn, fastpathv1alpha1.ReadyCondition).Message)
}

func TestABridgeTheAgentDidNotMakeIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	br := testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, br)
	// The node's own bridge (think cni0), with a port, MTU 1500, up.
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br, MTU: 1500}})).To(Succeed())
	g.Expect(netlink.LinkSetUp(link(t, br))).To(Succeed())
	before := link(t, br)
	attach(t, ns, "a", network(t, fastpathv1alpha1.DatapathLinuxBridge, br, 9000).Name)

	reconcile(t, n.newInstance())
	after := link(t, br)
	g.Expect(after.Attrs().Index).To(Equal(before.Attrs().Index))
	g.Expect(after.Attrs().MTU).To(Equal(1500), "MTU unchanged")
	g.Expect(after.Attrs().Alias).To(BeEmpty(), "not marked")
	fpn := n.fpn()
	b := bridgeStatus(fpn, br)
	g.Expect(b.Ready).To(BeFalse())
	g.Expect(b.Message).To(ContainSubstring("Linux bridge " + br + " exists without the alias " + wellknown.MarkerKey))
	c := condition(fpn, fastpathv1alpha1.BridgesReadyCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Message).To(ContainSubstring(br))
}

// TestABridgeNoNetworkNamesIsRemovedOnceNoPortUsesIt: when its network is
// deleted, a Linux and an OVS bridge the agent made stay while a port uses
// them and are deleted once none does; an unmarked bridge no network names
// is never touched (issue 39, item 6).
func TestABridgeNoNetworkNamesIsRemovedOnceNoPortUsesIt(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	brL, brO, foreign := testutil.UniqueName("fpag"), testutil.UniqueName("fpag"), testutil.UniqueName("fpag")
	portL, peerL, portO := testutil.UniqueName("fpag"), testutil.UniqueName("fpag"), testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, brL)
	deleteLinuxBridgeAtCleanup(t, foreign)
	deleteLinuxBridgeAtCleanup(t, portL) // the veth pair
	deleteOVSBridgeAtCleanup(t, n.socket, brO)
	netL := network(t, fastpathv1alpha1.DatapathLinuxBridge, brL, 9000)
	netO := network(t, fastpathv1alpha1.DatapathOVS, brO, 9000)
	attach(t, ns, "lb", netL.Name)
	attach(t, ns, "ovs", netO.Name)
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: foreign}})).To(Succeed())
	r := n.newInstance()
	reconcile(t, r)

	t.Log("A port on each bridge, as a running VM's")
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: portL, MasterIndex: link(t, brL).Attrs().Index}, PeerName: peerL})).To(Succeed())
	vsctl(t, n.socket, "add-port", brO, portO, "--", "set", "Interface", portO, "type=internal")

	t.Log("The admin deletes both networks: the bridges stay while their ports do")
	g.Expect(env.Client.Delete(context.Background(), netL)).To(Succeed())
	g.Expect(env.Client.Delete(context.Background(), netO)).To(Succeed())
	reconcile(t, r)
	g.Expect(link(t, brL).Type()).To(Equal("bridge"))
	g.Expect(vsctl(t, n.socket, "list-br")).To(ContainSubstring(brO))
	fpn := n.fpn()
	g.Expect(bridgeStatus(fpn, brL).Message).To(Equal(fmt.Sprintf("no FastPathNetwork names this bridge any more; left in place while 1 ports use it (%s), removed once none does", portL)))
	g.Expect(bridgeStatus(fpn, brO).Message).To(Equal(fmt.Sprintf("no FastPathNetwork names this bridge any more; left in place while 1 ports use it (%s), removed once none does", portO)))

	t.Log("The ports go (the VMs restarted): the bridges go too")
	g.Expect(netlink.LinkDel(link(t, portL))).To(Succeed())
	vsctl(t, n.socket, "del-port", brO, portO)
	reconcile(t, r)
	_, err := netlink.LinkByName(brL)
	g.Expect(err).To(BeAssignableToTypeOf(netlink.LinkNotFoundError{}), "Linux bridge %s deleted", brL)
	g.Expect(strings.Fields(vsctl(t, n.socket, "list-br"))).NotTo(ContainElement(brO))
	fpn = n.fpn()
	g.Expect(bridgeStatus(fpn, brL).Name).To(BeEmpty())
	g.Expect(bridgeStatus(fpn, brO).Name).To(BeEmpty())
	g.Expect(link(t, foreign).Type()).To(Equal("bridge"), "a bridge without the agent's mark is never removed")

	t.Log("The manager never removes an unmarked bridge, nor one with a port, when asked directly")
	m := &bridge.Manager{Marker: n.marker, Log: testr.New(t)}
	g.Expect(m.RemoveUnused(context.Background(), foreign, fastpathv1alpha1.DatapathLinuxBridge)).To(MatchError(bridge.ErrNotMarked))
	g.Expect(link(t, foreign).Type()).To(Equal("bridge"))
}
