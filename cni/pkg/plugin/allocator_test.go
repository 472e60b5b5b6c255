package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestOneAllocatorPerBridge is issue 39 item 4: attachments sharing a
// network (one bridge on the node) allocated from one host-local directory
// each, so two of them could hand out one address, by accident with
// overlapping subnets or on purpose with rangeStart=rangeEnd=<victim>. The
// IPAM plugin now gets one network name per bridge (netconf.IPAMNetworkName):
// two attachments with disjoint subnets both work and their addresses sit in
// the bridge's one directory; an attachment whose range is a neighbour's
// address (the operator refuses its subnet, SubnetConflict; this is the node's
// own guard) gets none and leaves nothing; and a GC of one attachment's
// network leaves the other's address alone (the plugin's own GC collects
// only that network's records; host-local v1.9.1 has no GC, and what an
// IPAM plugin with one is told is TestIPAMGCConf's).
func TestOneAllocatorPerBridge(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	// 1.1.0: host-local v1.9.1, which speaks GC.
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.1.0")
	confOn := func(name, subnet string, extra map[string]any) []byte {
		ipam := map[string]any{"type": "host-local", "subnet": subnet}
		for k, v := range extra {
			ipam[k] = v
		}
		return e.conf(cnitest.Conf{Name: name, IPAM: ipam})
	}
	nsA, nsB := cnitest.NewNS(t), cnitest.NewNS(t)
	a := e.mustAdd(nsA, confOn("fp-a.db", "10.250.0.0/25", nil))
	t.Cleanup(func() { _ = e.del(a, nsA.Path()) })
	b := e.mustAdd(nsB, confOn("fp-b.web", "10.250.0.128/25", nil))
	t.Cleanup(func() { _ = e.del(b, nsB.Path()) })

	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip(), b.ip()))
	dirs, err := os.ReadDir(e.ipamDir)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, d := range dirs {
		names = append(names, d.Name())
	}
	g.Expect(names).To(ConsistOf(netconf.IPAMNetworkName(e.br.Name)), "one directory for the bridge, none per attachment")

	// A range of one address, a's: taken, so no address and nothing left.
	nsC := cnitest.NewNS(t)
	c, err := e.add(nsC, confOn("fp-c.evil", "10.250.0.0/25", map[string]any{"rangeStart": a.ip(), "rangeEnd": a.ip()}), "")
	if err == nil {
		t.Cleanup(func() { _ = e.del(c, nsC.Path()) })
	}
	g.Expect(err).To(MatchError(ContainSubstring("no IP addresses available")))
	e.expectGone(g, c, true)
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip(), b.ip()))

	// A GC of a's network keeps b's address.
	var m map[string]any
	g.Expect(json.Unmarshal(a.conf, &m)).To(Succeed())
	m["cni.dev/valid-attachments"] = []types.GCAttachment{{ContainerID: a.containerID, IfName: a.ifName}}
	gcConf, _ := json.Marshal(m)
	g.Expect(e.gc(gcConf)).To(Succeed())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip(), b.ip()))
	g.Expect(e.check(b)).To(Succeed())

	g.Expect(e.del(a, nsA.Path())).To(Succeed())
	g.Expect(e.del(b, nsB.Path())).To(Succeed())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(BeEmpty())
	e.expectNothingLeft(g, nsA)
}

