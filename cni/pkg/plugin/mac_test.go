package plugin_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestMACAlreadyOnBridgeRefused is issue 39 item 4: a tenant whose VM
// names a neighbour's MAC (macAddress, which reaches ADD as CNI_ARGS MAC)
// would share that neighbour's frames on the bridge. ADD refuses a MAC that
// another attachment on the bridge has in its record (a quiet guest, whose
// MAC the bridge has not learned), that the bridge's forwarding database has
// on a port, or that a port has as its own address, naming the MAC and the
// port, and leaves nothing: no veth, bridge port, record, lease or address.
func TestMACAlreadyOnBridgeRefused(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	conf := e.conf(cnitest.Conf{})
	macArgs := func(mac string) string {
		return "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + cnitest.Namespace + ";K8S_POD_NAME=fp-test-pod;MAC=" + mac
	}

	// The victim: an attachment with a MAC of its own, whose guest has sent
	// nothing yet.
	const victimMAC = "02:fa:57:00:00:21"
	// Quiet for sure: without IPv6 its kernel sends no neighbour
	// discovery, so the bridge does not learn the MAC.
	nsVictim := cnitest.NewNS(t)
	g.Expect(nsVictim.Do(func(ns.NetNS) error {
		for _, f := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})).To(Succeed())
	victim, err := e.add(nsVictim, conf, macArgs(victimMAC))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = e.del(victim, nsVictim.Path()) })

	// A port nobody recorded (another plugin's, or a leftover), with a MAC
	// learned behind it: a static FDB entry stands for the learning, which
	// would need a frame and a wait.
	port, peer := testutil.UniqueName("fpmp"), testutil.UniqueName("fpmq")
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port}, PeerName: peer}
	g.Expect(netlink.LinkAdd(veth)).To(Succeed())
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(port); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("failed to delete veth %s: %v", port, err)
			}
		}
	})
	br, err := netlink.LinkByName(e.br.Name)
	g.Expect(err).NotTo(HaveOccurred())
	portLink, err := netlink.LinkByName(port)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netlink.LinkSetMaster(portLink, br)).To(Succeed())
	const learnedMAC = "02:fa:57:00:00:22"
	// `bridge fdb add <mac> dev <port> master static` (the test's PATH
	// finds the CNI bridge plugin first).
	learned, _ := net.ParseMAC(learnedMAC)
	g.Expect(netlink.NeighAdd(&netlink.Neigh{LinkIndex: portLink.Attrs().Index, Family: unix.AF_BRIDGE,
		State: netlink.NUD_NOARP, Flags: netlink.NTF_MASTER, HardwareAddr: learned})).To(Succeed())

	vm, _ := net.ParseMAC(victimMAC)
	g.Expect(fdbHas(t, vm)).To(BeFalse(), "the bridge has not learned the victim's MAC")

	for _, tc := range []struct {
		name, mac, holder string
	}{
		{"recorded-by-another-attachment", victimMAC, victim.hostIf()},
		{"in-the-bridge-fdb", learnedMAC, port},
		{"a-port-link-address", portLink.Attrs().HardwareAddr.String(), port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			netns := cnitest.NewNS(t)
			a, err := e.add(netns, conf, macArgs(tc.mac))
			if err == nil { // the refusal is missing: leave nothing behind all the same
				t.Cleanup(func() { _ = e.del(a, netns.Path()) })
			}
			g.Expect(err).To(MatchError(And(
				ContainSubstring("MAC "+tc.mac+" is already on bridge "+e.br.Name),
				ContainSubstring("port "+tc.holder))))
			g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo"), "the pod interface is gone")
			g.Expect(cnitest.LinkExists(a.hostIf())).To(BeFalse(), "host veth %s", a.hostIf())
			g.Expect(e.br.Ports(t)).To(ConsistOf(victim.hostIf(), port))
			g.Expect(filepath.Join(e.stateDir, a.containerID+":"+a.ifName+".json")).NotTo(BeAnExistingFile())
			g.Expect(filepath.Join(e.stateDir, leases.Dir, a.containerID+":"+a.ifName+".json")).NotTo(BeAnExistingFile())
			g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(victim.ip()), "only the victim holds an address")
		})
	}

	// The victim still has its port, and another MAC is accepted.
	g.Expect(e.check(victim)).To(Succeed())
	netns := cnitest.NewNS(t)
	other, err := e.add(netns, conf, macArgs("02:fa:57:00:00:23"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(netns.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName("net1")
		if err == nil {
			g.Expect(link.Attrs().HardwareAddr.String()).To(Equal("02:fa:57:00:00:23"))
		}
		return err
	})).To(Succeed())
	g.Expect(e.del(other, netns.Path())).To(Succeed())
}

// fdbHas reports whether any bridge FDB entry of the host has mac.
func fdbHas(t *testing.T, mac net.HardwareAddr) bool {
	t.Helper()
	fdb, err := netlink.NeighList(0, unix.AF_BRIDGE)
	if err != nil {
		t.Fatalf("failed to list the bridge FDB: %v", err)
	}
	for _, n := range fdb {
		if n.HardwareAddr.String() == mac.String() {
			return true
		}
	}
	return false
}
