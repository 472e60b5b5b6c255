package plugin_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/macvtap"
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

// macArgs are the CNI_ARGS of a pod in cnitest.Namespace asking for mac.
func macArgs(mac string) string {
	return "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + cnitest.Namespace + ";K8S_POD_NAME=fp-test-pod;MAC=" + mac
}

// expectRefusedLeavingNothing adds an attachment in a fresh netns with
// mac and expects the refusal naming mac on device and holder, and nothing
// left of it: no interface in its netns, no host veth, the bridge's ports
// still ports, no record and only the addresses in allocated.
func expectRefusedLeavingNothing(t *testing.T, e *env, conf []byte, mac, device, holder string, ports, allocated []string) {
	t.Helper()
	g := NewWithT(t)
	netns := cnitest.NewNS(t)
	a, err := e.add(netns, conf, macArgs(mac))
	if err == nil { // the refusal is missing: leave nothing behind all the same
		t.Cleanup(func() { _ = e.del(a, netns.Path()) })
	}
	g.Expect(err).To(MatchError(And(
		ContainSubstring("MAC "+mac+" is already on "+device),
		ContainSubstring("port "+holder))))
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo"), "the pod interface is gone")
	if e.br.Datapath != netconf.DatapathMacvtap {
		g.Expect(cnitest.LinkExists(a.hostIf())).To(BeFalse(), "host veth %s", a.hostIf())
	}
	g.Expect(e.br.Ports(t)).To(ConsistOf(ports))
	g.Expect(filepath.Join(e.stateDir, a.containerID+":"+a.ifName+".json")).NotTo(BeAnExistingFile())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(allocated), "the refused ADD holds no address")
}

// TestMACAlreadyOnOVSBridgeRefused is issue 39 item 4 on datapath OVS
// (userspace bridge, datapath_type=netdev): ADD refuses a MAC that another
// attachment on the bridge has in its record (an ADD whose port is not in
// OVSDB yet: the test takes the victim's attached-mac away), that another
// port's interface has as external_ids:attached-mac (a port the plugin did
// not add), or as its own address (mac_in_use: that port's, the bridge's),
// naming the MAC and the port, and leaves nothing: no veth, OVS port,
// record or address.
func TestMACAlreadyOnOVSBridgeRefused(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathOVS, "1.0.0")
	conf := e.conf(cnitest.Conf{})
	socket := e.br.OVSSocket

	const victimMAC = "02:fa:57:00:01:21"
	nsVictim := cnitest.NewNS(t)
	victim, err := e.add(nsVictim, conf, macArgs(victimMAC))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = e.del(victim, nsVictim.Path()) })
	g.Expect(ovsGet(g, socket, "Interface", victim.hostIf(), "external_ids:attached-mac")).To(Equal(`"` + victimMAC + `"`))

	// A port the plugin did not add (another integration's, or one whose
	// record was lost), with the MAC behind it in attached-mac.
	port, peer := testutil.UniqueName("fpmp"), testutil.UniqueName("fpmq")
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port}, PeerName: peer})).To(Succeed())
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(port); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("failed to delete veth %s: %v", port, err)
			}
		}
	})
	const attachedMAC = "02:fa:57:00:01:22"
	out, err := exec.Command("ovs-vsctl", "--db="+socket, "--timeout=30", "add-port", e.br.Name, port,
		"--", "set", "Interface", port, "external_ids:attached-mac="+attachedMAC).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("ovs-vsctl", "--db="+socket, "--timeout=30", "--if-exists", "del-port", e.br.Name, port).CombinedOutput(); err != nil {
			t.Errorf("failed to delete OVS port %s: %v: %s", port, err, out)
		}
	})
	macInUse := func(iface string) string {
		var mac string
		g.Eventually(func(g Gomega) {
			mac = strings.Trim(ovsGet(NewWithT(t), socket, "Interface", iface, "mac_in_use"), `"`)
			g.Expect(mac).NotTo(BeEmpty())
		}).WithTimeout(30*time.Second).Should(Succeed(), "ovs-vswitchd reports the address of %s", iface)
		return mac
	}
	portMAC, bridgeMAC := macInUse(port), macInUse(e.br.Name)

	// The victim's ADD is over, but one between its record and its port
	// looks like this to the next one: only the record has the MAC.
	out, err = exec.Command("ovs-vsctl", "--db="+socket, "remove", "Interface", victim.hostIf(), "external_ids", "attached-mac").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	for _, tc := range []struct {
		name, mac, holder string
	}{
		{"recorded-by-another-attachment", victimMAC, victim.hostIf() + ", of attachment " + victim.containerID + "/net1"},
		{"attached-mac-of-another-port", attachedMAC, port},
		{"mac-in-use-of-another-port", portMAC, port},
		{"the-bridge-address", bridgeMAC, e.br.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectRefusedLeavingNothing(t, e, conf, tc.mac, "bridge "+e.br.Name, tc.holder,
				[]string{victim.hostIf(), port}, []string{victim.ip()})
		})
	}

	// The victim keeps its port, and another MAC is accepted.
	g.Expect(e.check(victim)).To(Succeed())
	netns := cnitest.NewNS(t)
	other, err := e.add(netns, conf, macArgs("02:fa:57:00:01:23"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ovsGet(g, socket, "Interface", other.hostIf(), "external_ids:attached-mac")).To(Equal(`"02:fa:57:00:01:23"`))
	g.Expect(e.del(other, netns.Path())).To(Succeed())
}

