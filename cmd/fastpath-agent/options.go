package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/platform/metricsauth"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// maxMacvtapDevices is the largest --macvtap-devices (its help text states
// the range 1-8192).
const maxMacvtapDevices = 8192

// Options are the command line of fastpath-agent, grouped by what they
// configure. NewOptions gives the defaults, AddFlags binds them to a flag
// set, Validate checks them after parsing.
type Options struct {
	// NodeName names this node and its FastPathNode (--node-name; default
	// $NODE_NAME). Required unless CNI.Install.
	NodeName string
	// MemoryLimit is the agent container's memory limit in bytes
	// (--memory-limit; default $FASTPATH_MEMORY_LIMIT; 0: unknown). The Go
	// soft memory limit and the relay limits left at 0 follow from it.
	MemoryLimit int64
	// ResyncPeriod is how often the node is re-probed without an event
	// (--resync-period).
	ResyncPeriod time.Duration
	// Cleanup removes what Fastpath made on the node instead of making it
	// (--cleanup: the uninstall, internal/node/cleanup); with CNI.Install
	// the plugin's files, else the marked links and the port security rules.
	Cleanup bool

	CNI           CNIOptions
	Datapath      DatapathOptions
	Relay         RelayOptions
	Sibling       SiblingOptions
	DevicePlugins DevicePluginOptions
	DHCP          DHCPOptions
	Serving       ServingOptions
}

// CNIOptions are the flags of the CNI plugin's install and verification.
type CNIOptions struct {
	// Install installs the CNI binaries and node configuration, then exits
	// (--install-cni: the chart's install-cni init container).
	Install bool
	// VerifyOnly makes the long-running agent only check them
	// (--cni-verify-only: its mounts are read-only).
	VerifyOnly bool
	// BinDir is where the binaries go (--cni-bin-dir).
	BinDir string
	// BinSource is the fastpath binary to install (--cni-bin-source; empty:
	// "fastpath" beside this executable).
	BinSource string
	// NodeConfig is where the plugin's node configuration is written
	// (--cni-node-config; empty: none).
	NodeConfig string
	// StateDir is the plugin's state directory (--cni-state-dir); the DHCP
	// leases are read from its leases/ subdirectory.
	StateDir string
}

// DatapathOptions are the flags of the node's bridges, its probe and its
// socket-buffer sysctls.
type DatapathOptions struct {
	// OVSSocket is the OVSDB endpoint (--ovs-socket).
	OVSSocket string
	// OVSDatapathType is the datapath_type of the OVS bridges the agent
	// creates (--ovs-datapath-type): ovsdb.DatapathSystem or
	// ovsdb.DatapathNetdev.
	OVSDatapathType string
	// DevDir is where the probe looks for vhost-net, vhost-vsock and
	// net/tun (--dev-dir).
	DevDir string
	// TuneSysctls raises the socket-buffer sysctls (--tune-sysctls).
	TuneSysctls bool
}

// RelayOptions are the flags of the vsock sibling relay.
type RelayOptions struct {
	// Transport is "vsock" or "unix:<dir>" (--vsock-transport).
	Transport string
	// VsockBufferSize is the receive buffer of the relay's AF_VSOCK
	// connections, bytes (--relay-vsock-buffer-size;
	// vsock.AFVSockTransport.BufferSize); 0 keeps the kernel's 256 KiB.
	VsockBufferSize uint64
	// BackendSocket is the control socket of the vsock backend process
	// (--relay-backend-socket, cmd/fastpath-vsock-backend --relay), which
	// runs the relay instead of the agent, so that an agent restart keeps
	// its listeners and relayed connections; "" runs the relay in the
	// agent. With it the agent opens no vsock socket: Transport must name
	// the backend's transport (the agent's status describes it), and
	// VsockBufferSize and Limits are the backend's flags, unused here.
	BackendSocket string
	// BackendGID is the backend's group (--relay-backend-gid), one of the
	// agent's supplementary groups: with BackendSocket the agent makes the
	// socket's directory root's, in this group, mode 0770
	// (backend.PrepareSocketDir), for the backend to bind its socket in,
	// as --sibling-backend-gid does for Sibling. Above 0 with BackendSocket.
	BackendGID int
	// Limits are the relay's limits from the --relay-* flags; 0 in
	// MaxTotalConns, MaxConnsPerNamespace and BufferBudget means "from
	// --memory-limit" (relayOptions).
	Limits relay.Options
}