// TestLegacyAllocationsKeptAcrossUpgrade: a VM wired by a plugin before one
// allocator per bridge holds its address in its network's own host-local
// directory (<dataDir>/<netconf name>), which the bridge's allocator does
// not read. A new ADD on that network reserves such addresses in the
// bridge's directory first, so it never hands out a running VM's address;
// the old attachment's DEL releases both.
func TestLegacyAllocationsKeptAcrossUpgrade(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	// Two addresses: host-local takes .10 first, unless it is taken.
	conf := e.conf(cnitest.Conf{IPAM: map[string]any{"type": "host-local", "subnet": cnitest.Subnet, "rangeStart": "10.250.0.10", "rangeEnd": "10.250.0.11"}})
	loaded, _, err := netconf.LoadNetConf(conf)
	g.Expect(err).NotTo(HaveOccurred())

	// What the earlier plugin left of a running VM: its record, whose IPAM
	// input names the network ("fp-test"), and host-local's file of .10 in
	// <dataDir>/fp-test (host-local's format: "<containerID>\r\n<ifname>").
	var legacyIn map[string]any
	g.Expect(json.Unmarshal(loaded.IPAMConf, &legacyIn)).To(Succeed())
	legacyIn["name"] = "fp-test"
	legacyIPAMConf, _ := json.Marshal(legacyIn)
	old := &attachment{netns: cnitest.NewNS(t), containerID: testutil.UniqueName("fpcid-"), ifName: "net1", conf: conf}
	store, err := state.New(e.stateDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(store.Save(&state.Attachment{ContainerID: old.containerID, IfName: old.ifName, Netns: old.netns.Path(), Network: "fp-test",
		Datapath: netconf.DatapathLinuxBridge, Bridge: e.br.Name, HostIfName: old.hostIf(), IPAMType: "host-local",
		NetConf: conf, IPAMConf: legacyIPAMConf, Complete: true})).To(Succeed())
	legacyDir := filepath.Join(e.ipamDir, "fp-test")
	g.Expect(os.MkdirAll(legacyDir, 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(legacyDir, "10.250.0.10"), []byte(old.containerID+"\r\n"+old.ifName), 0o600)).To(Succeed())

	netns := cnitest.NewNS(t)
	a, err := e.add(netns, conf, "")
	if a.result != nil {
		t.Cleanup(func() { _ = e.del(a, netns.Path()) })
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.ip()).To(Equal("10.250.0.11"), "the running VM's .10 is not handed out again")
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf("10.250.0.10", "10.250.0.11"))

	g.Expect(e.del(old, old.netns.Path())).To(Succeed())
	g.Expect(filepath.Join(legacyDir, "10.250.0.10")).NotTo(BeAnExistingFile())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf("10.250.0.11"), "the copy goes with the original")

	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}

// TestLegacyAttachmentCheckAndDel: CHECK and DEL of an attachment whose ADD
// (before one allocator per bridge) put its address in its network's own
// directory look for it there, where it still is, even when no ADD on the
// network has copied it into the bridge's directory since.
func TestLegacyAttachmentCheckAndDel(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{}))
	t.Cleanup(func() { _ = e.del(a, netns.Path()) })

	// Made legacy: the address moves to <dataDir>/fp-test and the record's
	// IPAM input names "fp-test", as the earlier plugin left them.
	shared := filepath.Join(e.ipamDir, netconf.IPAMNetworkName(e.br.Name))
	legacyDir := filepath.Join(e.ipamDir, "fp-test")
	g.Expect(os.MkdirAll(legacyDir, 0o700)).To(Succeed())
	g.Expect(os.Rename(filepath.Join(shared, a.ip()), filepath.Join(legacyDir, a.ip()))).To(Succeed())
	store, err := state.New(e.stateDir)
	g.Expect(err).NotTo(HaveOccurred())
	rec, err := store.Load(a.containerID, a.ifName)
	g.Expect(err).NotTo(HaveOccurred())
	var in map[string]any
	g.Expect(json.Unmarshal(rec.IPAMConf, &in)).To(Succeed())
	in["name"] = "fp-test"
	rec.IPAMConf, _ = json.Marshal(in)
	g.Expect(store.Save(rec)).To(Succeed())

	g.Expect(e.check(a)).To(Succeed(), "host-local finds the address where the ADD put it")
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	g.Expect(filepath.Join(legacyDir, a.ip())).NotTo(BeAnExistingFile())
	e.expectNothingLeft(g, netns)
}
