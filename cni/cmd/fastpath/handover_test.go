package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestImportsNoOVSDB: bin/fastpath, which the runtime executes for every
// ADD, must not link the OVS datapath: libovsdb brings prometheus,
// protobuf, klog and apimachinery, whose initialisation runs on every exec
// (package datapath says what it cost).
func TestImportsNoOVSDB(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-deps", cnitest.PluginPackage).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"github.com/ovn-org/libovsdb", "github.com/prometheus/", "google.golang.org/protobuf",
			"k8s.io/", "github.com/fastpath-io/fastpath/internal/datapath/ovsdb", "github.com/fastpath-io/fastpath/cni/pkg/ovs"} {
			g.Expect(dep).NotTo(HavePrefix(heavy), "%s imports %s", cnitest.PluginPackage, dep)
		}
	}
}

// TestOVSHandOver: bin/fastpath hands every invocation that needs OVSDB
// over to fastpath-ovs-plugin beside it: a netconf of datapath OVS (the
// other tests of this package run OVS through bin/fastpath that way), and
// a DEL or GC that finds an attachment recorded on OVS under a netconf that
// now says LinuxBridge (a network whose datapath changed), and an ADD that
// must first reclaim what an unfinished ADD on OVS left. Without
// fastpath-ovs-plugin an OVS ADD fails naming it and leaves nothing behind,
// while LinuxBridge works.
func TestOVSHandOver(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)

	// moved adds an attachment on OVS and returns it with a LinuxBridge
	// netconf of the same network, state and IPAM directories.
	moved := func(t *testing.T, g *WithT, version string) (ovsBr *cnitest.Bridge, inv invocation, lbConf []byte, stateDir, ipamDir string) {
		ovsBr = cnitest.NewBridge(t, netconf.DatapathOVS, 9000)
		lbBr := cnitest.NewBridge(t, netconf.DatapathLinuxBridge, 9000)
		stateDir = t.TempDir()
		ipamDir = netconf.IPAMDataDir(stateDir)
		ovsConf := ovsBr.NetConf(t, cnitest.Conf{CNIVersion: version, StateDir: stateDir})
		netns := cnitest.NewNS(t)
		inv = invocation{command: "ADD", containerID: containerID(), netns: netns.Path(), ifName: "net1", cniPath: bins.CNIPath(version), conf: ovsConf}
		_, err := inv.run()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ovsBr.Ports(t)).To(HaveLen(1))
		// The node configuration now names no OVSDB endpoint: the record's counts.
		lbConf = lbBr.NetConf(t, cnitest.Conf{CNIVersion: version, StateDir: stateDir})
		return ovsBr, inv, lbConf, stateDir, ipamDir
	}

	t.Run("del-of-attachment-recorded-on-ovs", func(t *testing.T) {
		g := NewWithT(t)
		ovsBr, inv, lbConf, stateDir, ipamDir := moved(t, g, "1.0.0")
		inv.command, inv.conf = "DEL", lbConf
		_, err := inv.run()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ovsBr.Ports(t)).To(BeEmpty(), "the OVS port is removed")
		g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
		g.Expect(cnitest.Allocations(t, ipamDir, ovsBr.Name)).To(BeEmpty())
	})

	t.Run("gc-of-attachment-recorded-on-ovs", func(t *testing.T) {
		g := NewWithT(t)
		ovsBr, _, lbConf, stateDir, ipamDir := moved(t, g, "1.1.0")
		_, err := invocation{command: "GC", cniPath: bins.CNIPath("1.1.0"), conf: lbConf}.run()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ovsBr.Ports(t)).To(BeEmpty(), "the OVS port is removed")
		g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
		g.Expect(cnitest.Allocations(t, ipamDir, ovsBr.Name)).To(BeEmpty())
	})

	t.Run("add-reclaiming-an-unfinished-add-on-ovs", func(t *testing.T) {
		g := NewWithT(t)
		ovsBr := cnitest.NewBridge(t, netconf.DatapathOVS, 9000)
		lbBr := cnitest.NewBridge(t, netconf.DatapathLinuxBridge, 9000)
		stateDir := t.TempDir()
		ipamDir := netconf.IPAMDataDir(stateDir)
		ovsConf := ovsBr.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
		netns := cnitest.NewNS(t)
		cid := containerID()
		// What an ADD on OVS killed right after recording the attachment leaves.
		store, err := state.New(stateDir)
		g.Expect(err).NotTo(HaveOccurred())
		loaded, _, err := netconf.LoadNetConf(ovsConf)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(store.Save(&state.Attachment{ContainerID: cid, IfName: "net1", Netns: netns.Path(), Network: "fp-test",
			Datapath: netconf.DatapathOVS, Bridge: ovsBr.Name, OVSSocket: ovsBr.OVSSocket, HostIfName: plugin.HostIfName(cid, "net1"),
			IPAMType: "host-local", NetConf: ovsConf, IPAMConf: loaded.IPAMConf})).To(Succeed())
		lbConf := lbBr.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
		inv := invocation{command: "ADD", containerID: cid, netns: netns.Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: lbConf}
		_, err = inv.run()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lbBr.Ports(t)).To(ConsistOf(plugin.HostIfName(cid, "net1")))
		g.Expect(ovsBr.Ports(t)).To(BeEmpty())
		inv.command = "DEL"
		_, err = inv.run()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
		g.Expect(cnitest.Allocations(t, ipamDir, ovsBr.Name)).To(BeEmpty())
		g.Expect(cnitest.Allocations(t, ipamDir, lbBr.Name)).To(BeEmpty())
	})

	t.Run("without-ovs-plugin", func(t *testing.T) {
		g := NewWithT(t)
		alone := filepath.Join(t.TempDir(), wellknown.PluginType)
		copyFile(t, bins.Plugin(), alone)
		for _, datapath := range []string{netconf.DatapathOVS, netconf.DatapathLinuxBridge} {
			br := cnitest.NewBridge(t, datapath, 9000)
			stateDir := t.TempDir()
			conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
			netns := cnitest.NewNS(t)
			inv := invocation{command: "ADD", containerID: containerID(), netns: netns.Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: conf}
			_, err := inv.runBinary(alone)
			if datapath == netconf.DatapathOVS {
				g.Expect(err).To(HaveOccurred())
				g.Expect(err.Error()).To(ContainSubstring(`\"code\": 999`))
				g.Expect(err.Error()).To(ContainSubstring(filepath.Join(filepath.Dir(alone), cnitest.OVSPluginName)))
				g.Expect(br.Ports(t)).To(BeEmpty())
				g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
				g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo"))
				continue
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(br.Ports(t)).To(HaveLen(1))
			inv.command = "DEL"
			_, err = inv.runBinary(alone)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(br.Ports(t)).To(BeEmpty())
		}
	})
}

// TestOVSPluginServesBothDatapaths: fastpath-ovs-plugin run directly is the
// whole plugin.
func TestOVSPluginServesBothDatapaths(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	for _, datapath := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
		t.Run(datapath, func(t *testing.T) {
			g := NewWithT(t)
			br := cnitest.NewBridge(t, datapath, 9000)
			stateDir := t.TempDir()
			conf := br.NetConf(t, cnitest.Conf{CNIVersion: "1.0.0", StateDir: stateDir})
			inv := invocation{command: "ADD", containerID: containerID(), netns: cnitest.NewNS(t).Path(), ifName: "net1", cniPath: cnitest.SystemCNIPath, conf: conf}
			_, err := inv.runBinary(bins.OVSPlugin())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(br.Ports(t)).To(HaveLen(1))
			inv.command = "DEL"
			_, err = inv.runBinary(bins.OVSPlugin())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(br.Ports(t)).To(BeEmpty())
			g.Expect(cnitest.StateFiles(t, stateDir)).To(BeEmpty())
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
