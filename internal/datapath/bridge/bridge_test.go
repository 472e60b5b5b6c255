package bridge_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// Names in this package start with "fpbr" (bridge package tests).

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// deleteLinkAtCleanup removes link name at the end of the test, even on failure.
func deleteLinkAtCleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("failed to delete link %s: %v", name, err)
			}
		}
	})
}

func linuxManager(t *testing.T) *bridge.Manager {
	return &bridge.Manager{Marker: testutil.UniqueName("test-"), Log: testr.New(t)}
}

func TestLinuxBridgeCreatedRaisedAndIdempotent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)
	name := testutil.UniqueName("fpbrl")
	deleteLinkAtCleanup(t, name)

	spec := bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000}
	st, err := m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeTrue())
	g.Expect(st.Managed).To(BeTrue())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)

	link, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Type()).To(Equal("bridge"))
	g.Expect(link.Attrs().MTU).To(Equal(9000))
	g.Expect(link.Attrs().Flags & net.FlagUp).NotTo(BeZero())
	index := link.Attrs().Index

	// Again, as after an agent restart: nothing new.
	st, err = (&bridge.Manager{Marker: m.Marker}).Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeFalse())
	g.Expect(st.Ready(spec)).To(BeTrue())
	link, err = netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().Index).To(Equal(index))

	// A port with a smaller MTU joins; an attachment then asks for more.
	veth := testutil.UniqueName("fpbrv")
	deleteLinkAtCleanup(t, veth)
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: veth, MTU: 9000, MasterIndex: index}, PeerName: veth + "p"})).To(Succeed())
	spec.MTU = 65000
	st, err = m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)
	g.Expect(st.Ports).To(Equal([]string{veth}))
	link, err = netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().MTU).To(Equal(65000))
	g.Expect(link.Attrs().Index).To(Equal(index))

	managed, err := m.Managed(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managed).To(HaveLen(1))
	g.Expect(managed[0].Name).To(Equal(name))
	g.Expect(managed[0].MTU).To(Equal(65000))
	g.Expect(managed[0].Ports).To(Equal([]string{veth}))
}

func TestLinuxBridgeWithoutTheMarkerIsNeverAdopted(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)
	plain, aliased, other := testutil.UniqueName("fpbrl"), testutil.UniqueName("fpbrl"), testutil.UniqueName("fpbrl")
	// plain: e.g. the node's cni0; aliased: an admin's; other: another agent's marker.
	for name, alias := range map[string]string{plain: "", aliased: "the admin's bridge", other: wellknown.MarkerKey + "=someone-else"} {
		deleteLinkAtCleanup(t, name)
		g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1500}})).To(Succeed())
		if alias != "" {
			l, err := netlink.LinkByName(name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(netlink.LinkSetAlias(l, alias)).To(Succeed())
		}
		before, err := netlink.LinkByName(name)
		g.Expect(err).NotTo(HaveOccurred())

		spec := bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000}
		st, err := m.Ensure(ctx(t), spec)
		g.Expect(errors.Is(err, bridge.ErrNotMarked)).To(BeTrue(), "%s: %v", name, err)
		g.Expect(err).To(MatchError(ContainSubstring("Linux bridge " + name + " exists without the alias")))
		g.Expect(st.Managed).To(BeFalse())
		after, err := netlink.LinkByName(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(after.Attrs().Index).To(Equal(before.Attrs().Index))
		g.Expect(after.Attrs().MTU).To(Equal(1500), "MTU unchanged")
		g.Expect(after.Attrs().Flags&net.FlagUp).To(BeZero(), "left down")
		g.Expect(after.Attrs().Alias).To(Equal(alias), "not marked")
	}
	managed, err := m.Managed(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managed).To(BeEmpty())
}

func TestLinuxBridgeIsCreatedMarked(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	m := linuxManager(t)
	name := testutil.UniqueName("fpbrl")
	deleteLinkAtCleanup(t, name)
	_, err := m.Ensure(ctx(t), bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000})
	g.Expect(err).NotTo(HaveOccurred())
	l, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Attrs().Alias).To(Equal(wellknown.MarkerKey + "=" + m.Marker))
	links, err := netlink.LinkList()
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range links {
		g.Expect(l.Attrs().Name).NotTo(HavePrefix("fpnew"), "no temporary bridge left behind")
	}
}

func TestLinuxBridgeNameTakenByAnotherKind(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	name := testutil.UniqueName("fpbrv")
	deleteLinkAtCleanup(t, name)
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"})).To(Succeed())

	_, err := linuxManager(t).Ensure(ctx(t), bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000})
	g.Expect(err).To(MatchError(ContainSubstring(`is a "veth", not a Linux bridge`)))
	link, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Type()).To(Equal("veth"), "the existing link is left alone")
}

func vsctl(t *testing.T, socket string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovs-vsctl", append([]string{"--db=" + socket, "--timeout=30"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-vsctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func deleteOVSBridgeAtCleanup(t *testing.T, socket, name string) {
	t.Cleanup(func() {
		out, err := exec.Command("ovs-vsctl", "--db="+socket, "--timeout=30", "--if-exists", "del-br", name).CombinedOutput()
		if err != nil {
			t.Errorf("failed to delete OVS bridge %s: %v: %s", name, err, out)
		}
	})
}

func ovsManager(t *testing.T, socket string) *bridge.Manager {
	conn := ovsdb.NewConn(socket, testr.New(t))
	t.Cleanup(conn.Close)
	return &bridge.Manager{OVS: conn, OVSDatapathType: ovsdb.DatapathNetdev, Marker: testutil.UniqueName("test-"), Log: testr.New(t)}
}

