package datapathtest

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// guestOn makes a guest network namespace whose dhcptest.GuestIf (MAC mac)
// is a veth whose host end, hostIf, is a port of the Linux bridge br, as the
// CNI plugin wires a VM; all of it is removed when the test ends.
func guestOn(t *testing.T, br, hostIf string, mac net.HardwareAddr) *dhcptest.Guest {
	t.Helper()
	g := NewWithT(t)
	guest, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = guest.Close()
		_ = testutils.UnmountNS(guest)
	})
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIf, MTU: 9000}, PeerName: dhcptest.GuestIf,
		PeerHardwareAddr: mac, PeerNamespace: netlink.NsFd(int(guest.Fd()))}
	g.Expect(netlink.LinkAdd(veth)).To(Succeed())
	deleteLinuxBridgeAtCleanup(t, hostIf) // any link: deleted if still there
	g.Expect(netlink.LinkSetMaster(link(t, hostIf), link(t, br))).To(Succeed())
	g.Expect(netlink.LinkSetUp(link(t, hostIf))).To(Succeed())
	g.Expect(guest.Do(func(_ cnins.NetNS) error {
		l, err := netlink.LinkByName(dhcptest.GuestIf)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})).To(Succeed())
	return &dhcptest.Guest{Bridge: br, HostIf: hostIf, NS: guest, MAC: mac}
}

// nftRule is the handle and packet counter of the one rule of a chain.
type nftRule struct{ handle, packets int }