// SiblingOptions are the flags of vsock mode Sibling (vhost-device-vsock).
type SiblingOptions struct {
	// VhostDeviceVsock is the path of vhost-device-vsock
	// (--vhost-device-vsock), run by the agent itself (the local
	// environment, tests); empty, with BackendSocket empty, disables Sibling
	// on this node.
	VhostDeviceVsock string
	// BackendSocket is the control socket of the backend pod
	// (--sibling-backend-socket, cmd/fastpath-vsock-backend), which runs
	// vhost-device-vsock instead of the agent, binding the sockets beside
	// this one: a directory at or below SocketDir. Exclusive with
	// VhostDeviceVsock.
	BackendSocket string
	// BackendGID is the backend's group (--sibling-backend-gid), one of
	// this process's supplementary groups: the agent makes the directory
	// of BackendSocket root's, in this group, mode 0770
	// (backend.PrepareSocketDir), for the backend's user to bind its
	// sockets in. Above 0 with BackendSocket.
	BackendGID int
	// SocketDir holds the vhost-user sockets (--sibling-socket-dir).
	SocketDir string
	// MaxGroups and MaxGroupsPerNamespace cap the vhost-device-vsock groups
	// of this node (--sibling-max-groups,
	// --sibling-max-groups-per-namespace; agent.SiblingLimits; 0: the
	// default). Not negative.
	MaxGroups, MaxGroupsPerNamespace int
}

// DevicePluginOptions are the flags of the kubelet device plugins.
type DevicePluginOptions struct {
	// Dir is kubelet's device plugin directory (--device-plugin-dir); empty
	// disables the device plugins.
	Dir string
	// MacvtapDevices is the device count of each Macvtap network
	// (--macvtap-devices), 1-maxMacvtapDevices.
	MacvtapDevices int
	// SiblingDevices is the device count of vsock.fastpath.io/sibling
	// (--sibling-devices), 1-deviceplugin.MaxSiblingDevices (0: the
	// default).
	SiblingDevices int
	// PodResourcesSocket is kubelet's PodResources API socket
	// (--pod-resources-socket).
	PodResourcesSocket string
}

// DHCPOptions are the flags of the DHCPv4 responder on the LinuxBridge
// bridges.
type DHCPOptions struct {
	// Enabled answers DHCPv4 (--dhcp).
	Enabled bool
	// ServerID is the IPv4 address the replies come from (--dhcp-server-id).
	ServerID string
}

// ServingOptions are the flags of the metrics and health endpoints.
type ServingOptions struct {
	// Metrics are --metrics-bind-address, --metrics-secure and
	// --metrics-cert-dir.
	Metrics metricsauth.Flags
	// HealthProbeBindAddress serves /healthz and /readyz
	// (--health-probe-bind-address); "0" disables them.
	HealthProbeBindAddress string
	// HostCPUBindAddress serves the read-only host CPU endpoint of VM-mode
	// benchmarks (--host-cpu-bind-address, internal/node/hostcpu); "" or
	// "0" disables it.
	HostCPUBindAddress string
	// CgroupRoot is the host's cgroup v2 mount the endpoint reads
	// (--cgroup-root).
	CgroupRoot string
}

