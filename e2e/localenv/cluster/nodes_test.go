package cluster

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

func TestNodePlanGivesEachNodeItsAddressAndPodCIDR(t *testing.T) {
	g := NewWithT(t)
	plan := nodePlan(3, DefaultPodCIDR)
	g.Expect(plan).To(HaveLen(3))
	for i, want := range []struct{ name, ip, pods, link string }{
		{"node1", "10.89.0.11", "10.85.1.0/24", "fpnode1"},
		{"node2", "10.89.0.12", "10.85.2.0/24", "fpnode2"},
		{"node3", "10.89.0.13", "10.85.3.0/24", "fpnode3"},
	} {
		g.Expect(plan[i].Name).To(Equal(want.name))
		g.Expect(plan[i].IP).To(Equal(netip.MustParseAddr(want.ip)))
		g.Expect(plan[i].PodCIDR).To(Equal(netip.MustParsePrefix(want.pods)))
		g.Expect(plan[i].HostLink).To(Equal(want.link))
		g.Expect(NodesCIDR.Contains(plan[i].IP)).To(BeTrue())
		g.Expect(DefaultPodCIDR.Contains(plan[i].PodCIDR.Addr())).To(BeTrue())
	}
	g.Expect(hostAddr()).To(Equal(netip.MustParseAddr("10.89.0.1")))
}

func TestNodesOptionValidation(t *testing.T) {
	base := Options{Dir: "/tmp/fpc", BinDir: "/tmp/bin", NodeName: "node-a", NodeIP: netip.MustParseAddr("192.0.2.10")}
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		error string
	}{
		{"zero is one", func(o *Options) {}, ""},
		{"too many", func(o *Options) { o.Nodes = MaxNodes + 1 }, "Nodes 4: want 1 to 3"},
		{"negative", func(o *Options) { o.Nodes = -1 }, "want 1 to 3"},
		{"pod CIDR too narrow for a /24 per node", func(o *Options) {
			o.Nodes = 2
			o.PodCIDR = netip.MustParsePrefix("10.85.0.0/20")
		}, "needs a /16 or wider"},
		{"pod CIDR over the nodes' network", func(o *Options) {
			o.Nodes = 2
			o.PodCIDR = netip.MustParsePrefix("10.89.0.0/16")
		}, "must not overlap the nodes' network"},
		{"two nodes", func(o *Options) { o.Nodes = 2 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := base
			tc.edit(&o)
			got, err := o.withDefaults()
			if tc.error != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.error)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if got.Nodes > 1 {
				g.Expect(got.NodeIP).To(Equal(hostAddr()), "the control plane's address is the host's on the nodes' bridge")
			} else {
				g.Expect(got.Nodes).To(Equal(1))
				g.Expect(got.NodeIP).To(Equal(base.NodeIP))
			}
		})
	}
}

func TestNodeLayoutKeepsTheCNIPathsOfTheClusterAndTheRestApart(t *testing.T) {
	g := NewWithT(t)
	o, err := Options{Dir: "/tmp/fpc", BinDir: "/tmp/bin", Nodes: 2}.withDefaults()
	g.Expect(err).NotTo(HaveOccurred())
	plan := o.plannedNodes()
	g.Expect(plan).To(HaveLen(2))
	cl := o.layout()
	seen := map[string]string{}
	for _, n := range plan {
		nl := o.nodeOptions(n).layout()
		// The chart gives every agent the same CNI paths: each node binds its
		// own directory there.
		g.Expect(nl.cniBin).To(Equal(cl.cniBin))
		g.Expect(nl.cniConf).To(Equal(cl.cniConf))
		g.Expect(o.nodeBinds(n)).To(ContainElement([2]string{filepath.Join("/tmp/fpc/nodes", n.Name, "cni"), "/tmp/fpc/cni"}))
		g.Expect(o.nodeBinds(n)).To(ContainElement([2]string{filepath.Join("/tmp/fpc/nodes", n.Name, "var-lib"), "/var/lib"}))
		g.Expect(nl.kubeletRoot).To(Equal(KubeVirtKubeletRoot), "in the node's own /var/lib")
		g.Expect(nl.logs).To(Equal(filepath.Join(cl.logs, n.Name)), "kept by Down with the cluster's logs")
		for _, p := range []string{nl.containerdRoot, nl.pki, nl.kubeconfigs, nl.run, nl.podLogs} {
			g.Expect(seen).NotTo(HaveKey(p), "%s is %s's too", p, seen[p])
			seen[p] = n.Name
		}
		b, err := o.nodeOptions(n).kubeletConfig()
		g.Expect(err).NotTo(HaveOccurred())
		var c kubeletv1beta1.KubeletConfiguration
		g.Expect(yaml.UnmarshalStrict(b, &c)).To(Succeed())
		g.Expect(c.CgroupRoot).To(Equal(CgroupRoot + "/" + n.Name))
		g.Expect(c.TLSCertFile).To(HavePrefix(filepath.Join("/tmp/fpc/nodes", n.Name) + "/"))
	}
	g.Expect(o.nodeOptions(plan[0]).plannedNodes()).To(HaveLen(2), "a node's Options still know the plan")
}