// TestMACAlreadyOnMacvtapLowerRefused is issue 39 item 4 on datapath
// Macvtap: ADD refuses a MAC that another attachment on the same lower
// device has in its record (even while that macvtap is down, when the
// kernel would take the MAC), that another open macvtap on the lower has
// (the kernel's EADDRINUSE, said plainly), or that the lower device has,
// naming the MAC and the port, and leaves nothing: no macvtap, record or
// address. The victim's macvtap can then come up again.
func TestMACAlreadyOnMacvtapLowerRefused(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathMacvtap, "1.0.0")
	conf := e.conf(cnitest.Conf{})
	lower, err := netlink.LinkByName(e.br.Name)
	g.Expect(err).NotTo(HaveOccurred())

	const victimMAC = "02:fa:57:00:02:21"
	nsVictim := cnitest.NewNS(t)
	victim, err := e.add(nsVictim, conf, macArgs(victimMAC))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = e.del(victim, nsVictim.Path()) })
	setVictim := func(up bool) error {
		return nsVictim.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName("net1")
			if err != nil {
				return err
			}
			if up {
				return netlink.LinkSetUp(l)
			}
			return netlink.LinkSetDown(l)
		})
	}
	// Down (its ADD between Create and set-up, or set down since): the
	// kernel checks a macvtap's MAC only against the open ones.
	g.Expect(setVictim(false)).To(Succeed())

	// A macvtap on the lower device that no record names (another
	// plugin's), open.
	nsForeign := cnitest.NewNS(t)
	const foreignMAC = "02:fa:57:00:02:22"
	_, err = macvtap.Create(nsForeign, lower, macvtap.Spec{Name: "mv0", MTU: 1500, MAC: foreignMAC})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nsForeign.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("mv0")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})).To(Succeed())

	device := "macvtap lower device " + e.br.Name
	for _, tc := range []struct {
		name, mac, holder string
	}{
		{"recorded-by-another-attachment", victimMAC, "net1 in " + nsVictim.Path() + ", of attachment " + victim.containerID + "/net1"},
		{"open-macvtap-without-record", foreignMAC, "a macvtap in another network namespace"},
		{"the-lower-device-address", lower.Attrs().HardwareAddr.String(), e.br.Name + ", the lower device itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectRefusedLeavingNothing(t, e, conf, tc.mac, device, tc.holder, nil, []string{victim.ip()})
		})
	}

	// The victim's macvtap comes up with its MAC, and another MAC is
	// accepted.
	g.Expect(setVictim(true)).To(Succeed())
	g.Expect(e.check(victim)).To(Succeed())
	netns := cnitest.NewNS(t)
	other, err := e.add(netns, conf, macArgs("02:fa:57:00:02:23"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.del(other, netns.Path())).To(Succeed())
}