// NewOptions returns the defaults of every flag; --node-name and
// --memory-limit default to $NODE_NAME and $FASTPATH_MEMORY_LIMIT.
func NewOptions() Options {
	return Options{
		NodeName:     os.Getenv("NODE_NAME"),
		MemoryLimit:  envInt64("FASTPATH_MEMORY_LIMIT"),
		ResyncPeriod: agent.DefaultResyncPeriod,
		CNI: CNIOptions{
			BinDir:   cniinstall.DefaultBinDir,
			StateDir: netconf.DefaultStateDir,
		},
		Datapath: DatapathOptions{
			OVSSocket:       wellknown.DefaultOVSSocket,
			OVSDatapathType: ovsdb.DatapathSystem,
			DevDir:          "/dev",
		},
		Relay: RelayOptions{
			Transport:  "vsock",
			BackendGID: backend.DefaultGID,
			Limits:     relay.DefaultLimitFlags(),
		},
		Sibling: SiblingOptions{
			BackendGID:            backend.DefaultGID,
			SocketDir:             fastpathv1alpha1.SiblingSocketDir,
			MaxGroups:             agent.DefaultSiblingMaxGroups,
			MaxGroupsPerNamespace: agent.DefaultSiblingMaxGroupsPerNamespace,
		},
		DevicePlugins: DevicePluginOptions{
			Dir:                pluginapi.DevicePluginPath,
			MacvtapDevices:     deviceplugin.DefaultMacvtapCapacity,
			SiblingDevices:     deviceplugin.DefaultSiblingDevices,
			PodResourcesSocket: deviceplugin.DefaultPodResourcesSocket,
		},
		DHCP: DHCPOptions{
			Enabled:  true,
			ServerID: dhcp.DefaultServerID.String(),
		},
		Serving: ServingOptions{
			Metrics:                metricsauth.Flags{BindAddress: ":9443", Secure: true},
			HealthProbeBindAddress: ":9091",
			CgroupRoot:             "/sys/fs/cgroup",
		},
	}
}

// AddFlags binds o to the agent's flags in fs; each flag's default is o's
// value, so call it on NewOptions.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Name of this node (default $NODE_NAME); the FastPathNode gets this name. Required.")
	fs.Int64Var(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "The agent container's memory limit in bytes (default $FASTPATH_MEMORY_LIMIT, which the chart sets from limits.memory; 0: unknown). Sets the Go soft memory limit to 90% of it unless $GOMEMLIMIT is set, and the relay limits left at 0 follow from it.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod, "How often the node is re-probed and its bridges re-checked without an event.")
	fs.BoolVar(&o.Cleanup, "cleanup", o.Cleanup, "Remove what Fastpath made on this node, then report ready and wait to be stopped (the uninstall: the chart's pre-delete hook switches the DaemonSet to it). With --install-cni: the CNI binaries in --cni-bin-dir, --cni-node-config and what --cni-state-dir holds, then exit. Without: the links and OVS bridges carrying the agent's marker and the port security table; nothing unmarked.")
	o.CNI.addFlags(fs)
	o.Datapath.addFlags(fs)
	o.Relay.addFlags(fs)
	o.Sibling.addFlags(fs)
	o.DevicePlugins.addFlags(fs)
	o.DHCP.addFlags(fs)
	o.Serving.addFlags(fs)
}

func (o *CNIOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BinDir, "cni-bin-dir", o.BinDir, "Directory the fastpath CNI binary is installed into.")
	fs.BoolVar(&o.Install, "install-cni", o.Install, "Install the CNI binaries into --cni-bin-dir and write --cni-node-config, then exit (the chart's install-cni init container).")
	fs.BoolVar(&o.VerifyOnly, "cni-verify-only", o.VerifyOnly, "Only check the installed CNI binaries and node configuration, reporting a difference in the FastPathNode status (the chart mounts the CNI directories read-only into the long-running agent).")
	fs.StringVar(&o.BinSource, "cni-bin-source", o.BinSource, "The fastpath CNI binary to install (default: \"fastpath\" next to this executable); fastpath-ovs-plugin beside it is installed too.")
	fs.StringVar(&o.NodeConfig, "cni-node-config", o.NodeConfig, "Where to write the CNI plugin's node configuration (its state directory and OVSDB endpoint), e.g. "+netconf.DefaultNodeConfigPath+"; empty: none (the plugin then uses its defaults).")
	fs.StringVar(&o.StateDir, "cni-state-dir", o.StateDir, "The CNI plugin's state directory, written into the node configuration.")
}

