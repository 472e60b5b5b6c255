package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// Fixed parts of the cluster. The ports are the upstream defaults where no
// other local tool uses them, and unusual ones where envtest-started control
// planes of tests may run beside (etcd, kube-apiserver).
const (
	// EtcdPort and EtcdPeerPort are etcd's client and peer ports on 127.0.0.1.
	EtcdPort     = 12379
	EtcdPeerPort = 12380
	// APIServerPort is kube-apiserver's secure port on every address.
	APIServerPort = 16443
	// KubeletPort is the kubelet's HTTPS port; KubeletHealthzPort its
	// plain-HTTP healthz on 127.0.0.1.
	KubeletPort        = 10250
	KubeletHealthzPort = 10248
	// ControllerManagerPort and SchedulerPort are the secure ports of
	// kube-controller-manager and kube-scheduler on 127.0.0.1.
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
	// ProxyHealthzPort and ProxyMetricsPort are kube-proxy's on 127.0.0.1.
	ProxyHealthzPort = 10256
	ProxyMetricsPort = 10249
	// RegistryPort is the cluster's OCI registry's plain-HTTP port
	// (RegistryHost says on which address).
	RegistryPort = 15000
	// RegistryVersion is the distribution release bin/registry is built
	// from (hack/setup.sh: go install
	// github.com/distribution/distribution/v3/cmd/registry@RegistryVersion).
	RegistryVersion = "v3.0.0"

	// CgroupRoot is the cgroup (in every v1 hierarchy) the kubelet puts all pods
	// under: <controller>/fastpath-cluster/kubepods/...
	CgroupRoot = "/fastpath-cluster"
	// PodBridge is the reference bridge plugin's bridge (the pod network).
	PodBridge = "fpcluster0"
	// PodNetworkName is the CNI network name of the pod network.
	PodNetworkName = "podnet"
	// PodMTU is the pod network's MTU: the ordinary 1500 the fast path is
	// compared with.
	PodMTU = 1500
	// SandboxImage is the pause image (built by make images).
	SandboxImage = "localhost/pause:local"
	// MultusVersion is the version of gopkg.in/k8snetworkplumbingwg/multus-cni.v4
	// pinned in hack/multus/go.mod (a test checks they agree).
	MultusVersion = "v4.2.2"
	// MultusModule is Multus's Go module.
	MultusModule = "gopkg.in/k8snetworkplumbingwg/multus-cni.v4"
)

// Default networks. They differ from the demo's and the e2e suite's
// (10.244.0.0/16 and 10.249/10.250) so that those can run beside the cluster.
var (
	DefaultPodCIDR     = netip.MustParsePrefix("10.85.0.0/16")
	DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
)

// Options configure Up and Down. Dir and BinDir are required.
type Options struct {
	// Dir holds everything of the cluster (certificates, kubeconfigs, etcd
	// data, containerd's root and state, the kubelet's root, CNI
	// configuration and binaries, logs, the run state), e.g. _out/cluster.
	Dir string
	// BinDir holds the Kubernetes binaries, etcd, crictl and multus (make setup).
	BinDir string
	// ImagesDir holds the OCI archives of make images (<name>.tar); Up imports
	// every archive there. Default: <Dir>/../images.
	ImagesDir string
	// NodeName is the node's name. Default: the host name, lower case.
	NodeName string
	// NodeIP is the node's address: kube-apiserver advertises it and the
	// kubelet registers it. Default: the source address of the default route.
	NodeIP netip.Addr
	// PodCIDR is the pod network (host-local's range); ServiceCIDR the
	// Services' range. Defaults DefaultPodCIDR, DefaultServiceCIDR.
	PodCIDR, ServiceCIDR netip.Prefix
	// Out receives one line per step with its duration. Default: io.Discard.
	Out io.Writer
	// KubeVirt lays the node out as KubeVirt needs it: the kubelet's root is
	// KubeVirtKubeletRoot (KubeVirt hard-codes it: pkg/util KubeletRoot,
	// virt-handler's hostPaths), and it and KubeVirtRunDir are shared mounts
	// (virt-handler mounts both with Bidirectional propagation, which
	// containerd refuses on a private mount, and this host's / is private).
	// Up refuses when either directory exists (another kubelet's); Down
	// unmounts and removes what Up made.
	KubeVirt bool
	// KubeVirtDir, with KubeVirt, installs KubeVirt once the node is Ready:
	// the directory make setup-kubevirt renders (bin/kubevirt/<version>,
	// its kubevirt-operator.yaml and kubevirt-cr.yaml), whose images make
	// kubevirt-images put in ImagesDir. Empty: the node is laid out for
	// KubeVirt and nothing more.
	KubeVirtDir string
	// Nodes is the number of nodes, 1 (the default: the node is this host)
	// to MaxNodes (each node in namespaces of its own: nodes.go).
	Nodes int

	// clusterDir, set in a node's Options (nodeOptions), is the cluster's
	// Dir: the node's CNI directories are the cluster's paths.
	clusterDir string
	// hostRoot, set in a node's Options once its init runs, is the node's /
	// as the host sees it (nodeRoot): the host reaches the node's
	// containerd socket through it.
	hostRoot string
}

