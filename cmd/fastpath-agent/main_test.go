package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

func TestParseTransport(t *testing.T) {
	g := NewWithT(t)

	tr, root, err := parseTransport("vsock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr).To(Equal(vsock.AFVSockTransport{}))
	g.Expect(root).To(BeEmpty())
	tr, _, err = RelayOptions{Transport: "vsock", VsockBufferSize: 1 << 20}.transport()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tr).To(Equal(vsock.AFVSockTransport{BufferSize: 1 << 20}), "--relay-vsock-buffer-size")

	dir := t.TempDir()
	tr, root, err = parseTransport("unix:" + dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(root).To(Equal(dir))
	g.Expect(tr).To(Equal(vsock.NewUnixTransport(dir, vsock.HostCID)))

	tr, root, err = parseTransport("unix:relative/dir")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.IsAbs(root)).To(BeTrue())
	g.Expect(tr.(*vsock.UnixTransport).Root).To(Equal(root))

	for _, bad := range []string{"", "unix:", "tcp:1.2.3.4:5", "VSOCK"} {
		_, _, err := parseTransport(bad)
		g.Expect(err).To(MatchError(ContainSubstring("must be \"vsock\" or \"unix:<dir>\"")), bad)
	}
}

// TestRunRejectsBadFlagsBeforeConnecting: run validates the options before
// it loads a kubeconfig (there is none here).
func TestRunRejectsBadFlagsBeforeConnecting(t *testing.T) {
	g := NewWithT(t)
	o := todaysDefaults
	o.NodeName = ""
	g.Expect(run(o)).To(MatchError("failed to start: --node-name (or $NODE_NAME) is required"))
	o = todaysDefaults
	o.DevicePlugins.MacvtapDevices = 0
	g.Expect(run(o)).To(MatchError("failed to start: --macvtap-devices 0 is out of range: must be 1-8192"))
}

// TestRelayOptionsFollowTheMemoryLimit: limits left at 0 come from the
// memory limit; a limit given by flag stays.
func TestRelayOptionsFollowTheMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	derived := relayOptions(relay.Options{MaxConnsPerCID: 7}, 128<<20)
	g.Expect(derived).To(And(HaveField("MaxTotalConns", 1024), HaveField("MaxConnsPerNamespace", 256),
		HaveField("BufferBudget", int64(32<<20)), HaveField("MaxConnsPerCID", 7)))
	set := relayOptions(relay.Options{MaxTotalConns: 10, MaxConnsPerNamespace: 5, BufferBudget: -1}, 128<<20)
	g.Expect(set).To(And(HaveField("MaxTotalConns", 10), HaveField("MaxConnsPerNamespace", 5), HaveField("BufferBudget", int64(-1))))
}

// TestInstallCNIInstallsAndExits: --install-cni (the chart's init container)
// needs no node name or API server; it installs the plugin and its
// companion and returns.
func TestInstallCNIInstallsAndExits(t *testing.T) {
	g := NewWithT(t)
	src := t.TempDir()
	for _, name := range []string{"fastpath", "fastpath-ovs-plugin"} {
		g.Expect(os.WriteFile(filepath.Join(src, name), []byte("#!/bin/sh\n"+name+"\n"), 0o755)).To(Succeed())
	}
	dest := t.TempDir()
	g.Expect(run(Options{CNI: CNIOptions{Install: true, BinSource: filepath.Join(src, "fastpath"), BinDir: dest}})).To(Succeed())
	g.Expect(filepath.Join(dest, "fastpath")).To(BeAnExistingFile())
	g.Expect(filepath.Join(dest, "fastpath-ovs-plugin")).To(BeAnExistingFile())
	verify := todaysDefaults
	verify.CNI = CNIOptions{VerifyOnly: true, BinSource: filepath.Join(src, "fastpath"), BinDir: dest}
	verify.Datapath.OVSDatapathType = "dpdk"
	g.Expect(run(verify)).
		To(MatchError(ContainSubstring("--ovs-datapath-type")), "the long-running agent still checks its flags first")
}

// TestCleanupWithInstallCNIRemovesThePlugin: --install-cni --cleanup (the
// install-cni init container during the uninstall) removes the binaries it
// installed, the node configuration and what the state directory holds,
// keeps the directory (a mount point) and the other plugins, and succeeds
// again when there is nothing left.
func TestCleanupWithInstallCNIRemovesThePlugin(t *testing.T) {
	g := NewWithT(t)
	src := t.TempDir()
	for _, name := range []string{"fastpath", "fastpath-ovs-plugin"} {
		g.Expect(os.WriteFile(filepath.Join(src, name), []byte("#!/bin/sh\n"+name+"\n"), 0o755)).To(Succeed())
	}
	dest, conf, state := t.TempDir(), t.TempDir(), t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dest, "bridge"), []byte("another plugin"), 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(state, "leases"), 0o755)).To(Succeed())
	cni := CNIOptions{Install: true, BinSource: filepath.Join(src, "fastpath"), BinDir: dest, NodeConfig: filepath.Join(conf, "node.json"), StateDir: state}
	g.Expect(run(Options{CNI: cni})).To(Succeed())
	g.Expect(filepath.Join(conf, "node.json")).To(BeAnExistingFile())

	for range 2 {
		g.Expect(run(Options{Cleanup: true, CNI: cni})).To(Succeed())
		entries, err := os.ReadDir(dest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(ConsistOf(HaveField("Name()", "bridge")))
		g.Expect(filepath.Join(conf, "node.json")).NotTo(BeAnExistingFile())
		g.Expect(os.ReadDir(state)).To(BeEmpty())
	}
}
