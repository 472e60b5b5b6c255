package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
	"github.com/fastpath-io/fastpath/internal/platform/metricsauth"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// flags are the command line of fastpath-agent.
type flags struct {
	vhostDeviceVsock string
	siblingSocketDir string
	nodeName         string
	cniBinDir        string
	cniBinSource     string
	// installCNI installs the CNI binaries and node configuration, then
	// exits (the chart's install-cni init container); cniVerifyOnly makes
	// the long-running agent only check them (its mounts are read-only).
	installCNI, cniVerifyOnly bool
	tuneSysctls               bool
	devDir                    string
	relay                     relay.Options
	// memoryLimit is the agent container's memory limit in bytes (0:
	// unknown); the relay's budgets and GOMEMLIMIT follow from it.
	memoryLimit     int64
	cniNodeConfig   string
	cniStateDir     string
	ovsSocket       string
	ovsDatapathType string
	vsockTransport  string
	metrics         metricsauth.Flags
	probeAddr       string
	resync          time.Duration
	devicePluginDir string
	macvtapDevices  int
	siblingDevices  int
	// siblingMaxGroups and siblingMaxGroupsPerNamespace cap the
	// vhost-device-vsock groups of this node (agent.SiblingLimits).
	siblingMaxGroups, siblingMaxGroupsPerNamespace int
	podResources                                   string
	// dhcp answers DHCPv4 on the LinuxBridge bridges; dhcpServerID is its
	// server identifier.
	dhcp         bool
	dhcpServerID string
}

