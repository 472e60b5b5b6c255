// Command fastpath-operator runs the Fastpath controllers (docs/design.md §3): the
// FastPathAttachment reconciler (package controllers/attachment) and the
// FastPathBenchmark reconciler (package controllers/benchmark), the FastPathNetwork
// tuning sweep (controllers/tuning) and, with --register-binding-plugins, the
// registrar of Fastpath's KubeVirt network binding plugins
// (controllers/bindingplugin). It only parses flags and
// wires dependencies; the logic lives in the controller packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fastpath-io/fastpath/controllers/attachment"
	"github.com/fastpath-io/fastpath/controllers/benchmark"
	bindingctrl "github.com/fastpath-io/fastpath/controllers/bindingplugin"
	"github.com/fastpath-io/fastpath/controllers/tuning"
	"github.com/fastpath-io/fastpath/internal/node/cleanup"
	"github.com/fastpath-io/fastpath/internal/platform/apiprobe"
	"github.com/fastpath-io/fastpath/internal/platform/metricsauth"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// flags are the command line of fastpath-operator.
type flags struct {
	metrics          metricsauth.Flags
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	podNetworkCIDRs  string
	relayPortRange   string
	relayPortsPerNS  int
	runnerImage      string
	agentHostCPUPort int
	tuningNamespace  string
	domainHookImage  string
	binding          string
	macvtapBinding   string
	registerBinding  bool
	unregister       bool
	cleanupNodes     string
	cleanupTimeout   time.Duration
	kubevirtCR       string
	concurrency      int
	wiringWorkers    int
	qps              float64
	burst            int
}

func main() {
	var f flags
	f.metrics.Register(flag.CommandLine, ":8443", "attachment, benchmark and controller-runtime metrics")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles.")
	flag.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the pod's namespace).")
	flag.StringVar(&f.podNetworkCIDRs, "pod-network-cidr", "", "Comma-separated pod network CIDRs of the cluster; an attachment subnet overlapping one is rejected (InvalidSpec).")
	flag.StringVar(&f.relayPortRange, "relay-port-range", attachment.DefaultRelayPortRange.String(), "Host vsock port range (first-last) for vsock relay ports.")
	flag.IntVar(&f.relayPortsPerNS, "relay-ports-per-namespace", attachment.DefaultRelayPortsPerNamespace, "Relay ports the attachments of one namespace hold at most (1 or more).")
	flag.StringVar(&f.runnerImage, "runner-image", "", "Image of the fastpath-bench runner Jobs (FastPathBenchmark controller).")
	flag.IntVar(&f.agentHostCPUPort, "agent-host-cpu-port", 0, "Port of the node agents' host CPU endpoint (their --host-cpu-bind-address): VM-mode FastPathBenchmarks then report the host's CPU per byte; 0: they do not.")
	flag.StringVar(&f.tuningNamespace, "tuning-namespace", "fastpath-system", "Namespace of the FastPathAttachments and FastPathBenchmarks a tuning FastPathNetwork's sweep creates (the operator's namespace); the network's namespaceSelector must admit it.")
	flag.StringVar(&f.domainHookImage, "domain-hook-image", "", "Image of the domain hook (fastpath-domain-hook), the sidecarImage --register-binding-plugins writes for both network binding plugins.")
	flag.StringVar(&f.binding, "binding", wiring.DefaultBinding, "Name under which the KubeVirt CR registers Fastpath's network binding plugin of datapaths LinuxBridge and OVS (spec.configuration.network.binding.<name>: {domainAttachmentType: managedTap, sidecarImage: <domain hook>}); fast-path interfaces on those datapaths are wired with it.")
	flag.StringVar(&f.macvtapBinding, "macvtap-binding", wiring.DefaultMacvtapBinding, "Name under which the KubeVirt CR registers Fastpath's network binding plugin of datapath Macvtap ({domainAttachmentType: tap, sidecarImage: <domain hook>}).")
	flag.BoolVar(&f.registerBinding, "register-binding-plugins", false, "Keep both network binding plugins registered in the KubeVirt CR --kubevirt (needs patch on that object and --domain-hook-image). Off: the admin registers them (docs/install.md#the-binding-plugin).")
	flag.BoolVar(&f.unregister, "unregister-binding-plugins", false, "Remove both network binding plugins from the KubeVirt CR --kubevirt and exit (the chart's pre-delete hook).")
	flag.StringVar(&f.cleanupNodes, "cleanup-nodes", "", "namespace/name of the agent DaemonSet: switch it to --cleanup, wait until every node is clean, and exit (the chart's pre-delete hook; docs/operations.md#uninstalling).")
	flag.DurationVar(&f.cleanupTimeout, "cleanup-timeout", 10*time.Minute, "How long --cleanup-nodes waits for every node.")
	flag.StringVar(&f.kubevirtCR, "kubevirt", kubevirtcr.DefaultKubeVirt.String(), "namespace/name of the KubeVirt CR for --register-binding-plugins and --unregister-binding-plugins.")
	flag.IntVar(&f.concurrency, "max-concurrent-reconciles", 2, "FastPathAttachments reconciled at once.")
	flag.IntVar(&f.wiringWorkers, "wiring-workers", attachment.DefaultWiringWorkers, "VM patches one reconcile sends at once.")
	flag.Float64Var(&f.qps, "kube-api-qps", attachment.DefaultKubeAPIQPS, "Sustained queries per second to the API server.")
	flag.IntVar(&f.burst, "kube-api-burst", attachment.DefaultKubeAPIBurst, "Burst of queries to the API server.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(f); err != nil {
		ctrl.Log.Error(err, "Operator failed")
		os.Exit(1)
	}
}

