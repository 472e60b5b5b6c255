package cluster

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	o, err := Options{Dir: "/tmp/fpc", BinDir: "/tmp/bin", NodeName: "node-a", NodeIP: netip.MustParseAddr("192.0.2.10")}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestContainerdConfigKeepsEverythingUnderDirAndItsRunDir(t *testing.T) {
	g := NewWithT(t)
	o := testOptions(t)
	run := o.layout().run
	g.Expect(run).To(HavePrefix(runstate.RunRoot + "/cluster-"))
	c := o.containerdConfig()
	for _, want := range []string{
		`root = "/tmp/fpc/containerd/root"`, `state = "` + run + `/containerd"`,
		`address = "` + run + `/containerd.sock"`, `restrict_oom_score_adj = true`,
		`snapshotter = "overlayfs"`, `SystemdCgroup = false`, `Root = "` + run + `/runc"`,
		`sandbox_image = "localhost/pause:local"`, `bin_dir = "/tmp/fpc/cni/bin"`, `conf_dir = "/tmp/fpc/cni/net.d"`,
		`"io.containerd.internal.v1.opt"`,
	} {
		g.Expect(c).To(ContainSubstring(want))
	}
}

func TestKubeletConfig(t *testing.T) {
	g := NewWithT(t)
	b, err := testOptions(t).kubeletConfig()
	g.Expect(err).NotTo(HaveOccurred())
	var c kubeletv1beta1.KubeletConfiguration
	g.Expect(yaml.UnmarshalStrict(b, &c)).To(Succeed())
	g.Expect(c.Kind).To(Equal("KubeletConfiguration"))
	g.Expect(c.CgroupDriver).To(Equal("cgroupfs"))
	g.Expect(c.CgroupRoot).To(Equal(CgroupRoot))
	g.Expect(*c.FailSwapOn).To(BeFalse())
	g.Expect(*c.OOMScoreAdj).To(BeEquivalentTo(0), "lowering it needs CAP_SYS_RESOURCE")
	g.Expect(*c.ImageGCHighThresholdPercent).To(BeEquivalentTo(100), "no image can be pulled back")
	g.Expect(c.ContainerRuntimeEndpoint).To(Equal("unix://" + testOptions(t).layout().containerdSock))
	for _, p := range []string{c.PodLogsDir, c.TLSCertFile, c.Authentication.X509.ClientCAFile} {
		g.Expect(p).To(HavePrefix("/tmp/fpc/"))
	}
	g.Expect(c.VolumePluginDir).To(HavePrefix(testOptions(t).layout().kubeletRoot+"/"), "under the kubelet's root, in the run directory")
}

func TestCNIConfigs(t *testing.T) {
	g := NewWithT(t)
	o := testOptions(t)
	b, err := o.podNetworkConf()
	g.Expect(err).NotTo(HaveOccurred())
	var pn map[string]any
	g.Expect(json.Unmarshal(b, &pn)).To(Succeed())
	g.Expect(pn).To(And(HaveKeyWithValue("type", "bridge"), HaveKeyWithValue("bridge", PodBridge), HaveKeyWithValue("mtu", BeNumerically("==", 1500)),
		HaveKeyWithValue("name", PodNetworkName), Not(HaveKey("plugins"))))
	g.Expect(pn["ipam"]).To(And(HaveKeyWithValue("type", "host-local"), HaveKeyWithValue("dataDir", "/tmp/fpc/cni/ipam")))

	b, err = o.multusConf()
	g.Expect(err).NotTo(HaveOccurred())
	var mc map[string]any
	g.Expect(json.Unmarshal(b, &mc)).To(Succeed())
	g.Expect(mc).To(And(HaveKeyWithValue("type", "multus"), HaveKeyWithValue("binDir", "/tmp/fpc/cni/bin"),
		HaveKeyWithValue("cniDir", "/tmp/fpc/cni/multus"), HaveKeyWithValue("clusterNetwork", "/tmp/fpc/cni/net.d/"+podNetworkFile),
		HaveKeyWithValue("kubeconfig", "/tmp/fpc/kubeconfigs/multus.kubeconfig")))
	g.Expect(NodeConfigPath("/tmp/fpc")).To(Equal("/tmp/fpc/cni/net.d/fastpath.d/node.json"))
}

func TestOptionsErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"no dir":  {Options{BinDir: "/b"}, "Dir and BinDir are required"},
		"overlap": {Options{Dir: "/d", BinDir: "/b", NodeIP: netip.MustParseAddr("192.0.2.1"), PodCIDR: netip.MustParsePrefix("10.96.0.0/16")}, "overlaps ServiceCIDR"},
		"narrow":  {Options{Dir: "/d", BinDir: "/b", NodeIP: netip.MustParseAddr("192.0.2.1"), PodCIDR: netip.MustParsePrefix("10.1.1.0/28")}, "/24 or wider"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.o.withDefaults()
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestDeepDirKeepsSocketsShort: a cluster directory of any depth (a clone
// under a long home directory) keeps its UNIX sockets in the short run
// directory, so they can be bound.
func TestDeepDirKeepsSocketsShort(t *testing.T) {
	g := NewWithT(t)
	o, err := Options{Dir: "/" + strings.Repeat("d", 120), BinDir: "/b", NodeIP: netip.MustParseAddr("192.0.2.1")}.withDefaults()
	g.Expect(err).NotTo(HaveOccurred())
	l := o.layout()
	for _, sock := range []string{l.containerdSock, l.kubeletPodResourcesSock()} {
		g.Expect(sock).To(HavePrefix(runstate.RunRoot + "/cluster-"))
		g.Expect(runstate.CheckSocketPath(sock)).To(Succeed())
	}
	g.Expect(l.adminKubeconfig).To(HavePrefix(o.Dir), "files that hold no socket stay in Dir")
}

// TestMultusVersionIsPinned checks that MultusVersion is the version
// hack/multus/go.mod pins (what hack/setup.sh builds into bin/multus).
func TestMultusVersionIsPinned(t *testing.T) {
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(filepath.Join(root, "hack", "multus", "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(MatchRegexp(`(?m)^require ` + MultusModule + ` ` + MultusVersion + `$`))
}

func TestMultusObjects(t *testing.T) {
	g := NewWithT(t)
	path, err := MultusManifest(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	f, err := os.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	objs, err := multusObjects(f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(2))
	g.Expect(objs[0].GetKind() + "/" + objs[0].GetName()).To(Equal("CustomResourceDefinition/network-attachment-definitions.k8s.cni.cncf.io"))
	g.Expect(objs[1].GetKind() + "/" + objs[1].GetName()).To(Equal("ClusterRole/multus"))
}