func main() {
	var f flags
	flag.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of this node (default $NODE_NAME); the FastPathNode gets this name. Required.")
	flag.StringVar(&f.cniBinDir, "cni-bin-dir", cniinstall.DefaultBinDir, "Directory the fastpath CNI binary is installed into.")
	flag.BoolVar(&f.installCNI, "install-cni", false, "Install the CNI binaries into --cni-bin-dir and write --cni-node-config, then exit (the chart's install-cni init container).")
	flag.BoolVar(&f.cniVerifyOnly, "cni-verify-only", false, "Only check the installed CNI binaries and node configuration, reporting a difference in the FastPathNode status (the chart mounts the CNI directories read-only into the long-running agent).")
	flag.StringVar(&f.cniBinSource, "cni-bin-source", "", "The fastpath CNI binary to install (default: \"fastpath\" next to this executable); fastpath-ovs-plugin beside it is installed too.")
	flag.BoolVar(&f.tuneSysctls, "tune-sysctls", false, "Raise net.core.{r,w}mem_max and net.ipv4.tcp_{r,w}mem to 256 KB socket buffers (never lowering a value).")
	flag.StringVar(&f.cniNodeConfig, "cni-node-config", "", "Where to write the CNI plugin's node configuration (its state directory and OVSDB endpoint), e.g. "+netconf.DefaultNodeConfigPath+"; empty: none (the plugin then uses its defaults).")
	flag.StringVar(&f.cniStateDir, "cni-state-dir", netconf.DefaultStateDir, "The CNI plugin's state directory, written into the node configuration.")
	flag.Int64Var(&f.memoryLimit, "memory-limit", envInt64("FASTPATH_MEMORY_LIMIT"), "The agent container's memory limit in bytes (default $FASTPATH_MEMORY_LIMIT, which the chart sets from limits.memory; 0: unknown). Sets the Go soft memory limit to 90% of it unless $GOMEMLIMIT is set, and the relay limits left at 0 follow from it.")
	flag.IntVar(&f.relay.MaxTotalConns, "relay-max-conns", 0, fmt.Sprintf("vsock relay: connections over all routes (0: half of --memory-limit at %d KiB each, at most %d).", relay.ConnMemoryEstimate>>10, relay.DefaultMaxTotalConns))
	flag.IntVar(&f.relay.MaxConnsPerNamespace, "relay-max-conns-per-namespace", 0, "vsock relay: the connections of one namespace's routes (0: a quarter of --relay-max-conns' derived value).")
	flag.Int64Var(&f.relay.BufferBudget, "relay-buffer-budget", 0, fmt.Sprintf("vsock relay: bytes of %d KiB copy buffers lent to busy connections at once (0: a quarter of --memory-limit, or %d MiB when it is unknown).", relay.DefaultBufferSize>>10, relay.DefaultBufferBudget>>20))
	flag.IntVar(&f.relay.MaxConnsPerCID, "relay-max-conns-per-cid", relay.DefaultMaxConnsPerCID, "vsock relay: one source guest's connections over all routes.")
	flag.IntVar(&f.relay.DefaultMaxConns, "relay-max-conns-per-route", relay.DefaultMaxConns, "vsock relay: one route's connections.")
	flag.DurationVar(&f.relay.IdleTimeout, "relay-idle-timeout", relay.DefaultIdleTimeout, "vsock relay: close a connection without payload for this long (negative: never).")
	flag.DurationVar(&f.relay.HalfCloseTimeout, "relay-half-close-timeout", relay.DefaultHalfCloseTimeout, "vsock relay: close a connection this long after one direction ended (negative: never).")
	flag.StringVar(&f.devDir, "dev-dir", "/dev", "Directory the device probe looks in for vhost-net, vhost-vsock and net/tun (the chart mounts the host's /dev read-only at /host/dev: the agent only stats them).")
	flag.StringVar(&f.ovsSocket, "ovs-socket", wellknown.DefaultOVSSocket, "OVSDB endpoint (unix:<path> or tcp:<host>:<port>).")
	flag.StringVar(&f.ovsDatapathType, "ovs-datapath-type", ovsdb.DatapathSystem, "datapath_type of the OVS bridges the agent creates: system (kernel module) or netdev (userspace).")
	flag.StringVar(&f.vhostDeviceVsock, "vhost-device-vsock", "", "Path of vhost-device-vsock (v0.3.0) for vsock mode Sibling; \"\" disables Sibling on this node (capabilities.vhostUserVSOCK false).")
	flag.StringVar(&f.siblingSocketDir, "sibling-socket-dir", fastpathv1alpha1.SiblingSocketDir, "Directory of the vhost-user sockets of vsock mode Sibling (the device plugin mounts it into virt-launcher).")
	flag.StringVar(&f.vsockTransport, "vsock-transport", "vsock", "Relay transport: \"vsock\" (AF_VSOCK) or \"unix:<dir>\" (EMULATION over UNIX sockets, for tests and the demo).")
	f.metrics.Register(flag.CommandLine, ":9443", "the vsock relay's and controller-runtime's metrics")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":9091", "Address of the /healthz and /readyz endpoints; \"0\" disables them.")
	flag.StringVar(&f.devicePluginDir, "device-plugin-dir", pluginapi.DevicePluginPath, "kubelet's device plugin directory (with kubelet.sock): the agent offers macvtap.fastpath.io/<lower> there for every Macvtap network, whose devices are the /dev/tapN of VM macvtaps; \"\" disables the device plugin.")
	flag.IntVar(&f.macvtapDevices, "macvtap-devices", deviceplugin.DefaultMacvtapCapacity, "Devices (VM macvtap interfaces) each Macvtap network offers on this node, 1-8192.")
	flag.IntVar(&f.siblingDevices, "sibling-devices", deviceplugin.DefaultSiblingDevices, fmt.Sprintf("Devices of vsock.fastpath.io/sibling (Sibling VM launchers at once on this node), 1-%d; offered only with --vhost-device-vsock and --device-plugin-dir.", deviceplugin.MaxSiblingDevices))
	flag.IntVar(&f.siblingMaxGroups, "sibling-max-groups", agent.DefaultSiblingMaxGroups, "vsock mode Sibling: at most this many vhost-device-vsock groups (attachments with a member VM here) run on this node (0: the default); the others are reported as SiblingGroupsOverCap.")
	flag.IntVar(&f.siblingMaxGroupsPerNamespace, "sibling-max-groups-per-namespace", agent.DefaultSiblingMaxGroupsPerNamespace, "vsock mode Sibling: at most this many groups of one namespace run on this node (0: the default).")
	flag.StringVar(&f.podResources, "pod-resources-socket", deviceplugin.DefaultPodResourcesSocket, "kubelet's PodResources API socket: the sibling device plugin asks it which pod holds a device.")
	flag.BoolVar(&f.dhcp, "dhcp", true, "Answer DHCPv4 on the node's LinuxBridge bridges with the addresses the CNI plugin assigned (the leases it records under --cni-state-dir/leases), so guests on managedTap interfaces get their fast-path address; needs CAP_NET_RAW.")
	flag.StringVar(&f.dhcpServerID, "dhcp-server-id", dhcp.DefaultServerID.String(), "IPv4 address the DHCP replies come from and name as server identifier (the bridges have no address of their own).")
	flag.DurationVar(&f.resync, "resync-period", agent.DefaultResyncPeriod, "How often the node is re-probed and its bridges re-checked without an event.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(f); err != nil {
		ctrl.Log.Error(err, "Agent failed")
		os.Exit(1)
	}
}