func (o *DatapathOptions) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.TuneSysctls, "tune-sysctls", o.TuneSysctls, "Raise net.core.{r,w}mem_max and net.ipv4.tcp_{r,w}mem to 256 KB socket buffers (never lowering a value).")
	fs.StringVar(&o.DevDir, "dev-dir", o.DevDir, "Directory the device probe looks in for vhost-net, vhost-vsock and net/tun (the chart mounts the host's /dev read-only at /host/dev: the agent only stats them).")
	fs.StringVar(&o.OVSSocket, "ovs-socket", o.OVSSocket, "OVSDB endpoint (unix:<path> or tcp:<host>:<port>).")
	fs.StringVar(&o.OVSDatapathType, "ovs-datapath-type", o.OVSDatapathType, "datapath_type of the OVS bridges the agent creates: system (kernel module) or netdev (userspace).")
}

func (o *RelayOptions) addFlags(fs *flag.FlagSet) {
	relay.AddLimitFlags(fs, &o.Limits)
	fs.Uint64Var(&o.VsockBufferSize, "relay-vsock-buffer-size", o.VsockBufferSize, "vsock relay: receive buffer of its AF_VSOCK connections in bytes, the window a guest may send before the relay reads (0: the kernel's, 256 KiB); also what the kernel may hold per connection and direction when a target stops reading. Not for --vsock-transport unix:<dir>.")
	fs.StringVar(&o.Transport, "vsock-transport", o.Transport, "Relay transport: \"vsock\" (AF_VSOCK) or \"unix:<dir>\" (EMULATION over UNIX sockets, for tests and the demo).")
	fs.StringVar(&o.BackendSocket, "relay-backend-socket", o.BackendSocket, "vsock relay through the vsock backend process (fastpath-vsock-backend --relay): the UNIX socket it serves; the agent sends it the routes and reads its listeners and limits, so an agent restart keeps the relayed connections. --vsock-transport must then be the backend's; the other --relay-* flags are the backend's. \"\": the relay runs in the agent.")
	fs.IntVar(&o.BackendGID, "relay-backend-gid", o.BackendGID, "With --relay-backend-socket: the backend's group, a supplementary group of the agent; the agent makes the socket's directory root's, in this group, with mode 0770, for the backend to bind its socket in.")
}

func (o *SiblingOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.VhostDeviceVsock, "vhost-device-vsock", o.VhostDeviceVsock, "Path of vhost-device-vsock (v0.3.0) for vsock mode Sibling; \"\" disables Sibling on this node (capabilities.vhostUserVSOCK false).")
	fs.StringVar(&o.BackendSocket, "sibling-backend-socket", o.BackendSocket, "vsock mode Sibling through the backend pod (fastpath-vsock-backend): the UNIX socket it serves, whose directory (at or below --sibling-socket-dir) holds the vhost-user sockets; the agent sends it the groups and outlives nothing of it, so an agent restart keeps the guests' vsock connections. Exclusive with --vhost-device-vsock.")
	fs.IntVar(&o.BackendGID, "sibling-backend-gid", o.BackendGID, "With --sibling-backend-socket: the backend pod's group, a supplementary group of the agent; the agent makes the backend's socket directory root's, in this group, with mode 0770, for the backend to bind its sockets in.")
	fs.StringVar(&o.SocketDir, "sibling-socket-dir", o.SocketDir, "Directory of the vhost-user sockets of vsock mode Sibling (the device plugin mounts it into virt-launcher).")
	fs.IntVar(&o.MaxGroups, "sibling-max-groups", o.MaxGroups, "vsock mode Sibling: at most this many vhost-device-vsock groups (attachments with a member VM here) run on this node (0: the default); the others are reported as SiblingGroupsOverCap.")
	fs.IntVar(&o.MaxGroupsPerNamespace, "sibling-max-groups-per-namespace", o.MaxGroupsPerNamespace, "vsock mode Sibling: at most this many groups of one namespace run on this node (0: the default).")
}

