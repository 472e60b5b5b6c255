package cnitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// SystemCNIPath holds Debian's containernetworking-plugins (host-local,
// static, ...). Debian bookworm ships plugins v1.1.1, which speak CNI up to
// 1.0.0 only.
const SystemCNIPath = "/usr/lib/cni"

// Package paths of the binaries Build compiles.
const (
	PluginPackage    = "github.com/fastpath-io/fastpath/cni/cmd/fastpath"
	OVSPluginPackage = "github.com/fastpath-io/fastpath/cni/cmd/fastpath-ovs-plugin"
	HostLocalPackage = "github.com/containernetworking/plugins/plugins/ipam/host-local"
)

// OVSPluginName is the binary bin/fastpath hands OVS invocations over to,
// beside itself.
const OVSPluginName = netconf.OVSPluginBinary

// BuildFlags build the binaries as the container image ships them
// (Dockerfile): static (no cgo), without paths or symbol tables. A cgo
// build is dynamically linked, and the loader and libc start-up add CPU to
// each plugin execution (docs/design.md §4.3): tests and benchmarks run
// what ships.
var BuildFlags = []string{"-trimpath", "-ldflags", "-s -w"}

// Subnet is the node-local subnet the tests' netconfs give host-local.
const Subnet = "10.250.0.0/24"

// Binaries are the executables a test binary built for itself.
type Binaries struct {
	// Dir holds the fastpath plugin (fastpath and fastpath-ovs-plugin, when
	// built) and host-local v1.9.1.
	Dir string
}

