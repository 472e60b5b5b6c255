package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/cleanup"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/hostcpu"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// The steps of run, in the order it takes them: each builds one dependency
// of the node reconciler from the validated Options.

// setupLog is the logger of the steps (ctrl.Log delegates to the logger
// main sets).
var setupLog = ctrl.Log.WithName("setup")

// cniInstaller returns the installer of the CNI plugin, its OVS companion
// and the node configuration; an empty --cni-bin-source is "fastpath"
// beside this executable.
func cniInstaller(o Options) (*cniinstall.Installer, error) {
	source := o.CNI.BinSource
	if source == "" {
		var err error
		if source, err = besideExecutable(cniinstall.DefaultName); err != nil {
			return nil, err
		}
	}
	return &cniinstall.Installer{Source: source, Companions: []string{netconf.OVSPluginBinary}, DestDir: o.CNI.BinDir, Log: ctrl.Log.WithName("cni-install"),
		NodeConfigPath: o.CNI.NodeConfig, NodeConfig: netconf.NodeConfig{StateDir: o.CNI.StateDir, OVS: netconf.OVS{Socket: o.Datapath.OVSSocket}},
		VerifyOnly: o.CNI.VerifyOnly}, nil
}

// installCNI installs what cni names (--install-cni, the chart's init
// container).
func installCNI(cni *cniinstall.Installer, nodeConfig string) error {
	res, err := cni.Ensure()
	if err != nil {
		return err
	}
	setupLog.Info("CNI plugin installed", "binary", res.String(), "nodeConfig", nodeConfig)
	return nil
}

