package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// containerdConfig renders containerd 1.6's configuration (version 2): its
// own root, state, sockets and runc root under the cluster directory; the
// CRI plugin with the cgroupfs driver, the overlayfs snapshotter, the pause
// image built here, restrict_oom_score_adj (root here lacks
// CAP_SYS_RESOURCE: runc cannot lower a container's oom_score_adj below its
// own) and the cluster's CNI directories. Plugins that would write outside
// those directories (opt: /opt/containerd) or that this machine lacks
// (btrfs, zfs, devmapper, aufs) are disabled. Registries are configured in
// the cluster registry's hosts.d (registryHostsFile): the cluster's own,
// over plain HTTP.
func (o Options) containerdConfig() string {
	l := o.layout()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return strings.Join([]string{
		`version = 2`,
		`root = ` + q(l.containerdRoot),
		`state = ` + q(l.containerdState),
		`disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]`,
		``,
		`[grpc]`,
		`  address = ` + q(l.containerdSock),
		`[ttrpc]`,
		`  address = ` + q(l.containerdSock+".ttrpc"),
		`[debug]`,
		`  address = ""`,
		`[metrics]`,
		`  address = ""`,
		``,
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(SandboxImage),
		`  restrict_oom_score_adj = true`,
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		`  enable_selinux = false`,
		`  disable_apparmor = true`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        SystemdCgroup = false`,
		`        Root = ` + q(l.runcRoot),
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = ` + q(l.cniBin),
		`    conf_dir = ` + q(l.cniConf),
		`    max_conf_num = 1`,
		`  [plugins."io.containerd.grpc.v1.cri".registry]`,
		`    config_path = ` + q(l.registryHosts()),
		``,
	}, "\n")
}

// kubeletConfig renders the KubeletConfiguration: cgroupfs under CgroupRoot,
// swap tolerated, the kubelet's own oom_score_adj left at 0 (lowering it
// needs CAP_SYS_RESOURCE), client certificates checked against the cluster
// CA, the API server's webhook for authorization, everything it writes under
// the cluster directory, image garbage collection off (no image can be
// pulled back) and eviction thresholds that a shared development disk does
// not trip.
func (o Options) kubeletConfig() ([]byte, error) {
	l := o.layout()
	cgroupRoot := CgroupRoot
	if o.clusterDir != "" {
		cgroupRoot = nodeCgroupRoot(o.NodeName)
	}
	c := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		EnableServer:             ptr.To(true),
		PodLogsDir:               l.podLogs,
		Address:                  "0.0.0.0",
		Port:                     KubeletPort,
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr.To[int32](KubeletHealthzPort),
		TLSCertFile:              filepath.Join(l.pki, "kubelet-serving.crt"),
		TLSPrivateKeyFile:        filepath.Join(l.pki, "kubelet-serving.key"),
		ContainerRuntimeEndpoint: "unix://" + l.containerdSock,
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               cgroupRoot,
		CgroupsPerQOS:            ptr.To(true),
		FailSwapOn:               ptr.To(false),
		OOMScoreAdj:              ptr.To[int32](0),
		ClusterDomain:            "cluster.local",
		ResolverConfig:           ptr.To("/etc/resolv.conf"),
		VolumePluginDir:          filepath.Join(l.kubeletRoot, "volume-plugins"),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: filepath.Join(l.pki, "ca.crt")},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		// 100 disables image garbage collection.
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		NodeStatusReportFrequency: metav1.Duration{Duration: time.Minute},
		SerializeImagePulls:       ptr.To(false),
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the kubelet configuration: %w", err)
	}
	return b, nil
}