func run(f flags) error {
	log := ctrl.Log.WithName("setup")
	if f.cniBinSource == "" {
		var err error
		if f.cniBinSource, err = besideExecutable(cniinstall.DefaultName); err != nil {
			return err
		}
	}
	cni := &cniinstall.Installer{Source: f.cniBinSource, Companions: []string{netconf.OVSPluginBinary}, DestDir: f.cniBinDir, Log: ctrl.Log.WithName("cni-install"),
		NodeConfigPath: f.cniNodeConfig, NodeConfig: netconf.NodeConfig{StateDir: f.cniStateDir, OVS: netconf.OVS{Socket: f.ovsSocket}},
		VerifyOnly: f.cniVerifyOnly}
	if f.installCNI {
		res, err := cni.Ensure()
		if err != nil {
			return err
		}
		log.Info("CNI plugin installed", "binary", res.String(), "nodeConfig", f.cniNodeConfig)
		return nil
	}
	if f.nodeName == "" {
		return errors.New("failed to start: --node-name (or $NODE_NAME) is required")
	}
	if f.ovsDatapathType != ovsdb.DatapathSystem && f.ovsDatapathType != ovsdb.DatapathNetdev {
		return fmt.Errorf("failed to start: --ovs-datapath-type must be %s or %s, not %q", ovsdb.DatapathSystem, ovsdb.DatapathNetdev, f.ovsDatapathType)
	}
	if f.siblingMaxGroups < 0 || f.siblingMaxGroupsPerNamespace < 0 {
		return fmt.Errorf("failed to start: --sibling-max-groups (%d) and --sibling-max-groups-per-namespace (%d) must not be negative", f.siblingMaxGroups, f.siblingMaxGroupsPerNamespace)
	}
	serverID, err := netip.ParseAddr(f.dhcpServerID)
	if f.dhcp && (err != nil || !serverID.Is4()) {
		return fmt.Errorf("failed to start: --dhcp-server-id %q is not an IPv4 address", f.dhcpServerID)
	}
	transport, emulatedRoot, err := parseTransport(f.vsockTransport)
	if err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 fpscheme.New(),
		Metrics:                f.metrics.ServerOptions(),
		HealthProbeBindAddress: f.probeAddr,
		Cache:                  agent.CacheOptions(f.nodeName),
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}

	if f.memoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(f.memoryLimit / 10 * 9)
	}
	ropts := relayOptions(f.relay, f.memoryLimit)
	log.Info("vsock relay limits", "memoryLimit", f.memoryLimit, "goMemLimit", debug.SetMemoryLimit(-1),
		"maxConns", ropts.MaxTotalConns, "maxConnsPerNamespace", ropts.MaxConnsPerNamespace, "bufferBudget", ropts.BufferBudget)
	ropts.Transport, ropts.Registerer, ropts.Logger = transport, ctrlmetrics.Registry, ctrl.Log.WithName("relay")
	rl, err := relay.New(ropts)
	if err != nil {
		return err
	}
	defer rl.Close()
	// Close the relay's listeners and connections when the manager stops.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return rl.Close()
	})); err != nil {
		return fmt.Errorf("failed to add the relay to the manager: %w", err)
	}

	if f.macvtapDevices < 1 || f.macvtapDevices > 8192 {
		return fmt.Errorf("failed to start: --macvtap-devices %d is out of range: must be 1-8192", f.macvtapDevices)
	}
	ovs := ovsdb.NewConn(f.ovsSocket, ctrl.Log.WithName("ovsdb"))
	defer ovs.Close()
	r := &agent.Reconciler{
		NodeName:        f.nodeName,
		Prober:          &probe.Host{OVS: ovs, DevDir: f.devDir},
		Bridges:         &bridge.Manager{OVS: ovs, OVSDatapathType: f.ovsDatapathType, Log: ctrl.Log.WithName("bridge")},
		Relay:           rl,
		RelayTransport:  transport,
		Sysctls:         &sysctl.Tuner{Apply: f.tuneSysctls, Log: ctrl.Log.WithName("sysctl")},
		CNI:             cni,
		AgentVersion:    agentVersion(),
		ResyncPeriod:    f.resync,
		MacvtapCapacity: f.macvtapDevices,
	}
	if f.devicePluginDir != "" {
		dp := &deviceplugin.Manager{Dir: f.devicePluginDir, KubeletSocket: filepath.Join(f.devicePluginDir, "kubelet.sock"), Log: ctrl.Log.WithName("device-plugin")}
		defer dp.Stop()
		r.DevicePlugins = dp
	}
	if f.vhostDeviceVsock != "" {
		version, err := backend.Version(context.Background(), f.vhostDeviceVsock)
		if err != nil {
			return fmt.Errorf("failed to start: --vhost-device-vsock: %w", err)
		}
		changes := make(chan event.GenericEvent, 1)
		sup := &backend.Supervisor{Binary: f.vhostDeviceVsock, OnChange: func() {
			select {
			case changes <- event.GenericEvent{Object: &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: f.nodeName}}}:
			default: // a wake-up is already queued
			}
		}}
		defer sup.Stop()
		r.Siblings, r.SiblingVersion, r.SiblingSocketDir, r.SiblingChanges = sup, version, f.siblingSocketDir, changes
		r.SiblingMaxGroups, r.SiblingMaxGroupsPerNamespace = f.siblingMaxGroups, f.siblingMaxGroupsPerNamespace
		log.Info("vsock mode Sibling enabled", "vhostDeviceVsock", f.vhostDeviceVsock, "version", version)
		if f.devicePluginDir != "" {
			mounts := &deviceplugin.SiblingMounts{SocketDir: f.siblingSocketDir, NodeName: f.nodeName, Devices: f.siblingDevices,
				PodResources: deviceplugin.KubeletPodResources{Socket: f.podResources}, Reader: mgr.GetAPIReader(),
				Recorder: mgr.GetEventRecorderFor("fastpath-agent"), Log: ctrl.Log.WithName("sibling-mounts")}
			res, err := mounts.Resource()
			if err != nil {
				return fmt.Errorf("failed to start: --sibling-devices: %w", err)
			}
			if err := mgr.Add(mounts); err != nil {
				return fmt.Errorf("failed to add the sibling socket links to the manager: %w", err)
			}
			r.SiblingDevicePlugin = &res
			log.Info("Offering the sibling device plugin", "resource", res.Name, "devices", len(res.Devices), "podResourcesSocket", f.podResources)
		} else {
			log.Info("No device plugin directory: Sibling VMs' launchers get no vhost-user socket from this agent (--device-plugin-dir)")
		}
	}
	ctx := ctrl.SetupSignalHandler()
	if f.dhcp {
		dlog := ctrl.Log.WithName("dhcp")
		leaseDir := filepath.Join(f.cniStateDir, leases.Dir)
		m := dhcp.NewManager(ctx, dhcp.NewTable(leaseDir, dlog), serverID, 0, dlog)
		defer m.Stop()
		r.DHCP = m
		log.Info("Answering DHCPv4 on LinuxBridge bridges", "leases", leaseDir, "serverID", serverID)
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add ready check: %w", err)
	}

	if emulatedRoot != "" {
		log.Info("Using the EMULATED vsock transport: UNIX sockets, not AF_VSOCK (tests and demo only)", "root", emulatedRoot)
	}
	log.Info("Starting agent", "node", f.nodeName, "version", r.AgentVersion, "cniBinSource", f.cniBinSource, "cniBinDir", f.cniBinDir,
		"ovsSocket", f.ovsSocket, "ovsDatapathType", f.ovsDatapathType, "vsockTransport", f.vsockTransport, "tuneSysctls", f.tuneSysctls,
		"devicePluginDir", f.devicePluginDir, "macvtapDevices", f.macvtapDevices)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}