func (o *DevicePluginOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Dir, "device-plugin-dir", o.Dir, "kubelet's device plugin directory (with kubelet.sock): the agent offers macvtap.fastpath.io/<lower> there for every Macvtap network, whose devices are the /dev/tapN of VM macvtaps; \"\" disables the device plugin.")
	fs.IntVar(&o.MacvtapDevices, "macvtap-devices", o.MacvtapDevices, fmt.Sprintf("Devices (VM macvtap interfaces) each Macvtap network offers on this node, 1-%d.", maxMacvtapDevices))
	fs.IntVar(&o.SiblingDevices, "sibling-devices", o.SiblingDevices, fmt.Sprintf("Devices of vsock.fastpath.io/sibling (Sibling VM launchers at once on this node), 1-%d; offered only with --vhost-device-vsock or --sibling-backend-socket, and --device-plugin-dir.", deviceplugin.MaxSiblingDevices))
	fs.StringVar(&o.PodResourcesSocket, "pod-resources-socket", o.PodResourcesSocket, "kubelet's PodResources API socket: the device plugins ask it which pod holds a device.")
}

func (o *DHCPOptions) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "dhcp", o.Enabled, "Answer DHCPv4 on the node's LinuxBridge bridges with the addresses the CNI plugin assigned (the leases it records under --cni-state-dir/leases), so guests on managedTap interfaces get their fast-path address; needs CAP_NET_RAW.")
	fs.StringVar(&o.ServerID, "dhcp-server-id", o.ServerID, "IPv4 address the DHCP replies come from and name as server identifier (the bridges have no address of their own).")
}

func (o *ServingOptions) addFlags(fs *flag.FlagSet) {
	o.Metrics.Register(fs, o.Metrics.BindAddress, "the vsock relay's and controller-runtime's metrics")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints; \"0\" disables them.")
	fs.StringVar(&o.HostCPUBindAddress, "host-cpu-bind-address", o.HostCPUBindAddress, "Address of the read-only host CPU endpoint (GET /hostcpu?pod=<uid>): the cgroup CPU time of this node's virt-launcher pods and the node's /proc/stat cpu line, which VM-mode FastPathBenchmarks read before and after each repetition; \"\" or \"0\" disables it.")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", o.CgroupRoot, "The host's cgroup v2 mount, where the host CPU endpoint finds pod cgroups (the chart mounts the host's /sys/fs/cgroup read-only at /host/sys/fs/cgroup).")
}

// Validate checks the parsed flags of the long-running agent and returns
// the first invalid one, naming the flag and what it accepts. With
// --install-cni it checks nothing: the install reads only flags without a
// range, and the chart's init container has no $NODE_NAME.
func (o Options) Validate() error {
	if o.CNI.Install {
		return nil
	}
	if o.NodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	if t := o.Datapath.OVSDatapathType; t != ovsdb.DatapathSystem && t != ovsdb.DatapathNetdev {
		return fmt.Errorf("--ovs-datapath-type must be %s or %s, not %q", ovsdb.DatapathSystem, ovsdb.DatapathNetdev, t)
	}
	if n := o.Sibling.MaxGroups; n < 0 {
		return fmt.Errorf("--sibling-max-groups %d is out of range: must be 0 (the default, %d) or more", n, agent.DefaultSiblingMaxGroups)
	}
	if n := o.Sibling.MaxGroupsPerNamespace; n < 0 {
		return fmt.Errorf("--sibling-max-groups-per-namespace %d is out of range: must be 0 (the default, %d) or more", n, agent.DefaultSiblingMaxGroupsPerNamespace)
	}
	if _, err := o.DHCP.serverID(); o.DHCP.Enabled && err != nil {
		return err
	}
	if _, _, err := o.Relay.transport(); err != nil {
		return err
	}
	if p := o.Relay.BackendSocket; p != "" && (!filepath.IsAbs(p) || len(p) >= 108) {
		return fmt.Errorf("--relay-backend-socket %q must be an absolute path under 108 bytes (a UNIX socket)", p)
	}
	if o.Relay.BackendSocket != "" && o.Relay.BackendGID <= 0 {
		return fmt.Errorf("--relay-backend-gid %d must be above 0: the backend's group, never root's", o.Relay.BackendGID)
	}
	if n := o.DevicePlugins.MacvtapDevices; n < 1 || n > maxMacvtapDevices {
		return fmt.Errorf("--macvtap-devices %d is out of range: must be 1-%d", n, maxMacvtapDevices)
	}
	// Read only when the sibling device plugin is offered; 0 is
	// deviceplugin.DefaultSiblingDevices.
	if n := o.DevicePlugins.SiblingDevices; o.Sibling.Enabled() && o.DevicePlugins.Dir != "" && (n < 0 || n > deviceplugin.MaxSiblingDevices) {
		return fmt.Errorf("--sibling-devices %d is out of range: must be 1-%d", n, deviceplugin.MaxSiblingDevices)
	}
	return o.Sibling.validate()
}