// cleanNode removes what Fastpath made on the node (--cleanup): with
// --install-cni the plugin's files, and returns; else the marked links and
// OVS bridges (OVS only when its socket exists: a node without Open vSwitch
// has none), the port security table and, with vsock mode Sibling, the
// device plugin's directories under <sibling socket dir>/alloc, then serves /healthz and /readyz,
// so that the DaemonSet counts the node as cleaned, until a signal. A
// failure returns, so the container restarts and tries again.
func cleanNode(o Options) error {
	log := ctrl.Log.WithName("cleanup")
	if o.CNI.Install {
		opts := cleanup.Options{Log: log, Paths: []string{o.CNI.NodeConfig}}
		for _, name := range []string{cniinstall.DefaultName, netconf.OVSPluginBinary} {
			opts.Paths = append(opts.Paths, filepath.Join(o.CNI.BinDir, name))
		}
		if o.CNI.StateDir != "" {
			opts.EmptyDirs = []string{o.CNI.StateDir}
		}
		rep, err := cleanup.Run(context.Background(), opts)
		if err != nil {
			return err
		}
		log.Info("CNI plugin removed", "paths", rep.Paths)
		return nil
	}
	ctx := ctrl.SetupSignalHandler()
	m := &bridge.Manager{Log: log}
	if path, ok := strings.CutPrefix(o.Datapath.OVSSocket, "unix:"); !ok || fileExists(path) {
		ovs := ovsdb.NewConn(o.Datapath.OVSSocket, ctrl.Log.WithName("ovsdb"))
		defer ovs.Close()
		m.OVS = ovs
	}
	copts := cleanup.Options{Bridges: m, Table: true, Log: log}
	if o.Sibling.Enabled() {
		// The Sibling devices' directories (the links to the VMs' sockets);
		// the backend pod removes the sockets themselves when it stops.
		copts.EmptyDirs = []string{filepath.Join(o.Sibling.SocketDir, fastpathv1alpha1.SiblingAllocDir)}
	}
	rep, err := cleanup.Run(ctx, copts)
	if err != nil {
		return err
	}
	log.Info("Node cleaned up; waiting to be stopped", "links", rep.Removed.Links, "ovsBridges", rep.Removed.OVSBridges, "portSecurityTable", rep.Table)
	if o.Serving.HealthProbeBindAddress == "0" || o.Serving.HealthProbeBindAddress == "" {
		<-ctx.Done()
		return nil
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/readyz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	}
	srv := &http.Server{Addr: o.Serving.HealthProbeBindAddress, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve the health probes on %s: %w", o.Serving.HealthProbeBindAddress, err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// newManager loads the kubeconfig and creates the manager: its cache holds
// only this node's objects (agent.CacheOptions).
func newManager(o Options) (ctrl.Manager, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 fpscheme.New(),
		Metrics:                o.Serving.Metrics.ServerOptions(),
		HealthProbeBindAddress: o.Serving.HealthProbeBindAddress,
		Cache:                  agent.CacheOptions(o.NodeName),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	return mgr, nil
}

// newRelay sets the Go soft memory limit to 90% of --memory-limit (unless
// $GOMEMLIMIT is set) and returns the vsock sibling relay: with
// --relay-backend-socket a client of the vsock backend process's relay,
// polled by mgr's runnable, which calls wake when the backend's relay
// changes or restarts (the relay's listeners and connections outlive this
// agent); else a relay in this process with the limits of relayOptions,
// which the manager closes when it stops, and so must the caller (closer).
func newRelay(mgr ctrl.Manager, o Options, transport vsock.Transport, wake func()) (rl agent.RelayProgrammer, closer func() error, err error) {
	if o.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(o.MemoryLimit / 10 * 9)
	}
	if o.Relay.BackendSocket != "" {
		// The backend pod waits for its socket directory (hostPath type
		// Directory), which the agent makes, as for Sibling.
		if err := backend.PrepareSocketDir(filepath.Dir(filepath.Clean(o.Relay.BackendSocket)), o.Relay.BackendGID); err != nil {
			return nil, nil, err
		}
		c := backend.NewRelayClient(o.Relay.BackendSocket, vsock.EmulationNote(transport))
		c.OnChange, c.Log = wake, ctrl.Log.WithName("vsock-backend-relay")
		if err := mgr.Add(manager.RunnableFunc(c.Run)); err != nil {
			return nil, nil, fmt.Errorf("failed to add the vsock backend relay client to the manager: %w", err)
		}
		setupLog.Info("vsock relay runs in the vsock backend process", "socket", o.Relay.BackendSocket, "transport", o.Relay.Transport,
			"pollInterval", backend.DefaultPollInterval)
		return c, func() error { return nil }, nil
	}
	ropts := relayOptions(o.Relay.Limits, o.MemoryLimit)
	setupLog.Info("vsock relay limits", "memoryLimit", o.MemoryLimit, "goMemLimit", debug.SetMemoryLimit(-1),
		"maxConns", ropts.MaxTotalConns, "maxConnsPerNamespace", ropts.MaxConnsPerNamespace, "bufferBudget", ropts.BufferBudget)
	ropts.Transport, ropts.Registerer, ropts.Logger = transport, ctrlmetrics.Registry, ctrl.Log.WithName("relay")
	r, err := relay.New(ropts)
	if err != nil {
		return nil, nil, err
	}
	// Close the relay's listeners and connections when the manager stops.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return r.Close()
	})); err != nil {
		_ = r.Close()
		return nil, nil, fmt.Errorf("failed to add the relay to the manager: %w", err)
	}
	return r, r.Close, nil
}

