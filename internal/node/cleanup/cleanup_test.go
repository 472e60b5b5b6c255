package cleanup_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/go-logr/logr/testr"
	"github.com/google/nftables"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/cleanup"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// inNewNS runs f on the test goroutine with its thread in a new network
// namespace, which is removed at the end of the test, also on failure (and
// with it every link the test made there).
func inNewNS(t *testing.T, f func()) {
	t.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	host, err := ns.GetCurrentNS()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if err := netns.Set(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := host.Set(); err != nil {
			t.Fatalf("failed to return to the host namespace: %v", err)
		}
	}()
	f()
}

// TestRunRemovesOnlyWhatIsMarked: in a namespace of its own, the agent's
// bridge and macvtap lower device (with its peer) and the port security
// table go, while links with another marker, with our alias on another
// kind of link, with the plugin's pod alias or with none, and other
// nftables tables stay; a second run removes nothing.
func TestRunRemovesOnlyWhatIsMarked(t *testing.T) {
	testutil.RequireRoot(t)
	inNewNS(t, func() {
		g := NewWithT(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m := &bridge.Manager{Marker: "fastpath-agent", Log: testr.New(t)}

		for _, s := range []bridge.Spec{
			{Name: "fastpath0", Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: 9000},
			{Name: "fplower0", Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000},
		} {
			_, err := m.Ensure(ctx, s)
			g.Expect(err).NotTo(HaveOccurred())
		}
		add := func(l netlink.Link, alias string) {
			g.Expect(netlink.LinkAdd(l)).To(Succeed(), l.Attrs().Name)
			if alias != "" {
				g.Expect(netlink.LinkSetAlias(l, alias)).To(Succeed())
			}
		}
		// Not the agent's: an admin's bridge, another agent's (other marker),
		// a macvlan with our alias, the plugin's pod veth, an unmarked veth.
		add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-admin"}}, "")
		add(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-other"}}, wellknown.MarkerKey+"=other-agent")
		add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fp0123456789a"}, PeerName: "pod-end"}, "fastpath/fp-db/3f1c2d9e8b7a/net1")
		add(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-admin"}, PeerName: "veth-admin-p"}, "")
		peer, err := netlink.LinkByName("veth-admin-p")
		g.Expect(err).NotTo(HaveOccurred())
		add(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "macvlan-ours", ParentIndex: peer.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}, wellknown.MarkerKey+"=fastpath-agent")
		// The agent's bridge keeps ports that are not its own: deleting it detaches them.
		port, err := netlink.LinkByName("veth-admin")
		g.Expect(err).NotTo(HaveOccurred())
		br, err := netlink.LinkByName("fastpath0")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkSetMaster(port, br)).To(Succeed())

		nft, err := nftables.New()
		g.Expect(err).NotTo(HaveOccurred())
		nft.AddTable(&nftables.Table{Family: nftables.TableFamilyBridge, Name: wellknown.PortSecurityTable})
		nft.AddTable(&nftables.Table{Family: nftables.TableFamilyBridge, Name: "admin"})
		nft.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: wellknown.PortSecurityTable})
		g.Expect(nft.Flush()).To(Succeed())

		dir := t.TempDir()
		plugin, state, other := filepath.Join(dir, "fastpath"), filepath.Join(dir, "state"), filepath.Join(dir, "other-plugin")
		g.Expect(os.WriteFile(plugin, []byte("x"), 0o755)).To(Succeed())
		g.Expect(os.MkdirAll(filepath.Join(state, "leases"), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(state, "leases", "c:net1.json"), []byte("{}"), 0o644)).To(Succeed())
		g.Expect(os.WriteFile(other, []byte("x"), 0o755)).To(Succeed())

		opts := cleanup.Options{Bridges: m, Table: true, Paths: []string{plugin, filepath.Join(dir, "missing")}, EmptyDirs: []string{state}, Log: testr.New(t)}
		rep, err := cleanup.Run(ctx, opts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rep.Removed.Links).To(ContainElements("fastpath0", "fplower0"))
		g.Expect(rep.Table).To(BeTrue())
		g.Expect(rep.Paths).To(ConsistOf(plugin, filepath.Join(state, "leases")))

		links, err := netlink.LinkList()
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		g.Expect(names).To(ConsistOf("lo", "br-admin", "br-other", "macvlan-ours", "fp0123456789a", "pod-end", "veth-admin", "veth-admin-p"),
			"the agent's bridge, lower device and its peer %s are gone, nothing else", wellknown.LowerPeerName("fplower0"))
		port, err = netlink.LinkByName("veth-admin")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(port.Attrs().MasterIndex).To(BeZero(), "detached from the deleted bridge")

		tables, err := nft.ListTables()
		g.Expect(err).NotTo(HaveOccurred())
		var kept []string
		for _, tb := range tables {
			kept = append(kept, tb.Name+"/"+map[nftables.TableFamily]string{nftables.TableFamilyBridge: "bridge", nftables.TableFamilyINet: "inet"}[tb.Family])
		}
		g.Expect(kept).To(ConsistOf("admin/bridge", "fastpath/inet"))
		g.Expect(other).To(BeAnExistingFile())
		g.Expect(plugin).NotTo(BeAnExistingFile())
		g.Expect(os.ReadDir(state)).To(BeEmpty(), "the state directory is emptied, kept (a mount point)")

		rep, err = cleanup.Run(ctx, opts)
		g.Expect(err).NotTo(HaveOccurred(), "a second run")
		g.Expect(rep).To(Equal(cleanup.Report{}), "removes nothing")
	})
}