// Enabled says whether vsock mode Sibling runs on this node, in the agent
// or in the backend pod.
func (o SiblingOptions) Enabled() bool { return o.VhostDeviceVsock != "" || o.BackendSocket != "" }

// BackendDir is the directory of the backend pod's sockets: that of
// --sibling-backend-socket, or "" without it.
func (o SiblingOptions) BackendDir() string {
	if o.BackendSocket == "" {
		return ""
	}
	return filepath.Dir(filepath.Clean(o.BackendSocket))
}

// validate checks --sibling-backend-socket: exclusive with
// --vhost-device-vsock, absolute, shorter than sun_path, and in
// --sibling-socket-dir or below it (the device plugin hard-links the
// sockets into <socket dir>/alloc, and a hard link stays in one file
// system).
func (o SiblingOptions) validate() error {
	if o.BackendSocket == "" {
		return nil
	}
	if o.VhostDeviceVsock != "" {
		return fmt.Errorf("--sibling-backend-socket %q and --vhost-device-vsock %q are exclusive: the backend pod runs vhost-device-vsock, or the agent does", o.BackendSocket, o.VhostDeviceVsock)
	}
	if o.BackendGID <= 0 {
		return fmt.Errorf("--sibling-backend-gid %d must be above 0: the backend's group, never root's", o.BackendGID)
	}
	if !filepath.IsAbs(o.BackendSocket) || len(o.BackendSocket) >= 108 {
		return fmt.Errorf("--sibling-backend-socket %q must be an absolute path under 108 bytes (a UNIX socket)", o.BackendSocket)
	}
	dir, sockets := o.BackendDir(), filepath.Clean(o.SocketDir)
	if rel, err := filepath.Rel(sockets, dir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || rel == fastpathv1alpha1.SiblingAllocDir || strings.HasPrefix(rel, fastpathv1alpha1.SiblingAllocDir+"/") {
		return fmt.Errorf("--sibling-backend-socket %q must be in --sibling-socket-dir %q or a directory below it other than %s/ (its sockets are hard-linked into %s/%s)",
			o.BackendSocket, o.SocketDir, fastpathv1alpha1.SiblingAllocDir, o.SocketDir, fastpathv1alpha1.SiblingAllocDir)
	}
	return nil
}

// serverID parses --dhcp-server-id, an IPv4 address.
func (o DHCPOptions) serverID() (netip.Addr, error) {
	a, err := netip.ParseAddr(o.ServerID)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("--dhcp-server-id %q is not an IPv4 address", o.ServerID)
	}
	return a, nil
}

// transport turns --vsock-transport into a transport (parseTransport)
// with --relay-vsock-buffer-size.
func (o RelayOptions) transport() (t vsock.Transport, emulatedRoot string, err error) {
	return vsock.ParseTransport(o.Transport, o.VsockBufferSize)
}

// parseTransport turns --vsock-transport into a transport
// (vsock.ParseTransport): "vsock" is AF_VSOCK on the host CID; "unix:<dir>"
// is the UNIX-socket emulation rooted at dir (returned as emulatedRoot).
func parseTransport(s string) (t vsock.Transport, emulatedRoot string, err error) {
	return vsock.ParseTransport(s, 0)
}

// relayOptions fills the relay limits left at 0 in flags from memoryLimit
// (relay.OptionsForMemory); a limit set by flag stays.
func relayOptions(flags relay.Options, memoryLimit int64) relay.Options {
	return relay.OptionsForMemory(flags, memoryLimit)
}

// envInt64 is the integer in $name, or 0 when it is unset or not one.
func envInt64(name string) int64 {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