// TestClearStaleBridgeRemovesOnlyADeadClustersBridge: a nodes bridge left by
// a cluster that no longer runs (its state file gone, or every process in it
// dead) goes, with its ports; a live cluster's, or an unmarked one, stays and
// is an error. Needs root (netlink); uses bridges of its own names.
func TestClearStaleBridgeRemovesOnlyADeadClustersBridge(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	self, ok := runstate.Record("test", os.Getpid())
	g.Expect(ok).To(BeTrue())
	live := filepath.Join(dir, "live.json")
	g.Expect(runstate.Save(live, runState{Processes: []runstate.Process{self}})).To(Succeed())
	dead := filepath.Join(dir, "dead.json")
	g.Expect(runstate.Save(dead, runState{Processes: []runstate.Process{{Name: "kubelet", PID: self.PID, Exe: self.Exe, Start: self.Start + 1}}})).To(Succeed())

	suffix := strconv.Itoa(os.Getpid() % 100000)
	mk := func(name, alias string) {
		t.Helper()
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
		g.Expect(netlink.LinkAdd(br)).To(Succeed())
		t.Cleanup(func() {
			if l, err := netlink.LinkByName(name); err == nil {
				_ = netlink.LinkDel(l)
			}
		})
		if alias != "" {
			g.Expect(netlink.LinkSetAlias(br, alias)).To(Succeed())
		}
	}
	exists := func(name string) bool { _, err := netlink.LinkByName(name); return err == nil }

	for _, c := range []struct {
		name, alias string
		removed     bool
	}{
		{"fpt-gone" + suffix, nodesBridgeOwner + "=" + filepath.Join(dir, "missing.json"), true},
		{"fpt-dead" + suffix, nodesBridgeOwner + "=" + dead, true},
		{"fpt-live" + suffix, nodesBridgeOwner + "=" + live, false},
		{"fpt-other" + suffix, "", false},
	} {
		mk(c.name, c.alias)
		port := "fptp" + suffix + c.name[4:5]
		br, err := netlink.LinkByName(c.name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index}, PeerName: port + "p"})).To(Succeed())
		t.Cleanup(func() {
			if l, err := netlink.LinkByName(port); err == nil {
				_ = netlink.LinkDel(l)
			}
		})
		var out strings.Builder
		err = clearStaleBridge(&out, c.name)
		if c.removed {
			g.Expect(err).NotTo(HaveOccurred(), c.name)
			g.Expect(out.String()).To(ContainSubstring("removed " + c.name))
		} else {
			g.Expect(err).To(MatchError(ContainSubstring("link "+c.name+" exists")), c.name)
		}
		g.Expect(exists(c.name)).To(Equal(!c.removed), c.name)
		g.Expect(exists(port)).To(Equal(!c.removed), c.name+"'s port")
	}
	g.Expect(clearStaleBridge(io.Discard, "fpt-none"+suffix)).To(Succeed(), "no bridge: nothing to do")
}
