package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
	"github.com/fastpath-io/fastpath/internal/node/cniinstall"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/node/probe"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

func main() {
	o := NewOptions()
	o.AddFlags(flag.CommandLine)
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Agent failed")
		os.Exit(1)
	}
}

func run(o Options) error {
	log := ctrl.Log.WithName("setup")
	if o.CNI.BinSource == "" {
		var err error
		if o.CNI.BinSource, err = besideExecutable(cniinstall.DefaultName); err != nil {
			return err
		}
	}
	cni := &cniinstall.Installer{Source: o.CNI.BinSource, Companions: []string{netconf.OVSPluginBinary}, DestDir: o.CNI.BinDir, Log: ctrl.Log.WithName("cni-install"),
		NodeConfigPath: o.CNI.NodeConfig, NodeConfig: netconf.NodeConfig{StateDir: o.CNI.StateDir, OVS: netconf.OVS{Socket: o.Datapath.OVSSocket}},
		VerifyOnly: o.CNI.VerifyOnly}
	if o.CNI.Install {
		res, err := cni.Ensure()
		if err != nil {
			return err
		}
		log.Info("CNI plugin installed", "binary", res.String(), "nodeConfig", o.CNI.NodeConfig)
		return nil
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("failed to start: %w", err)
	}
	transport, emulatedRoot, err := o.Relay.transport()
	if err != nil {
		return err
	}
	serverID, _ := o.DHCP.serverID()

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 fpscheme.New(),
		Metrics:                o.Serving.Metrics.ServerOptions(),
		HealthProbeBindAddress: o.Serving.HealthProbeBindAddress,
		Cache:                  agent.CacheOptions(o.NodeName),
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}

	if o.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(o.MemoryLimit / 10 * 9)
	}
	ropts := relayOptions(o.Relay.Limits, o.MemoryLimit)
	log.Info("vsock relay limits", "memoryLimit", o.MemoryLimit, "goMemLimit", debug.SetMemoryLimit(-1),
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

	ovs := ovsdb.NewConn(o.Datapath.OVSSocket, ctrl.Log.WithName("ovsdb"))
	defer ovs.Close()
	r := &agent.Reconciler{
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
	if o.DevicePlugins.Dir != "" {
		dp := &deviceplugin.Manager{Dir: o.DevicePlugins.Dir, KubeletSocket: filepath.Join(o.DevicePlugins.Dir, "kubelet.sock"), Log: ctrl.Log.WithName("device-plugin")}
		defer dp.Stop()
		r.DevicePlugins = dp
	}
	if o.Sibling.VhostDeviceVsock != "" {
		version, err := backend.Version(context.Background(), o.Sibling.VhostDeviceVsock)
		if err != nil {
			return fmt.Errorf("failed to start: --vhost-device-vsock: %w", err)
		}
		changes := make(chan event.GenericEvent, 1)
		sup := &backend.Supervisor{Binary: o.Sibling.VhostDeviceVsock, OnChange: func() {
			select {
			case changes <- event.GenericEvent{Object: &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: o.NodeName}}}:
			default: // a wake-up is already queued
			}
		}}
		defer sup.Stop()
		r.Siblings, r.SiblingVersion, r.SiblingSocketDir, r.SiblingChanges = sup, version, o.Sibling.SocketDir, changes
		r.SiblingMaxGroups, r.SiblingMaxGroupsPerNamespace = o.Sibling.MaxGroups, o.Sibling.MaxGroupsPerNamespace
		log.Info("vsock mode Sibling enabled", "vhostDeviceVsock", o.Sibling.VhostDeviceVsock, "version", version)
		if o.DevicePlugins.Dir != "" {
			mounts := &deviceplugin.SiblingMounts{SocketDir: o.Sibling.SocketDir, NodeName: o.NodeName, Devices: o.DevicePlugins.SiblingDevices,
				PodResources: deviceplugin.KubeletPodResources{Socket: o.DevicePlugins.PodResourcesSocket}, Reader: mgr.GetAPIReader(),
				Recorder: mgr.GetEventRecorderFor("fastpath-agent"), Log: ctrl.Log.WithName("sibling-mounts")}
			res, err := mounts.Resource()
			if err != nil {
				return fmt.Errorf("failed to start: --sibling-devices: %w", err)
			}
			if err := mgr.Add(mounts); err != nil {
				return fmt.Errorf("failed to add the sibling socket links to the manager: %w", err)
			}
			r.SiblingDevicePlugin = &res
			log.Info("Offering the sibling device plugin", "resource", res.Name, "devices", len(res.Devices), "podResourcesSocket", o.DevicePlugins.PodResourcesSocket)
		} else {
			log.Info("No device plugin directory: Sibling VMs' launchers get no vhost-user socket from this agent (--device-plugin-dir)")
		}
	}
	ctx := ctrl.SetupSignalHandler()
	if o.DHCP.Enabled {
		dlog := ctrl.Log.WithName("dhcp")
		leaseDir := filepath.Join(o.CNI.StateDir, leases.Dir)
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
	log.Info("Starting agent", "node", o.NodeName, "version", r.AgentVersion, "cniBinSource", o.CNI.BinSource, "cniBinDir", o.CNI.BinDir,
		"ovsSocket", o.Datapath.OVSSocket, "ovsDatapathType", o.Datapath.OVSDatapathType, "vsockTransport", o.Relay.Transport, "tuneSysctls", o.Datapath.TuneSysctls,
		"devicePluginDir", o.DevicePlugins.Dir, "macvtapDevices", o.DevicePlugins.MacvtapDevices)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
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