func TestOVSBridgeCreatedRaisedAndIdempotent(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := testutil.StartOVS(t)
	m := ovsManager(t, socket)
	name := testutil.UniqueName("fpbro")
	deleteOVSBridgeAtCleanup(t, socket, name)

	spec := bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000}
	st, err := m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeTrue())
	g.Expect(st.Managed).To(BeTrue())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)
	g.Expect(vsctl(t, socket, "get", "Bridge", name, "datapath_type")).To(Equal("netdev"))
	g.Expect(vsctl(t, socket, "get", "Interface", name, "mtu")).To(Equal("9000"))
	link, err := netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().MTU).To(Equal(9000))
	g.Expect(link.Attrs().Flags & net.FlagUp).NotTo(BeZero())
	index := link.Attrs().Index

	// A new manager and connection, as after an agent restart: nothing new.
	m2 := ovsManager(t, socket)
	m2.Marker = m.Marker
	st, err = m2.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Created).To(BeFalse())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)
	g.Expect(strings.Count("\n"+vsctl(t, socket, "list-br")+"\n", "\n"+name+"\n")).To(Equal(1))
	link, err = netlink.LinkByName(name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link.Attrs().Index).To(Equal(index))

	// Raised, with a port on the bridge.
	veth := testutil.UniqueName("fpbrv")
	deleteLinkAtCleanup(t, veth)
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: veth, MTU: 9000}, PeerName: veth + "p"})).To(Succeed())
	vsctl(t, socket, "add-port", name, veth)
	spec.MTU = 9216
	st, err = m.Ensure(ctx(t), spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Ready(spec)).To(BeTrue(), "%+v", st)
	g.Expect(st.Ports).To(Equal([]string{veth}))
	g.Expect(vsctl(t, socket, "get", "Interface", name, "mtu")).To(Equal(strconv.Itoa(9216)))

	managed, err := m.Managed(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managed).To(HaveLen(1))
	g.Expect(managed[0].Name).To(Equal(name))
	g.Expect(managed[0].Datapath).To(Equal(fastpathv1alpha1.DatapathOVS))
	g.Expect(managed[0].MTU).To(Equal(9216))
}

func TestOVSBridgeNameTakenByLinuxBridge(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := testutil.StartOVS(t)
	name := testutil.UniqueName("fpbrl")
	deleteLinkAtCleanup(t, name)
	deleteOVSBridgeAtCleanup(t, socket, name)
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}})).To(Succeed())

	_, err := ovsManager(t, socket).Ensure(ctx(t), bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000})
	g.Expect(err).To(MatchError(ContainSubstring("a Linux bridge of that name exists")))
	g.Expect(vsctl(t, socket, "list-br")).NotTo(ContainSubstring(name))
}

func TestOVSBridgeWithoutTheMarkerIsNeverAdopted(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := testutil.StartOVS(t)
	name := testutil.UniqueName("fpbro")
	deleteOVSBridgeAtCleanup(t, socket, name)
	vsctl(t, socket, "add-br", name, "--", "set", "Bridge", name, "datapath_type=netdev")

	_, err := ovsManager(t, socket).Ensure(ctx(t), bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000})
	g.Expect(errors.Is(err, bridge.ErrNotMarked)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("OVS bridge " + name + " exists without external_ids:" + wellknown.MarkerKey)))
	g.Expect(vsctl(t, socket, "get", "Interface", name, "mtu_request")).To(Equal("[]"), "mtu_request unchanged")
	g.Expect(vsctl(t, socket, "get", "Bridge", name, "external_ids")).To(Equal("{}"), "not marked")
}

func TestOVSUnreachable(t *testing.T) {
	g := NewWithT(t)
	conn := ovsdb.NewConn("unix:"+t.TempDir()+"/db.sock", testr.New(t))
	t.Cleanup(conn.Close)
	m := &bridge.Manager{OVS: conn, Log: testr.New(t)}
	_, err := m.Ensure(ctx(t), bridge.Spec{Name: "fpbnone", Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000})
	g.Expect(errors.Is(err, bridge.ErrOVSUnreachable)).To(BeTrue(), "%v", err)

	_, err = (&bridge.Manager{}).Ensure(ctx(t), bridge.Spec{Name: "fpbnone", Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000})
	g.Expect(errors.Is(err, bridge.ErrOVSUnreachable)).To(BeTrue(), "%v", err)
}

// RemoveManaged (the uninstall's cleanup) deletes the OVS bridge with the
// manager's marker and leaves one with another marker; the marked bridge's
// interface disappears from the node. A second call removes nothing.
func TestOVSRemoveManagedOnlyMarked(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	socket := testutil.StartOVS(t)
	m := ovsManager(t, socket)
	ours, other := testutil.UniqueName("fpbro"), testutil.UniqueName("fpbro")
	deleteOVSBridgeAtCleanup(t, socket, ours)
	deleteOVSBridgeAtCleanup(t, socket, other)
	_, err := m.Ensure(ctx(t), bridge.Spec{Name: ours, Datapath: fastpathv1alpha1.DatapathOVS, MTU: 9000})
	g.Expect(err).NotTo(HaveOccurred())
	testutil.AddOVSBridge(t, socket, other, 1500)

	removed, err := m.RemoveManaged(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed.OVSBridges).To(Equal([]string{ours}))
	g.Expect(removed.Links).To(BeEmpty(), "no Linux link carries this test's marker")
	g.Expect(strings.Fields(vsctl(t, socket, "list-br"))).To(And(ContainElement(other), Not(ContainElement(ours))))
	g.Eventually(func() error { _, err := netlink.LinkByName(ours); return err }, 10*time.Second, 100*time.Millisecond).
		Should(BeAssignableToTypeOf(netlink.LinkNotFoundError{}), "ovs-vswitchd removes the bridge's interface")

	removed, err = m.RemoveManaged(ctx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(Equal(bridge.Removed{}))
}