// newWake returns the channel that wakes the node reconciler
// (Reconciler.SiblingChanges) and the function that sends on it without
// blocking: the Sibling supervisor or backend client and the relay's
// backend client call it when what they run changed.
func newWake(node string) (chan event.GenericEvent, func()) {
	changes := make(chan event.GenericEvent, 1)
	return changes, func() {
		select {
		case changes <- event.GenericEvent{Object: &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
		default: // a wake-up is already queued
		}
	}
}

// newReconciler returns the node reconciler with what every node has: the
// probe and the bridges over ovs, the relay, the sysctl tuner and the CNI
// check. run adds the optional parts (device plugins, Sibling, DHCP).
func newReconciler(o Options, ovs *ovsdb.Conn, rl agent.RelayProgrammer, transport vsock.Transport, cni *cniinstall.Installer) *agent.Reconciler {
	return &agent.Reconciler{
		NodeName:        o.NodeName,
		Prober:          &probe.Host{OVS: ovs, DevDir: o.Datapath.DevDir},
		Bridges:         &bridge.Manager{OVS: ovs, OVSDatapathType: o.Datapath.OVSDatapathType, Log: ctrl.Log.WithName("bridge")},
		Relay:           rl,
		RelayTransport:  transport,
		Sysctls:         &sysctl.Tuner{Apply: o.Datapath.TuneSysctls, Log: ctrl.Log.WithName("sysctl")},
		CNI:             cni,
		AgentVersion:    agentVersion(),
		ResyncPeriod:    o.ResyncPeriod,
		MacvtapCapacity: o.DevicePlugins.MacvtapDevices,
	}
}

// newDevicePlugins returns the manager of the kubelet device plugins in dir
// (--device-plugin-dir, with kubelet.sock); the caller stops it.
func newDevicePlugins(dir string) *deviceplugin.Manager {
	return &deviceplugin.Manager{Dir: dir, KubeletSocket: filepath.Join(dir, "kubelet.sock"), Log: ctrl.Log.WithName("device-plugin")}
}

// newSiblings enables vsock mode Sibling on r, whose changes call wake: with
// --sibling-backend-socket a client of the backend pod, polled by mgr's
// runnable (the backend outlives this agent; r learns its version from it),
// after making the backend's socket directory for it
// (backend.PrepareSocketDir: the backend pod waits for it, and no root
// init container of its own has to),
// else a supervisor of --vhost-device-vsock in this process, after asking
// it for its version. The caller calls stop when it returns (it stops the
// in-process supervisor's processes; the backend pod's stay).
func newSiblings(mgr ctrl.Manager, o Options, r *agent.Reconciler, wake func()) (stop func(), err error) {
	r.SiblingMaxGroups, r.SiblingMaxGroupsPerNamespace = o.Sibling.MaxGroups, o.Sibling.MaxGroupsPerNamespace
	if o.Sibling.BackendSocket != "" {
		if err := backend.PrepareSocketDir(o.Sibling.BackendDir(), o.Sibling.BackendGID); err != nil {
			return nil, err
		}
		c := backend.NewClient(o.Sibling.BackendSocket)
		c.OnChange, c.Log = wake, ctrl.Log.WithName("vsock-backend")
		if err := mgr.Add(manager.RunnableFunc(c.Run)); err != nil {
			return nil, fmt.Errorf("failed to add the vsock backend client to the manager: %w", err)
		}
		r.Siblings, r.SiblingSocketDir = c, o.Sibling.BackendDir()
		setupLog.Info("vsock mode Sibling enabled through the backend pod", "socket", o.Sibling.BackendSocket, "pollInterval", backend.DefaultPollInterval)
		return func() {}, nil
	}
	version, err := backend.Version(context.Background(), o.Sibling.VhostDeviceVsock)
	if err != nil {
		return nil, fmt.Errorf("failed to start: --vhost-device-vsock: %w", err)
	}
	sup := &backend.Supervisor{Binary: o.Sibling.VhostDeviceVsock, OnChange: wake}
	r.Siblings, r.SiblingVersion, r.SiblingSocketDir = sup, version, o.Sibling.SocketDir
	setupLog.Info("vsock mode Sibling enabled", "vhostDeviceVsock", o.Sibling.VhostDeviceVsock, "version", version)
	return sup.Stop, nil
}

// newMacvtapLaunchers returns the check that gives a macvtap device only to
// the launcher of a VM the operator wired for its network.
func newMacvtapLaunchers(mgr ctrl.Manager, o Options) *deviceplugin.MacvtapLaunchers {
	return &deviceplugin.MacvtapLaunchers{NodeName: o.NodeName, PodResources: deviceplugin.KubeletPodResources{Socket: o.DevicePlugins.PodResourcesSocket},
		Reader: mgr.GetAPIReader(), Log: ctrl.Log.WithName("macvtap-launchers")}
}

// offerSiblingDevices offers vsock.fastpath.io/sibling through r's device
// plugins and links each launcher's socket directory (SiblingMounts, run by
// mgr); without --device-plugin-dir it only says so.
func offerSiblingDevices(mgr ctrl.Manager, o Options, r *agent.Reconciler) error {
	if o.DevicePlugins.Dir == "" {
		setupLog.Info("No device plugin directory: Sibling VMs' launchers get no vhost-user socket from this agent (--device-plugin-dir)")
		return nil
	}
	mounts := &deviceplugin.SiblingMounts{SocketDir: o.Sibling.SocketDir, BackendDir: o.Sibling.BackendDir(), NodeName: o.NodeName, Devices: o.DevicePlugins.SiblingDevices,
		PodResources: deviceplugin.KubeletPodResources{Socket: o.DevicePlugins.PodResourcesSocket}, Reader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("fastpath-agent"), ServedSince: servedSince(r.Siblings), Log: ctrl.Log.WithName("sibling-mounts")}
	res, err := mounts.Resource()
	if err != nil {
		return fmt.Errorf("failed to start: --sibling-devices: %w", err)
	}
	if err := mgr.Add(mounts); err != nil {
		return fmt.Errorf("failed to add the sibling socket links to the manager: %w", err)
	}
	r.SiblingDevicePlugin = &res
	setupLog.Info("Offering the sibling device plugin", "resource", res.Name, "devices", len(res.Devices), "podResourcesSocket", o.DevicePlugins.PodResourcesSocket)
	return nil
}

// servedSince tells when the process of sup serving a socket started,
// asking the backend pod afresh (its client's last poll may predate the
// socket); nil without Sibling.
func servedSince(sup agent.SiblingSupervisor) deviceplugin.ServedSinceFunc {
	if sup == nil {
		return nil
	}
	return func(ctx context.Context, socket string) (time.Time, error) {
		groups := sup.Status()
		if c, ok := sup.(*backend.Client); ok {
			var err error
			if groups, err = c.Fresh(ctx); err != nil {
				return time.Time{}, err
			}
		}
		for _, g := range groups {
			for _, vm := range g.Serving {
				if filepath.Base(vm.Socket) == socket {
					return g.Started, nil
				}
			}
		}
		return time.Time{}, nil
	}
}

// newDHCP returns the DHCPv4 responders of the LinuxBridge bridges, serving
// the leases the CNI plugin records under --cni-state-dir that host-local's
// allocations there confirm; the caller stops them.
func newDHCP(ctx context.Context, o Options) *dhcp.Manager {
	serverID, _ := o.DHCP.serverID() // checked by Validate
	dlog := ctrl.Log.WithName("dhcp")
	leaseDir := filepath.Join(o.CNI.StateDir, leases.Dir)
	m := dhcp.NewManager(ctx, dhcp.NewTable(leaseDir, dlog), serverID, 0, dlog)
	setupLog.Info("Answering DHCPv4 on LinuxBridge bridges", "leases", leaseDir, "allocators", netconf.IPAMDataDir(o.CNI.StateDir), "serverID", serverID)
	return m
}

// addHostCPU serves the host CPU endpoint (--host-cpu-bind-address) as one
// of mgr's runnables, answering for this node's virt-launcher pods only.
func addHostCPU(mgr ctrl.Manager, o Options) error {
	addr := o.Serving.HostCPUBindAddress
	if addr == "" || addr == "0" {
		return nil
	}
	h := hostcpu.Handler{
		Reader:  hostcpu.Reader{Node: o.NodeName, CgroupRoot: o.Serving.CgroupRoot, ProcStat: "/proc/stat", DevKVM: filepath.Join(o.Datapath.DevDir, "kvm")},
		Allowed: hostcpu.LaunchersOn(mgr.GetCache(), o.NodeName),
		Log:     ctrl.Log.WithName("hostcpu"),
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return hostcpu.Serve(ctx, addr, h) })); err != nil {
		return fmt.Errorf("failed to add the host CPU endpoint: %w", err)
	}
	return nil
}

// addHealthChecks adds /healthz and /readyz pings to mgr.
func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add ready check: %w", err)
	}
	return nil
}

// logStart says what the agent starts with: cniSource is the CNI binary it
// checks, emulatedRoot the root of the UNIX-socket vsock emulation, if any.
func logStart(o Options, version, cniSource, emulatedRoot string) {
	if emulatedRoot != "" {
		setupLog.Info("Using the EMULATED vsock transport: UNIX sockets, not AF_VSOCK (tests and demo only)", "root", emulatedRoot)
	}
	setupLog.Info("Starting agent", "node", o.NodeName, "version", version, "cniBinSource", cniSource, "cniBinDir", o.CNI.BinDir,
		"ovsSocket", o.Datapath.OVSSocket, "ovsDatapathType", o.Datapath.OVSDatapathType, "vsockTransport", o.Relay.Transport, "tuneSysctls", o.Datapath.TuneSysctls,
		"devicePluginDir", o.DevicePlugins.Dir, "macvtapDevices", o.DevicePlugins.MacvtapDevices)
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
