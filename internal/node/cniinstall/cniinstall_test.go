package cniinstall_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func sum(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestEnsureInstallsOnlyWhenContentDiffers(t *testing.T) {
	g := NewWithT(t)
	src := filepath.Join(t.TempDir(), "fastpath")
	writeFile(t, src, "#!/bin/sh\necho v1\n")
	binDir := filepath.Join(t.TempDir(), "opt", "cni", "bin") // missing: created
	inst := &cniinstall.Installer{Source: src, DestDir: binDir}
	dest := filepath.Join(binDir, "fastpath")

	res, err := inst.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(cniinstall.Result{Path: dest, SHA256: sum("#!/bin/sh\necho v1\n"), Installed: true}))
	g.Expect(res.String()).To(Equal(dest + " sha256:" + sum("#!/bin/sh\necho v1\n")))
	g.Expect(os.ReadFile(dest)).To(Equal([]byte("#!/bin/sh\necho v1\n")))
	fi, err := os.Stat(dest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o755)))
	ino := inode(t, dest)

	// Same content, also for a new Installer (agent restart): nothing written.
	for _, i := range []*cniinstall.Installer{inst, {Source: src, DestDir: binDir}} {
		res, err = i.Ensure()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Installed).To(BeFalse())
		g.Expect(inode(t, dest)).To(Equal(ino))
	}

	// A new agent image ships a new plugin: replaced by rename (new inode),
	// so a process executing the old binary is not disturbed.
	writeFile(t, src, "#!/bin/sh\necho v2\n")
	res, err = inst.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Installed).To(BeTrue())
	g.Expect(res.SHA256).To(Equal(sum("#!/bin/sh\necho v2\n")))
	g.Expect(os.ReadFile(dest)).To(Equal([]byte("#!/bin/sh\necho v2\n")))
	g.Expect(inode(t, dest)).NotTo(Equal(ino))

	// Someone overwrote the installed binary in place: restored.
	writeFile(t, dest, "tampered")
	res, err = inst.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Installed).To(BeTrue())
	g.Expect(os.ReadFile(dest)).To(Equal([]byte("#!/bin/sh\necho v2\n")))

	entries, err := os.ReadDir(binDir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "no temporary files left")
}

func TestEnsureRemovesTemporaryFilesOfAKilledAgent(t *testing.T) {
	g := NewWithT(t)
	src := filepath.Join(t.TempDir(), "fastpath")
	writeFile(t, src, "v1")
	binDir := t.TempDir()
	writeFile(t, filepath.Join(binDir, ".fastpath.tmp-123"), "half a bin")
	writeFile(t, filepath.Join(binDir, "host-local"), "another plugin")

	_, err := (&cniinstall.Installer{Source: src, DestDir: binDir}).Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	entries, err := os.ReadDir(binDir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		names = append(names, e.Name())
	}
	g.Expect(names).To(ConsistOf("fastpath", "host-local"))
}

func TestEnsureFailsWithoutSourceAndKeepsTheInstalledBinary(t *testing.T) {
	g := NewWithT(t)
	binDir := t.TempDir()
	writeFile(t, filepath.Join(binDir, "fastpath"), "old")
	_, err := (&cniinstall.Installer{Source: filepath.Join(t.TempDir(), "missing"), DestDir: binDir}).Ensure()
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the CNI binary to install")))
	g.Expect(os.ReadFile(filepath.Join(binDir, "fastpath"))).To(Equal([]byte("old")))
}

func TestEnsureKeepsTheNodeConfiguration(t *testing.T) {
	g := NewWithT(t)
	testutil.RequireRoot(t) // the plugin accepts only a root-owned node configuration
	src := filepath.Join(t.TempDir(), "fastpath")
	writeFile(t, src, "#!/bin/sh\n")
	conf := filepath.Join(t.TempDir(), "net.d", "fastpath.d", "node.json")
	want := netconf.NodeConfig{StateDir: "/var/lib/cni/fastpath", OVS: netconf.OVS{Socket: "unix:/run/openvswitch/db.sock"}}
	i := &cniinstall.Installer{Source: src, DestDir: t.TempDir(), NodeConfigPath: conf, NodeConfig: want}
	_, err := i.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	got, err := netconf.LoadNodeConfig(conf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	ino := inode(t, conf)

	_, err = i.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inode(t, conf)).To(Equal(ino), "not rewritten when unchanged")

	g.Expect(os.Chmod(conf, 0o666)).To(Succeed()) // someone loosened it
	_, err = i.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = netconf.LoadNodeConfig(conf)
	g.Expect(err).NotTo(HaveOccurred(), "rewritten in a form the plugin accepts")

	g.Expect(os.Remove(conf)).To(Succeed())
	_, err = i.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf).To(BeAnExistingFile())
}