// The node directories KubeVirt hard-codes (Options.KubeVirt).
const (
	KubeVirtKubeletRoot = "/var/lib/kubelet"
	KubeVirtRunDir      = "/var/run/kubevirt"
)

// KubeVirtHostDirs are the other host directories virt-handler's DaemonSet
// mounts, which the kubelet creates (KubeVirt's pkg/util VirtPrivateDir,
// and the libvirt-runtimes and node-labeller volumes of
// pkg/virt-operator/resource/generate/components/daemonsets.go).
var KubeVirtHostDirs = []string{"/var/run/kubevirt-private", "/var/run/kubevirt-libvirt-runtimes", "/var/lib/kubevirt-node-labeller"}

// withDefaults fills the defaults and validates; errors name the option.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" || o.BinDir == "" {
		return o, errors.New("cluster options: Dir and BinDir are required")
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return o, fmt.Errorf("failed to resolve the cluster directory %s: %w", o.Dir, err)
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return o, fmt.Errorf("failed to resolve the bin directory %s: %w", o.BinDir, err)
	}
	if o.KubeVirtDir != "" {
		if !o.KubeVirt {
			return o, errors.New("cluster options: KubeVirtDir needs KubeVirt (the node laid out for it)")
		}
		if o.KubeVirtDir, err = filepath.Abs(o.KubeVirtDir); err != nil {
			return o, fmt.Errorf("failed to resolve the KubeVirt directory %s: %w", o.KubeVirtDir, err)
		}
	}
	if o.ImagesDir == "" {
		o.ImagesDir = filepath.Join(filepath.Dir(o.Dir), "images")
	}
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("failed to read the host name for the node name: %w", err)
		}
		o.NodeName = strings.ToLower(h)
	}
	if !o.NodeIP.IsValid() {
		if o.NodeIP, err = defaultRouteAddr(); err != nil {
			return o, err
		}
	}
	if !o.PodCIDR.IsValid() {
		o.PodCIDR = DefaultPodCIDR
	}
	if !o.ServiceCIDR.IsValid() {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if !o.PodCIDR.Addr().Is4() || !o.ServiceCIDR.Addr().Is4() || o.PodCIDR.Bits() > 24 || o.ServiceCIDR.Bits() > 24 {
		return o, fmt.Errorf("cluster options: PodCIDR %s and ServiceCIDR %s must be IPv4 prefixes of /24 or wider", o.PodCIDR, o.ServiceCIDR)
	}
	if o.PodCIDR.Overlaps(o.ServiceCIDR) {
		return o, fmt.Errorf("cluster options: PodCIDR %s overlaps ServiceCIDR %s", o.PodCIDR, o.ServiceCIDR)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return o, fmt.Errorf("cluster options: Nodes %d: want 1 to %d", o.Nodes, MaxNodes)
	}
	if o.Nodes > 1 {
		if o.PodCIDR.Bits() > 16 {
			return o, fmt.Errorf("cluster options: PodCIDR %s: a cluster of %d nodes needs a /16 or wider (a /24 per node)", o.PodCIDR, o.Nodes)
		}
		if o.PodCIDR.Overlaps(NodesCIDR) || o.ServiceCIDR.Overlaps(NodesCIDR) {
			return o, fmt.Errorf("cluster options: PodCIDR %s and ServiceCIDR %s must not overlap the nodes' network %s", o.PodCIDR, o.ServiceCIDR, NodesCIDR)
		}
		// The control plane's address is the host's on the nodes' bridge.
		o.NodeIP = hostAddr()
	}
	l := o.layout()
	for _, s := range []string{l.containerdSock, l.kubeletPodResourcesSock()} {
		if err := runstate.CheckSocketPath(s); err != nil {
			return o, fmt.Errorf("cluster options: %w", err)
		}
	}
	return o, nil
}

// defaultRouteAddr returns the source address the kernel picks for the default
// route: the address other hosts and the pods reach this node by.
func defaultRouteAddr() (netip.Addr, error) {
	c, err := net.Dial("udp4", "192.0.2.255:9") // no packet is sent: UDP connect only routes
	if err != nil {
		return netip.Addr{}, fmt.Errorf("failed to find this host's address (no IPv4 default route?): set the node IP: %w", err)
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("failed to parse the local address %s: %w", c.LocalAddr(), err)
	}
	return ap.Addr(), nil
}

// serviceIP returns the first address of the Service range: the kubernetes
// Service's ClusterIP.
func (o Options) serviceIP() netip.Addr { return o.ServiceCIDR.Masked().Addr().Next() }

