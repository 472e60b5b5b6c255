package localbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/offload"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// CNIVersion of the generated netconfs: the newest version Debian's
// host-local (containernetworking-plugins 1.1.1) speaks.
const CNIVersion = "1.0.0"

// PodIfName is the fast-path interface in an endpoint namespace, as Multus
// names a pod's first secondary network.
const PodIfName = "net1"

// BridgeMarker marks the bridges the benchmark makes (bridge.Manager.Marker).
const BridgeMarker = "fastpath-bench-local"

// cniRunner executes the fastpath CNI binary the way a runtime does, through
// libcni (as the emulation's Multus does): the netconf's "type" is looked up
// in a directory holding only a link to the binary, then in the IPAM
// plugins' directories, which libcni also passes as CNI_PATH; results are
// cached for DEL under the run's temporary directory.
type cniRunner struct {
	plugin string
	cni    *libcni.CNIConfig
}

// newCNIRunner links plugin as <dir>/bin/fastpath (wellknown.PluginType) and
// returns a runner that finds it there and the IPAM plugins in cniPath.
func newCNIRunner(plugin string, cniPath []string, dir string) (*cniRunner, error) {
	abs, err := filepath.Abs(plugin)
	if err != nil {
		return nil, fmt.Errorf("failed to resolve the fastpath CNI binary %s: %w", plugin, err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", bin, err)
	}
	if err := os.Symlink(abs, filepath.Join(bin, wellknown.PluginType)); err != nil {
		return nil, fmt.Errorf("failed to link the fastpath CNI binary into %s: %w", bin, err)
	}
	path := append([]string{bin}, cniPath...)
	return &cniRunner{plugin: abs, cni: libcni.NewCNIConfigWithCacheDir(path, filepath.Join(dir, "cni-cache"), nil)}, nil
}

func (c *cniRunner) rt(containerID, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: netns, IfName: PodIfName,
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", Namespace}}}
}

// Namespace is the Kubernetes namespace the benchmark's netconfs belong to
// and its pods claim (K8S_POD_NAMESPACE): the plugin refuses a pod of
// another namespace, as on a cluster.
const Namespace = "fastpath-bench-local"

// cniTimeout bounds one plugin execution (the plugin bounds its own OVSDB
// and IPAM work well below this).
const cniTimeout = 2 * time.Minute

// add runs ADD, bounded by cniTimeout, and returns the result in the current
// CNI version.
func (c *cniRunner) add(ctx context.Context, conf []byte, containerID, netns string) (*current.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	pc, err := libcni.NetworkPluginConfFromBytes(conf)
	if err != nil {
		return nil, fmt.Errorf("failed to load the netconf for %s: %w", containerID, err)
	}
	r, err := c.cni.AddNetwork(ctx, pc, c.rt(containerID, netns))
	if err != nil {
		return nil, fmt.Errorf("failed to run CNI ADD of %s for %s in %s: %w", c.plugin, containerID, netns, err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("failed to read the CNI ADD result of %s for %s: %w", c.plugin, containerID, err)
	}
	if len(res.IPs) == 0 {
		return nil, fmt.Errorf("failed to read the CNI ADD result of %s for %s: no IP", c.plugin, containerID)
	}
	return res, nil
}

// del runs DEL, bounded by cniTimeout.
func (c *cniRunner) del(ctx context.Context, conf []byte, containerID, netns string) error {
	ctx, cancel := context.WithTimeout(ctx, cniTimeout)
	defer cancel()
	pc, err := libcni.NetworkPluginConfFromBytes(conf)
	if err != nil {
		return fmt.Errorf("failed to load the netconf for %s: %w", containerID, err)
	}
	if err := c.cni.DelNetwork(ctx, pc, c.rt(containerID, netns)); err != nil {
		return fmt.Errorf("failed to run CNI DEL of %s for %s in %s: %w", c.plugin, containerID, netns, err)
	}
	return nil
}

// setOffloads switches every offload of the netconf (netconf.OffloadKeys) of
// ifName (in the caller's namespace) all on or all off, as the plugin does (internal/datapath/offload).
func setOffloads(ifName string, on bool) error {
	want := map[string]bool{}
	for _, k := range netconf.OffloadKeys {
		want[k] = on
	}
	return offload.Apply(ifName, want)
}

// netConf renders the fastpath netconf of a fast-path variant on bridge br.
func (s *Setup) netConf(v variant, br string) ([]byte, error) {
	conf := netconf.NetConf{
		CNIVersion: CNIVersion,
		Name:       s.ID + "-" + v.slug(),
		Namespace:  Namespace,
		Type:       wellknown.PluginType,
		Datapath:   netconf.DatapathLinuxBridge,
		Bridge:     br,
		MTU:        v.mtu,
		Offloads:   netconf.NewOffloads(func(string) bool { return true }),
		IPAM:       netconf.IPAM{"type": "host-local", "subnet": v.subnet().String()},
	}
	if v.path == PathFastPathOVS {
		conf.Datapath = netconf.DatapathOVS
	}
	// The state directory and the OVSDB endpoint come from a node
	// configuration, as on a node (netconf.NodeConfig); this process's
	// environment names it for the plugin processes libcni starts.
	nodeConf := s.tmpPath("node.json")
	if err := netconf.WriteNodeConfig(nodeConf, netconf.NodeConfig{StateDir: s.tmpPath("cni-state"), OVS: netconf.OVS{Socket: OVSSocket}}); err != nil {
		return nil, err
	}
	if err := os.Setenv(netconf.NodeConfigEnv, nodeConf); err != nil {
		return nil, fmt.Errorf("failed to set %s: %w", netconf.NodeConfigEnv, err)
	}
	// The plugin validates it again; failing here names the generator.
	data, err := json.Marshal(conf)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the netconf of %s: %w", v, err)
	}
	if _, _, err := netconf.LoadNetConf(data); err != nil {
		return nil, fmt.Errorf("failed to generate a valid netconf for %s: %w", v, err)
	}
	return data, nil
}

// buildFastPath makes the node bridge the agent would make (internal/datapath/bridge,
// with v's MTU) and wires both namespaces to it by executing the fastpath
// CNI binary (through libcni). It returns the server's address.
func (s *Setup) buildFastPath(ctx context.Context, v variant, cni *cniRunner, client, server *topology.NetNS) (string, error) {
	mgr := &bridge.Manager{Marker: BridgeMarker, Log: s.log}
	spec := bridge.Spec{MTU: v.mtu}
	if v.path == PathFastPathOVS {
		conn := ovsdb.NewConn(OVSSocket, s.log)
		s.onClose("OVSDB connection", func() error { conn.Close(); return nil })
		mgr.OVS, mgr.OVSDatapathType = conn, ovsdb.DatapathNetdev
		spec.Name, spec.Datapath = s.linkName("o", v, 0), fastpathv1alpha1.DatapathOVS
		s.onClose("OVS bridge "+spec.Name, func() error { return deleteOVSBridge(spec.Name) })
	} else {
		spec.Name, spec.Datapath = s.linkName("l", v, 0), fastpathv1alpha1.DatapathLinuxBridge
		s.onClose("Linux bridge "+spec.Name, func() error { return topology.DeleteHostLink(spec.Name) })
	}
	st, err := mgr.Ensure(ctx, spec)
	if err != nil {
		return "", err
	}
	if !st.Ready(spec) {
		return "", fmt.Errorf("failed to make bridge %s ready: exists %t, up %t, MTU %d (want %d)", spec.Name, st.Exists, st.Up, st.MTU, spec.MTU)
	}
	if v.path == PathFastPathOVS {
		dt, err := ovsDatapathType(spec.Name)
		if err != nil {
			return "", err
		}
		if why, na := ovsCPUNotApplicable(spec.Name, dt); na {
			s.CPUNotApplicable[v.path] = why
			s.Emulated = results.JoinEmulated(s.Emulated, EmulationOVSUserspace)
		}
	}
	conf, err := s.netConf(v, spec.Name)
	if err != nil {
		return "", err
	}
	var serverIP string
	for _, n := range []*topology.NetNS{client, server} {
		containerID := n.Name
		res, err := cni.add(ctx, conf, containerID, n.Path)
		// DEL also after a failed ADD: the plugin rolls back, DEL is idempotent.
		s.onClose("CNI attachment "+containerID, func() error {
			return cni.del(context.WithoutCancel(ctx), conf, containerID, n.Path)
		})
		if err != nil {
			return "", err
		}
		serverIP = res.IPs[0].Address.IP.String()
	}
	if serverIP == "" {
		return "", errors.New("no server address")
	}
	return serverIP, nil
}