// counterRule reads the rule of table bridge tbl, chain ch (nft -j).
func counterRule(t *testing.T, tbl, ch string) nftRule {
	t.Helper()
	out, err := exec.Command("nft", "-j", "list", "chain", "bridge", tbl, ch).CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s", out)
	var doc struct {
		Nftables []struct {
			Rule *struct {
				Handle int `json:"handle"`
				Expr   []struct {
					Counter *struct {
						Packets int `json:"packets"`
					} `json:"counter"`
				} `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	NewWithT(t).Expect(json.Unmarshal(out, &doc)).To(Succeed())
	for _, o := range doc.Nftables {
		if o.Rule == nil {
			continue
		}
		for _, e := range o.Rule.Expr {
			if e.Counter != nil {
				return nftRule{handle: o.Rule.Handle, packets: e.Counter.Packets}
			}
		}
	}
	t.Fatalf("no counter rule in bridge %s %s: %s", tbl, ch, out)
	return nftRule{}
}

func nft(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("nft", args...).CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "nft %s: %s", strings.Join(args, " "), out)
}

// TestAgentRestartTouchesNoDatapath: an agent process stops and a new one
// reconciles the same node twice; the Linux bridge with a VM's port, the
// macvtap lower device with its peer, the OVS bridge with a port, a bridge
// nftables rule on the VM's port (as port security's) and the VM's DHCP
// lease are all as they were: same ifindexes and OVS row, the port still on
// its bridge, the rule's handle and counter kept, and the guest renewing
// during the restart keeps its address.
func TestAgentRestartTouchesNoDatapath(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	brL, lower, brO := testutil.UniqueName("fpag"), testutil.UniqueName("fpag"), testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, brL)
	deleteLinuxBridgeAtCleanup(t, lower) // a veth: its peer goes with it
	deleteOVSBridgeAtCleanup(t, n.socket, brO)
	attach(t, ns, "lb", network(t, fastpathv1alpha1.DatapathLinuxBridge, brL, 9000).Name)
	attach(t, ns, "mv", network(t, fastpathv1alpha1.DatapathMacvtap, lower, 9000).Name)
	attach(t, ns, "ovs", network(t, fastpathv1alpha1.DatapathOVS, brO, 9000).Name)
	stateDir := t.TempDir()
	serverID := netip.MustParseAddr("169.254.75.254")

	// start is one agent process: a new reconciler whose DHCP responders read
	// the leases the CNI plugin keeps under stateDir; stop ends it.
	start := func() (*agent.Reconciler, func()) {
		r := n.newInstance()
		ctx, cancel := context.WithCancel(context.Background())
		m := dhcp.NewManager(ctx, dhcp.NewTable(stateDir+"/"+leases.Dir, testr.New(t)), serverID, 0, testr.New(t))
		r.DHCP = m
		return r, func() { m.Stop(); cancel() }
	}
	r1, stop1 := start()
	reconcile(t, r1)
	g.Expect(bridgeStatus(n.fpn(), brL).Ready).To(BeTrue())

	// What the CNI plugin adds for VMs: a port and its lease on the Linux
	// bridge, a port on the OVS bridge, a rule on the port.
	mac := net.HardwareAddr{0x02, 0xfa, 0x57, 0, 0, 0x38}
	hostIf, ovsIf := testutil.UniqueName("fpap"), testutil.UniqueName("fpao")
	guest := guestOn(t, brL, hostIf, mac)
	g.Expect(leases.Write(stateDir, &leases.Lease{ContainerID: "c38", IfName: "net1", Network: "n", Bridge: brL, MAC: mac.String(),
		Address: netip.MustParsePrefix("10.250.0.38/24"), MTU: 9000})).To(Succeed())
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ovsIf}, PeerName: ovsIf + "p"})).To(Succeed())
	deleteLinuxBridgeAtCleanup(t, ovsIf)
	vsctl(t, n.socket, "add-port", brO, ovsIf)
	table := testutil.UniqueName("fpagt") // not "fastpath": this node's real port security may use it
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "bridge", table).Run() })
	nft(t, "add", "table", "bridge", table)
	nft(t, "add", "chain", "bridge", table, "prerouting", "{ type filter hook prerouting priority -300; }")
	nft(t, "add", "rule", "bridge", table, "prerouting", "iifname", hostIf, "counter", "accept")

	c := guest.Client(t, nil, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.ACK.YourIPAddr.String()).To(Equal("10.250.0.38"))

	type snapshot struct {
		index                  map[string]int
		master                 int
		ovsPort, ovsPortsOfBrO string
		rule                   nftRule
	}
	take := func() snapshot {
		s := snapshot{index: map[string]int{}}
		for _, name := range []string{brL, lower, wellknown.LowerPeerName(lower), brO, hostIf, ovsIf} {
			s.index[name] = link(t, name).Attrs().Index
		}
		s.master = link(t, hostIf).Attrs().MasterIndex
		s.ovsPort = vsctl(t, n.socket, "get", "Port", ovsIf, "_uuid")
		s.ovsPortsOfBrO = vsctl(t, n.socket, "list-ports", brO)
		s.rule = counterRule(t, table, "prerouting")
		return s
	}
	before := take()
	g.Expect(before.master).To(Equal(before.index[brL]))
	g.Expect(before.rule.packets).To(BeNumerically(">", 0), "the guest's DHCP went through the rule")
	rv := n.fpn().ResourceVersion

	t.Log("The agent stops; the guest renews while none runs, then a new agent reconciles twice")
	stop1()
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = c.Renew(rctx, l)
	rcancel()
	g.Expect(err).To(HaveOccurred(), "no agent, no answer: the guest keeps its lease and retries")
	r2, stop2 := start()
	defer stop2()
	reconcile(t, r2)
	reconcile(t, r2)

	after := take()
	g.Expect(after.index).To(Equal(before.index), "no link was recreated")
	g.Expect(after.master).To(Equal(before.master), "the VM's port is still on its bridge")
	g.Expect(after.ovsPort).To(Equal(before.ovsPort), "the OVS port row is the same")
	g.Expect(after.ovsPortsOfBrO).To(Equal(before.ovsPortsOfBrO))
	g.Expect(after.rule.handle).To(Equal(before.rule.handle), "the rule was not flushed and re-added")
	g.Expect(after.rule.packets).To(BeNumerically(">=", before.rule.packets), "its counter was not reset")
	g.Expect(n.fpn().ResourceVersion).To(Equal(rv), "the FastPathNode status is unchanged")

	renewed, err := c.Renew(ctx, l)
	g.Expect(err).NotTo(HaveOccurred(), "the new agent answers the renewal")
	g.Expect(renewed.ACK.YourIPAddr.String()).To(Equal("10.250.0.38"), "the guest keeps its address")
	g.Expect(counterRule(t, table, "prerouting").packets).To(BeNumerically(">", after.rule.packets), "the same rule counts the renewal")
}