func run(f flags) error {
	log := ctrl.Log.WithName("setup")
	cidrs, err := parseCIDRs(f.podNetworkCIDRs)
	if err != nil {
		return err
	}
	if f.relayPortsPerNS < 1 {
		return fmt.Errorf("failed to start: --relay-ports-per-namespace %d is out of range: must be 1 or more", f.relayPortsPerNS)
	}
	ports, err := attachment.ParsePortRange(f.relayPortRange)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	names := kubevirtcr.Names{Bridge: f.binding, Macvtap: f.macvtapBinding}
	kvKey, err := parseKubeVirtCR(f.kubevirtCR)
	if err != nil {
		return err
	}
	if f.cleanupNodes != "" {
		return cleanupNodes(cfg, f.cleanupNodes, f.cleanupTimeout)
	}
	if f.unregister {
		c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
		if err != nil {
			return fmt.Errorf("failed to create a client: %w", err)
		}
		if err := kubevirtcr.Unregister(context.Background(), c, kvKey, names.Bridge, names.Macvtap); err != nil {
			return err
		}
		log.Info("Removed the network binding plugins", "kubevirt", kvKey, "plugins", []string{names.Bridge, names.Macvtap})
		return nil
	}
	var plugins map[string]kubevirtv1.InterfaceBindingPlugin
	if f.registerBinding {
		if plugins, err = kubevirtcr.Plugins(names, f.domainHookImage); err != nil {
			return fmt.Errorf("failed to start: --register-binding-plugins: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  fpscheme.New(),
		Metrics:                 f.metrics.ServerOptions(),
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "fastpath-operator.fastpath.io",
		LeaderElectionNamespace: f.leaderElectionNS,
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a discovery client: %w", err)
	}
	kubevirt, err := apiprobe.Served(disc, kubevirtv1.GroupVersion.String(), "virtualmachines", "virtualmachineinstances")
	if err != nil {
		return err
	}
	if !kubevirt {
		log.Info("KubeVirt is not installed (no kubevirt.io/v1 VirtualMachines served): attachments select no VM and only Pod-mode benchmarks run; the operator restarts when KubeVirt's API appears")
		if err := mgr.Add(apiprobe.RestartWhenServed(disc, 30*time.Second, kubevirtv1.GroupVersion.String(), "virtualmachines", "virtualmachineinstances")); err != nil {
			return fmt.Errorf("failed to add the KubeVirt probe: %w", err)
		}
	}
	attOpts := attachment.Options{PodNetworkCIDRs: cidrs, RelayPorts: ports, RelayPortsPerNamespace: f.relayPortsPerNS, WiringWorkers: f.wiringWorkers, Bindings: names, KubeVirtAbsent: !kubevirt}
	if err := setupControllers(ctx, mgr, f, attOpts); err != nil {
		return err
	}
	if plugins != nil && kubevirt {
		if err := (&bindingctrl.Reconciler{KubeVirt: kvKey, Plugins: plugins}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add ready check: %w", err)
	}
	if plugins == nil {
		log.Info("Not registering the network binding plugins (--register-binding-plugins off): attachments wire VMs once the admin registers them", "kubevirt", kvKey, "plugins", []string{names.Bridge, names.Macvtap})
	}
	log.Info("Starting manager", "podNetworkCIDRs", cidrs, "relayPortRange", ports.String(),
		"leaderElect", f.leaderElect, "runnerImage", f.runnerImage, "domainHookImage", f.domainHookImage, "binding", names.Bridge, "macvtapBinding", names.Macvtap, "registerBindingPlugins", f.registerBinding)
	if err := mgr.Start(ctx); err != nil {
		if errors.Is(err, apiprobe.ErrAppeared) {
			log.Info("Exiting so that the restarted operator watches KubeVirt's VMs", "reason", err.Error())
			return nil
		}
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}

// setupControllers registers every controller of the operator with mgr.
func setupControllers(ctx context.Context, mgr ctrl.Manager, f flags, attOpts attachment.Options) error {
	if err := (&attachment.Reconciler{Options: attOpts}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: f.concurrency}); err != nil {
		return err
	}

	if f.runnerImage == "" {
		// Without a runner image no Job can run: say so once instead of failing
		// the whole operator, and leave FastPathBenchmarks unreconciled.
		ctrl.Log.WithName("setup").Info("FastPathBenchmark controller disabled: --runner-image is empty")
		return nil
	}
	if f.agentHostCPUPort < 0 || f.agentHostCPUPort > 65535 {
		return fmt.Errorf("--agent-host-cpu-port %d is out of range: 0 (off) or 1-65535", f.agentHostCPUPort)
	}
	if err := (&benchmark.Reconciler{RunnerImage: f.runnerImage, KubeVirtAbsent: attOpts.KubeVirtAbsent, AgentHostCPUPort: int32(f.agentHostCPUPort)}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return err
	}
	// The tuning sweep measures through FastPathBenchmarks, so it needs the
	// runner image too.
	if err := (&tuning.Reconciler{Namespace: f.tuningNamespace}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return err
	}

	return nil
}

// parseKubeVirtCR parses --kubevirt, "namespace/name".
func parseKubeVirtCR(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("failed to start: --kubevirt %q must be namespace/name of the KubeVirt CR, e.g. kubevirt/kubevirt", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// parseCIDRs parses a comma-separated list of CIDRs ("" gives none).
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("failed to parse --pod-network-cidr %q: %w", part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// cleanupNodes switches the agent DaemonSet ns/name to --cleanup and waits
// for every node (--cleanup-nodes, the chart's pre-delete hook).
func cleanupNodes(cfg *rest.Config, key string, timeout time.Duration) error {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("failed to start: --cleanup-nodes %q must be <namespace>/<name>", key)
	}
	c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cleanup.SwitchDaemonSet(ctx, c, client.ObjectKey{Namespace: ns, Name: name}, 2*time.Second, ctrl.Log.WithName("cleanup"))
}