// relayOptions fills the relay limits left at 0 in flags from memoryLimit
// (relay.BudgetsForMemory); a limit set by flag stays.
func relayOptions(flags relay.Options, memoryLimit int64) relay.Options {
	b := relay.BudgetsForMemory(memoryLimit)
	if flags.MaxTotalConns == 0 {
		flags.MaxTotalConns = b.MaxTotalConns
	}
	if flags.MaxConnsPerNamespace == 0 {
		flags.MaxConnsPerNamespace = b.MaxConnsPerNamespace
	}
	if flags.BufferBudget == 0 {
		flags.BufferBudget = b.BufferBudget
	}
	return flags
}

// envInt64 is the integer in $name, or 0 when it is unset or not one.
func envInt64(name string) int64 {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// parseTransport turns --vsock-transport into a transport: "vsock" is
// AF_VSOCK on the host CID; "unix:<dir>" is the UNIX-socket emulation rooted
// at dir (returned as emulatedRoot).
func parseTransport(s string) (t vsock.Transport, emulatedRoot string, err error) {
	switch {
	case s == "vsock":
		return vsock.AFVSockTransport{}, "", nil
	case strings.HasPrefix(s, "unix:") && len(s) > len("unix:"):
		root, err := filepath.Abs(strings.TrimPrefix(s, "unix:"))
		if err != nil {
			return nil, "", fmt.Errorf("failed to resolve --vsock-transport directory %s: %w", s, err)
		}
		return vsock.NewUnixTransport(root, vsock.HostCID), root, nil
	default:
		return nil, "", fmt.Errorf("failed to parse --vsock-transport %q: want \"vsock\" or \"unix:<dir>\"", s)
	}
}

// besideExecutable returns the path of name in this executable's directory.
func besideExecutable(name string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("failed to find this executable (set --cni-bin-source): %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Join(filepath.Dir(exe), name), nil
}