// TestEnsureInstallsCompanionsFirst: the plugin hands OVS invocations over
// to a companion beside it, so the companion is installed (and updated)
// before the plugin, and a companion that cannot be read leaves the plugin
// as it was.
func TestEnsureInstallsCompanionsFirst(t *testing.T) {
	g := NewWithT(t)
	srcDir, binDir := t.TempDir(), t.TempDir()
	src := filepath.Join(srcDir, "fastpath")
	writeFile(t, src, "lean v1")
	writeFile(t, filepath.Join(srcDir, netconf.OVSPluginBinary), "ovs v1")
	inst := &cniinstall.Installer{Source: src, DestDir: binDir, Companions: []string{netconf.OVSPluginBinary}}

	res, err := inst.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(cniinstall.Result{Path: filepath.Join(binDir, "fastpath"), SHA256: sum("lean v1"), Installed: true}))
	g.Expect(os.ReadFile(filepath.Join(binDir, netconf.OVSPluginBinary))).To(Equal([]byte("ovs v1")))
	companionFirst := func() bool {
		p, _ := os.Stat(filepath.Join(binDir, "fastpath"))
		c, _ := os.Stat(filepath.Join(binDir, netconf.OVSPluginBinary))
		return !c.ModTime().After(p.ModTime())
	}
	g.Expect(companionFirst()).To(BeTrue())

	// Only the companion changed: the plugin stays, the companion is replaced.
	writeFile(t, filepath.Join(srcDir, netconf.OVSPluginBinary), "ovs v2")
	res, err = inst.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Installed).To(BeFalse())
	g.Expect(os.ReadFile(filepath.Join(binDir, netconf.OVSPluginBinary))).To(Equal([]byte("ovs v2")))

	// The companion is gone from the image: the new plugin is not installed.
	g.Expect(os.Remove(filepath.Join(srcDir, netconf.OVSPluginBinary))).To(Succeed())
	writeFile(t, src, "lean v2")
	_, err = inst.Ensure()
	g.Expect(err).To(MatchError(ContainSubstring("failed to read the CNI binary to install " + filepath.Join(srcDir, netconf.OVSPluginBinary))))
	g.Expect(os.ReadFile(filepath.Join(binDir, "fastpath"))).To(Equal([]byte("lean v1")))
}

// TestVerifyOnlyWritesNothing: the long-running agent, which mounts the CNI
// directories read-only, only checks what the install-cni init container
// installed and says what to do when it differs.
func TestVerifyOnlyWritesNothing(t *testing.T) {
	g := NewWithT(t)
	testutil.RequireRoot(t) // the plugin accepts only a root-owned node configuration
	src := filepath.Join(t.TempDir(), "fastpath")
	writeFile(t, src, "#!/bin/sh\necho v2\n")
	binDir := t.TempDir()
	dest := filepath.Join(binDir, "fastpath")
	conf := filepath.Join(t.TempDir(), "fastpath.d", "node.json")
	want := netconf.NodeConfig{StateDir: "/var/lib/cni/fastpath", OVS: netconf.OVS{Socket: "unix:/run/openvswitch/db.sock"}}
	verify := &cniinstall.Installer{Source: src, DestDir: binDir, NodeConfigPath: conf, NodeConfig: want, VerifyOnly: true}

	_, err := verify.Ensure()
	g.Expect(err).To(MatchError(And(ContainSubstring("the installed CNI binary "+dest+" is missing"), ContainSubstring("restart the agent pod"))))
	g.Expect(dest).NotTo(BeAnExistingFile(), "nothing written")

	writeFile(t, dest, "#!/bin/sh\necho v1\n")
	_, err = verify.Ensure()
	g.Expect(err).To(MatchError(ContainSubstring("is sha256:" + sum("#!/bin/sh\necho v1\n") + ", not this agent's sha256:" + sum("#!/bin/sh\necho v2\n"))))
	g.Expect(os.ReadFile(dest)).To(Equal([]byte("#!/bin/sh\necho v1\n")), "the installed binary is left as it is")

	// What the init container does; then verification passes.
	_, err = (&cniinstall.Installer{Source: src, DestDir: binDir, NodeConfigPath: conf, NodeConfig: want}).Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	res, err := verify.Ensure()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Installed).To(BeFalse())

	other := &cniinstall.Installer{Source: src, DestDir: binDir, NodeConfigPath: conf, NodeConfig: want, VerifyOnly: true}
	other.NodeConfig.StateDir = "/elsewhere"
	_, err = other.Ensure()
	g.Expect(err).To(MatchError(ContainSubstring("the CNI node configuration " + conf + " is missing or differs")))
	got, err := netconf.LoadNodeConfig(conf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the node configuration is left as it is")
}