// layout is where each file of the cluster lives.
type layout struct {
	// run is the short directory (runstate.RunDir) of what holds UNIX
	// sockets, whatever Dir's length: containerd's state and socket, runc's
	// root and the kubelet's root (its pod-resources socket).
	run                   string
	dir, pki, logs, state string
	etcdData              string
	containerdRoot        string
	containerdState       string
	containerdConfig      string
	containerdSock        string
	crictlConfig          string
	runcRoot              string
	kubeletRoot           string
	kubeletConfig         string
	podLogs               string
	cniBin, cniConf       string
	cniIPAM, multusCache  string
	adminKubeconfig       string
	kubeconfigs           string
	// registry is the cluster's OCI registry's directory (its storage,
	// configuration and the nodes' containerd hosts.d), one per cluster.
	registry string
}

// registryConfig, registryData and registryHosts are the registry's
// configuration file, storage and containerd's config_path directory
// (<host:port>/hosts.toml) that every node's containerd reads.
func (l layout) registryConfig() string { return filepath.Join(l.registry, "config.yml") }
func (l layout) registryData() string   { return filepath.Join(l.registry, "data") }
func (l layout) registryHosts() string  { return filepath.Join(l.registry, "hosts.d") }

// RegistryHost is host:port of the cluster's OCI registry, where every
// node's containerd and this host reach it: 127.0.0.1 for one node (its
// containerd is in this host's network namespace), the host's address on
// the nodes bridge for more (each node has its own network namespace).
func (o Options) RegistryHost() string {
	addr := netip.MustParseAddr("127.0.0.1")
	if o.clusterDir != "" || o.Nodes > 1 {
		addr = hostAddr()
	}
	return netip.AddrPortFrom(addr, RegistryPort).String()
}

func (o Options) layout() layout {
	d := o.Dir
	run, err := runstate.RunDir("cluster", d)
	if err != nil { // only when the working directory is gone
		run = filepath.Join(d, "run")
	}
	cni, logs := filepath.Join(d, "cni"), filepath.Join(d, "logs")
	if o.clusterDir != "" { // a node's: its logs are kept with the cluster's
		cni, logs = filepath.Join(o.clusterDir, "cni"), filepath.Join(o.clusterDir, "logs", o.NodeName)
	}
	kubeletRoot := filepath.Join(run, "kubelet")
	if o.KubeVirt {
		kubeletRoot = KubeVirtKubeletRoot
	}
	return layout{
		run:              run,
		dir:              d,
		pki:              filepath.Join(d, "pki"),
		logs:             logs,
		state:            filepath.Join(d, "state.json"),
		etcdData:         filepath.Join(d, "etcd"),
		containerdRoot:   filepath.Join(d, "containerd", "root"),
		containerdState:  filepath.Join(run, "containerd"),
		containerdConfig: filepath.Join(d, "containerd", "config.toml"),
		containerdSock:   filepath.Join(run, "containerd.sock"),
		crictlConfig:     filepath.Join(d, "crictl.yaml"),
		runcRoot:         filepath.Join(run, "runc"),
		kubeletRoot:      kubeletRoot,
		kubeletConfig:    filepath.Join(d, "kubelet-config.yaml"),
		podLogs:          filepath.Join(d, "pod-logs"),
		cniBin:           filepath.Join(cni, "bin"),
		cniConf:          filepath.Join(cni, "net.d"),
		cniIPAM:          filepath.Join(cni, "ipam"),
		multusCache:      filepath.Join(cni, "multus"),
		adminKubeconfig:  filepath.Join(d, "kubeconfig"),
		kubeconfigs:      filepath.Join(d, "kubeconfigs"),
		registry:         filepath.Join(cmp.Or(o.clusterDir, d), "registry"),
	}
}

func (l layout) kubeletPodResourcesSock() string {
	return filepath.Join(l.kubeletRoot, "pod-resources", "kubelet.sock")
}

// kubeconfig returns the kubeconfig file of a component.
func (l layout) kubeconfig(component string) string {
	return filepath.Join(l.kubeconfigs, component+".kubeconfig")
}

// Kubeconfig is the admin kubeconfig of the cluster in dir.
func Kubeconfig(dir string) string { return Options{Dir: dir}.layout().adminKubeconfig }

// CNIStateDir is the fastpath CNI plugin's state directory on this cluster
// (the chart's agent.cniStateDir), under the cluster directory.
func CNIStateDir(dir string) string {
	return filepath.Join(Options{Dir: dir}.layout().dir, "cni", "fastpath-state")
}

// DevicePluginDir is the kubelet's device plugin directory: fixed by the
// device plugin API (k8s.io/kubelet deviceplugin/v1beta1 DevicePluginPath),
// whatever the kubelet's --root-dir, so the one directory of the cluster
// outside Dir (Up notes whether it existed, Down removes what it made).
const DevicePluginDir = "/var/lib/kubelet/device-plugins"

// CNIDirs returns the cluster's CNI binary and configuration directories
// (what the chart's agent.cniBinDir and agent.cniConfDir must be).
func CNIDirs(dir string) (bin, conf string) {
	l := Options{Dir: dir}.layout()
	return l.cniBin, l.cniConf
}