// Main is the body of a test package's TestMain: it builds the binaries
// (Build with withPlugin) into *bins, runs the tests, removes the binaries
// and returns the exit code for os.Exit. A failed build prints why and
// returns 1 without running any test.
func Main(m *testing.M, withPlugin bool, bins **Binaries) int {
	b, err := Build(withPlugin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*bins = b
	defer os.RemoveAll(b.Dir)
	// The plugin's ADDs on a Linux bridge make the node's port security
	// table (cni/pkg/portsec); DEL leaves it, as on a node. Removed again when
	// this run made it and no port of anyone is in it.
	hadTable := exec.Command("nft", "list", "table", "bridge", portsec.TableName).Run() == nil
	defer func() {
		if hadTable {
			return
		}
		out, err := exec.Command("nft", "list", "map", "bridge", portsec.TableName, "ports").CombinedOutput()
		if err == nil && !strings.Contains(string(out), "elements") {
			_ = exec.Command("nft", "delete", "table", "bridge", portsec.TableName).Run()
		}
	}()
	return m.Run()
}

// Build compiles host-local from containernetworking/plugins v1.9.1 (the
// version in go.mod, which speaks CNI 1.1.0; a tool of go.mod, so that its
// dependencies stay in go.sum through go mod tidy) and, when withPlugin is true,
// the fastpath plugin (fastpath and fastpath-ovs-plugin) into a new
// temporary directory, with BuildFlags and CGO_ENABLED=0. Call it from
// TestMain; remove Dir when done.
func Build(withPlugin bool) (*Binaries, error) {
	dir, err := os.MkdirTemp("", "fastpath-cni-bin-")
	if err != nil {
		return nil, fmt.Errorf("failed to create binary directory: %w", err)
	}
	pkgs := map[string]string{"host-local": HostLocalPackage}
	if withPlugin {
		pkgs[wellknown.PluginType] = PluginPackage
		pkgs[OVSPluginName] = OVSPluginPackage
	}
	for name, pkg := range pkgs {
		cmd := exec.Command("go", append(append([]string{"build"}, BuildFlags...), "-o", filepath.Join(dir, name), pkg)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("failed to build %s: %w: %s", pkg, err, out)
		}
	}
	return &Binaries{Dir: dir}, nil
}

// Plugin returns the path of the built fastpath binary.
func (b *Binaries) Plugin() string { return filepath.Join(b.Dir, wellknown.PluginType) }

// OVSPlugin returns the path of the built fastpath-ovs-plugin binary.
func (b *Binaries) OVSPlugin() string { return filepath.Join(b.Dir, OVSPluginName) }

// CNIPath returns the CNI_PATH for a netconf of cniVersion: Debian's plugins
// first for versions they speak, the host-local built by Build first for
// 1.1.0. extra directories (e.g. one with a failing IPAM script) come first.
func (b *Binaries) CNIPath(cniVersion string, extra ...string) string {
	dirs := append([]string{}, extra...)
	if cniVersion == "1.1.0" {
		dirs = append(dirs, b.Dir, SystemCNIPath)
	} else {
		dirs = append(dirs, SystemCNIPath, b.Dir)
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// BridgeMarker is the alias NewBridge gives a Linux bridge: the node agent's
// marker (internal/datapath/wellknown.MarkerKey) with a test value.
const BridgeMarker = "fastpath.io/managed-by=cnitest"

// Bridge is a node bridge made for one test.
type Bridge struct {
	Datapath  string
	Name      string
	OVSSocket string // OVSDB endpoint, OVS only
}

// NewBridge makes a bridge of the datapath with mtu bytes, marked as the node
// agent's: a Linux bridge (set up, like the node agent leaves it), an OVS bridge with the
// userspace datapath (testutil.StartOVS must have been called for OVS) or a
// macvtap lower device made by the node agent's bridge.Manager. It is
// deleted at cleanup.
func NewBridge(tb testing.TB, datapath string, mtu int) *Bridge {
	tb.Helper()
	switch datapath {
	case netconf.DatapathLinuxBridge:
		name := testutil.UniqueName("fpcb")
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
		if err := netlink.LinkAdd(br); err != nil {
			tb.Fatalf("failed to add bridge %s: %v", name, err)
		}
		tb.Cleanup(func() {
			if err := netlink.LinkDel(br); err != nil {
				tb.Errorf("failed to delete bridge %s: %v", name, err)
			}
		})
		// Set the MTU after creation, as the node agent must: an MTU given
		// only at creation is not marked as set by the user, and the kernel
		// puts the bridge back to 1500 when its last port leaves.
		if err := netlink.LinkSetMTU(br, mtu); err != nil {
			tb.Fatalf("failed to set MTU %d on bridge %s: %v", mtu, name, err)
		}
		if err := netlink.LinkSetUp(br); err != nil {
			tb.Fatalf("failed to set bridge %s up: %v", name, err)
		}
		// Marked as the node agent marks its bridges: the plugin attaches
		// only to those.
		if err := netlink.LinkSetAlias(br, BridgeMarker); err != nil {
			tb.Fatalf("failed to mark bridge %s: %v", name, err)
		}
		return &Bridge{Datapath: datapath, Name: name}
	case netconf.DatapathOVS:
		name := testutil.UniqueName("fpco")
		testutil.AddOVSBridge(tb, testutil.OVSSocket, name, mtu)
		return &Bridge{Datapath: datapath, Name: name, OVSSocket: testutil.OVSSocket}
	case netconf.DatapathMacvtap:
		// The macvtap lower device as the node agent makes it, by the
		// agent's own code (a marked veth pair, all offloads on, up).
		name := testutil.UniqueName("fpcm")
		m := &bridge.Manager{Marker: strings.TrimPrefix(BridgeMarker, wellknown.MarkerKey+"=")}
		tb.Cleanup(func() {
			if l, err := netlink.LinkByName(name); err == nil {
				if err := netlink.LinkDel(l); err != nil {
					tb.Errorf("failed to delete macvtap lower device %s: %v", name, err)
				}
			}
		})
		if _, err := m.Ensure(context.Background(), bridge.Spec{Name: name, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: mtu}); err != nil {
			tb.Fatalf("failed to make macvtap lower device %s: %v", name, err)
		}
		return &Bridge{Datapath: datapath, Name: name}
	}
	tb.Fatalf("unknown datapath %q", datapath)
	return nil
}

// Ports returns the names of the bridge's ports, except an OVS bridge's
// internal port; none for a macvtap lower device (its macvtaps are in the
// pods' namespaces).
func (b *Bridge) Ports(tb testing.TB) []string {
	tb.Helper()
	if b.Datapath == netconf.DatapathMacvtap {
		return nil
	}
	if b.Datapath == netconf.DatapathOVS {
		out, err := exec.Command("ovs-vsctl", "--db="+b.OVSSocket, "list-ports", b.Name).CombinedOutput()
		if err != nil {
			tb.Fatalf("failed to list ports of %s: %v: %s", b.Name, err, out)
		}
		return strings.Fields(string(out))
	}
	br, err := netlink.LinkByName(b.Name)
	if err != nil {
		tb.Fatalf("failed to look up bridge %s: %v", b.Name, err)
	}
	links, err := netlinksafe.LinkList()
	if err != nil {
		tb.Fatalf("failed to list links: %v", err)
	}
	var names []string
	for _, l := range links {
		if l.Attrs().MasterIndex == br.Attrs().Index {
			names = append(names, l.Attrs().Name)
		}
	}
	return names
}

// Namespace is the namespace NetConf renders by default, and PodArgs the
// CNI_ARGS of a pod in it (what kubelet passes through Multus).
const (
	Namespace = "fp-test-ns"
	PodArgs   = "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + Namespace + ";K8S_POD_NAME=fp-test-pod"
)

// Conf is the input of NetConf.
type Conf struct {
	CNIVersion  string
	Name        string // network name; default "fp-test"
	Namespace   string // the netconf's namespace; default Namespace
	NoNamespace bool   // render no namespace at all
	MTU         int    // default 9000
	StateDir    string
	IPAM        map[string]any // replaces the host-local IPAM section when set
	Offloads    map[string]bool
	Extra       map[string]any // more top-level keys (runtimeConfig, prevResult, ...)
}

// NetConf renders a fastpath netconf for bridge b, and writes c.StateDir and
// b.OVSSocket into a node configuration that $FASTPATH_NODE_CONFIG names for
// the rest of the test (tb.Setenv: not for parallel tests).
func (b *Bridge) NetConf(tb testing.TB, c Conf) []byte {
	tb.Helper()
	if c.Name == "" {
		c.Name = "fp-test"
	}
	if c.MTU == 0 {
		c.MTU = 9000
	}
	ipam := c.IPAM
	if ipam == nil {
		ipam = map[string]any{"type": "host-local", "subnet": Subnet}
	}
	m := map[string]any{
		"cniVersion": c.CNIVersion, "name": c.Name, "type": wellknown.PluginType,
		"datapath": b.Datapath, "bridge": b.Name, "mtu": c.MTU, "ipam": ipam,
	}
	switch {
	case c.NoNamespace:
	case c.Namespace != "":
		m["namespace"] = c.Namespace
	default:
		m["namespace"] = Namespace
	}
	// The state directory and the OVSDB endpoint come from the node
	// configuration, as on a node: written for the test and named by
	// $FASTPATH_NODE_CONFIG (inherited by plugin processes the test runs).
	if c.StateDir != "" || b.OVSSocket != "" {
		nc := netconf.NodeConfig{StateDir: c.StateDir, OVS: netconf.OVS{Socket: b.OVSSocket}}
		path := filepath.Join(tb.TempDir(), "node.json")
		if err := netconf.WriteNodeConfig(path, nc); err != nil {
			tb.Fatalf("failed to write the node configuration: %v", err)
		}
		tb.Setenv(netconf.NodeConfigEnv, path)
	}
	if c.Offloads != nil {
		m["offloads"] = c.Offloads
	}
	for k, v := range c.Extra {
		m[k] = v
	}
	data, err := json.Marshal(m)
	if err != nil {
		tb.Fatalf("failed to encode netconf: %v", err)
	}
	return data
}

// NewNS makes a network namespace (bind-mounted under /var/run/netns) that
// is closed and unmounted at cleanup unless the test already did.
func NewNS(tb testing.TB) ns.NetNS {
	tb.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		tb.Fatalf("failed to create netns: %v", err)
	}
	tb.Cleanup(func() { RemoveNS(netns) })
	return netns
}

// RemoveNS closes and unmounts netns; doing it twice is harmless.
func RemoveNS(netns ns.NetNS) {
	_ = netns.Close()
	_ = testutils.UnmountNS(netns)
}

// NSName is the name `ip netns` knows netns by.
func NSName(netns ns.NetNS) string { return filepath.Base(netns.Path()) }

// Links returns the names of the links in netns (with "lo").
func Links(tb testing.TB, netns ns.NetNS) []string {
	tb.Helper()
	var names []string
	err := netns.Do(func(ns.NetNS) error {
		links, err := netlinksafe.LinkList()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		tb.Fatalf("failed to list links of %s: %v", netns.Path(), err)
	}
	return names
}

// LinkExists reports whether the host network namespace has a link name.
func LinkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

// Allocations returns the addresses host-local holds in dataDir (the
// plugin's is netconf.IPAMDataDir of the node's state directory) for the
// attachments on bridge, which share one directory,
// netconf.IPAMNetworkName(bridge) (its files named by IP; "lock" and
// "last_reserved_ip.*" are not allocations).
func Allocations(tb testing.TB, dataDir, bridge string) []string {
	tb.Helper()
	network := netconf.IPAMNetworkName(bridge)
	entries, err := os.ReadDir(filepath.Join(dataDir, network))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatalf("failed to read host-local data of %s: %v", network, err)
	}
	var ips []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			ips = append(ips, e.Name())
		}
	}
	return ips
}

// StateFiles returns the attachment files in a fastpath state directory.
func StateFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		tb.Fatalf("failed to list %s: %v", dir, err)
	}
	return files
}

// Exec runs the fastpath binary like a runtime does: env holds the CNI_*
// variables, stdin the netconf. It returns stdout and stderr separately and
// the exit error.
func Exec(ctx context.Context, binary string, env []string, stdin []byte) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(string(stdin))
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return []byte(o.String()), []byte(e.String()), err
}