// podNetworkConf is the cluster network: Debian's reference bridge plugin
// on PodBridge (the pods' gateway, no masquerade: pods reach this node and
// each other, nothing outside) with host-local addresses from PodCIDR, MTU
// PodMTU. It is a single-plugin .conf, not a .conflist: Multus (v4.2.2 to
// v4.3.0) caches a conflist delegate re-encoded through CNI's typed PluginConf,
// which drops the plugin's own fields, so its DEL reaches the bridge plugin
// without "ipam.ranges" and fails (k8snetworkplumbingwg/multus-cni issue 1449,
// fixed by pull request 1521 after v4.3.0).
func (o Options) podNetworkConf() ([]byte, error) {
	l := o.layout()
	gw := o.PodCIDR.Masked().Addr().Next()
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       PodNetworkName,
		"type":       "bridge", "bridge": PodBridge, "isGateway": true, "ipMasq": false, "mtu": PodMTU,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  [][]map[string]string{{{"subnet": o.PodCIDR.Masked().String(), "gateway": gw.String()}}},
			"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
			"dataDir": l.cniIPAM,
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// podNetworkFile is the pod network's configuration file name.
const podNetworkFile = "10-" + PodNetworkName + ".conf"

// multusConf is the runtime's CNI configuration: Multus's thin plugin, with
// the pod network as the cluster network and NetworkAttachmentDefinitions
// (read with its own kubeconfig, namespace-isolated) for the pods' secondary networks, its
// binaries, cache and log under the cluster directory.
func (o Options) multusConf() ([]byte, error) {
	l := o.layout()
	conf := map[string]any{
		"cniVersion":     "0.3.1",
		"name":           "multus-cni-network",
		"type":           "multus",
		"kubeconfig":     l.kubeconfig("multus"),
		"confDir":        l.cniConf,
		"cniDir":         l.multusCache,
		"binDir":         l.cniBin,
		"logFile":        filepath.Join(l.logs, "multus.log"),
		"logLevel":       "verbose",
		"clusterNetwork": filepath.Join(l.cniConf, podNetworkFile),
		// A pod may use only its own namespace's NetworkAttachmentDefinitions,
		// as docs/install.md requires of clusters that run Fastpath.
		"namespaceIsolation": true,
	}
	return json.MarshalIndent(conf, "", "  ")
}

// NodeConfigPath is where the fastpath CNI plugin finds the node
// configuration the agent writes into the cluster's CNI configuration
// directory (the chart's agent.cniConfDir): containerd passes it to every
// plugin in $FASTPATH_NODE_CONFIG, as a runtime on a node with a
// non-default CNI directory must.
func NodeConfigPath(dir string) string {
	_, conf := CNIDirs(dir)
	return filepath.Join(conf, "fastpath.d", "node.json")
}

// writeFiles writes the configuration files of containerd, the kubelet and
// CNI under root: "" on the host, a node's root (nodeRoot) for a node.
func (o Options) writeFiles(root string) error {
	l := o.layout()
	kc, err := o.kubeletConfig()
	if err != nil {
		return err
	}
	pn, err := o.podNetworkConf()
	if err != nil {
		return err
	}
	mc, err := o.multusConf()
	if err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(l.containerdConfig), l.kubeletRoot, l.podLogs, l.cniBin, l.cniConf, l.cniIPAM, l.multusCache} {
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			return fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	for path, data := range map[string][]byte{
		l.containerdConfig:                         []byte(o.containerdConfig()),
		l.crictlConfig:                             []byte(fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", o.hostRoot+l.containerdSock, o.hostRoot+l.containerdSock)),
		l.kubeletConfig:                            kc,
		filepath.Join(l.cniConf, podNetworkFile):   pn,
		filepath.Join(l.cniConf, "00-multus.conf"): mc,
	} {
		if err := os.WriteFile(root+path, data, 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
	}
	return nil
}

// registryConfigFile renders the registry's configuration (distribution's
// YAML, version 0.1): filesystem storage under the cluster directory,
// plain HTTP on host, deletes allowed (a pushed tag can be replaced), a
// fixed HTTP secret (one instance, so only for upload state), warnings
// only in its log.
func (l layout) registryConfigFile(host string) string {
	return strings.Join([]string{
		`version: 0.1`,
		`log:`,
		`  level: warn`,
		`storage:`,
		`  filesystem:`,
		`    rootdirectory: ` + l.registryData(),
		`  delete:`,
		`    enabled: true`,
		`http:`,
		`  addr: ` + host,
		`  secret: fastpath-local-cluster`,
		``,
	}, "\n")
}

// registryHostsFile renders containerd's hosts.toml for the cluster's
// registry at host: pulls and resolves over plain HTTP (containerd 1.6
// config_path, docs/hosts.md of containerd).
func registryHostsFile(host string) string {
	return strings.Join([]string{
		`server = "http://` + host + `"`,
		``,
		`[host."http://` + host + `"]`,
		`  capabilities = ["pull", "resolve"]`,
		``,
	}, "\n")
}
