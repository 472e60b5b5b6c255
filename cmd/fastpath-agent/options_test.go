package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fastpath-io/fastpath/internal/platform/metricsauth"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// todaysDefaults are the agent's defaults as users and the chart know them,
// spelled out rather than taken from the constants, so that moving a
// constant cannot change a default unnoticed. $NODE_NAME is node-a and
// $FASTPATH_MEMORY_LIMIT 128 MiB.
var todaysDefaults = Options{
	NodeName:     "node-a",
	MemoryLimit:  128 << 20,
	ResyncPeriod: time.Minute,
	CNI:          CNIOptions{BinDir: "/opt/cni/bin", StateDir: "/var/lib/cni/fastpath"},
	Datapath:     DatapathOptions{OVSSocket: "unix:/var/run/openvswitch/db.sock", OVSDatapathType: "system", DevDir: "/dev"},
	Relay: RelayOptions{Transport: "vsock", BackendGID: 65532, Limits: relay.Options{
		MaxConnsPerCID: 256, DefaultMaxConns: 1024, IdleTimeout: 5 * time.Minute, HalfCloseTimeout: 30 * time.Second,
	}},
	Sibling:       SiblingOptions{BackendGID: 65532, SocketDir: "/var/run/fastpath/vsock", MaxGroups: 64, MaxGroupsPerNamespace: 16},
	DevicePlugins: DevicePluginOptions{Dir: "/var/lib/kubelet/device-plugins/", MacvtapDevices: 128, SiblingDevices: 128, PodResourcesSocket: "/var/lib/kubelet/pod-resources/kubelet.sock"},
	DHCP:          DHCPOptions{Enabled: true, ServerID: "169.254.75.254"},
	Serving:       ServingOptions{Metrics: metricsauth.Flags{BindAddress: ":9443", Secure: true}, HealthProbeBindAddress: ":9091", CgroupRoot: "/sys/fs/cgroup"},
}

// agentFlags are the flags of fastpath-agent: 36 of its own and the three
// of metricsauth (zap's flags and controller-runtime's --kubeconfig come on
// top). The chart, config/default and the harness pass them by these names.
var agentFlags = []string{
	"cgroup-root", "cleanup", "cni-bin-dir", "cni-bin-source", "cni-node-config", "cni-state-dir", "cni-verify-only",
	"dev-dir", "device-plugin-dir", "dhcp", "dhcp-server-id", "health-probe-bind-address", "host-cpu-bind-address",
	"install-cni", "macvtap-devices", "memory-limit", "metrics-bind-address", "metrics-cert-dir",
	"metrics-secure", "node-name", "ovs-datapath-type", "ovs-socket", "pod-resources-socket",
	"relay-backend-gid", "relay-backend-socket", "relay-buffer-budget", "relay-half-close-timeout", "relay-idle-timeout", "relay-max-conns",
	"relay-max-conns-per-cid", "relay-max-conns-per-namespace", "relay-max-conns-per-route", "relay-vsock-buffer-size",
	"resync-period", "sibling-backend-gid", "sibling-backend-socket", "sibling-devices", "sibling-max-groups", "sibling-max-groups-per-namespace",
	"sibling-socket-dir", "tune-sysctls", "vhost-device-vsock", "vsock-transport",
}

// parse parses args as the agent's main does, into NewOptions.
func parse(args ...string) (Options, error) {
	o := NewOptions()
	fs := flag.NewFlagSet("fastpath-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	err := fs.Parse(args)
	return o, err
}

func TestDefaultsAreTodays(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("NODE_NAME", "node-a")
	t.Setenv("FASTPATH_MEMORY_LIMIT", "134217728")
	g.Expect(NewOptions()).To(Equal(todaysDefaults))
	parsed, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed).To(Equal(todaysDefaults), "each flag's default is NewOptions' value")
	g.Expect(parsed.Validate()).To(Succeed())

	t.Setenv("NODE_NAME", "")
	t.Setenv("FASTPATH_MEMORY_LIMIT", "128Mi")
	g.Expect(NewOptions()).To(And(HaveField("NodeName", ""), HaveField("MemoryLimit", int64(0))), "not a number of bytes: unknown")
}

func TestAddFlagsRegistersEveryFlag(t *testing.T) {
	g := NewWithT(t)
	o := NewOptions()
	fs := flag.NewFlagSet("fastpath-agent", flag.ContinueOnError)
	o.AddFlags(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		names = append(names, f.Name)
		g.Expect(f.Usage).NotTo(BeEmpty(), f.Name)
	})
	sort.Strings(names)
	g.Expect(names).To(Equal(agentFlags))
}

// TestValidate: every invalid value names its flag and what it accepts;
// values the agent does not read in that mode pass.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string // substring of the error; "" for valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no node name", func(o *Options) { o.NodeName = "" }, "--node-name (or $NODE_NAME) is required"},
		{"OVS datapath type", func(o *Options) { o.Datapath.OVSDatapathType = "dpdk" }, `--ovs-datapath-type must be system or netdev, not "dpdk"`},
		{"OVS datapath type netdev", func(o *Options) { o.Datapath.OVSDatapathType = "netdev" }, ""},
		{"negative sibling groups", func(o *Options) { o.Sibling.MaxGroups = -1 }, "--sibling-max-groups -1 is out of range: must be 0 (the default, 64) or more"},
		{"negative sibling groups per namespace", func(o *Options) { o.Sibling.MaxGroupsPerNamespace = -1 }, "--sibling-max-groups-per-namespace -1 is out of range: must be 0 (the default, 16) or more"},
		{"sibling groups 0", func(o *Options) { o.Sibling.MaxGroups, o.Sibling.MaxGroupsPerNamespace = 0, 0 }, ""},
		{"IPv6 DHCP server ID", func(o *Options) { o.DHCP.ServerID = "fd00::1" }, `--dhcp-server-id "fd00::1" is not an IPv4 address`},
		{"no DHCP server ID", func(o *Options) { o.DHCP.ServerID = "" }, `--dhcp-server-id "" is not an IPv4 address`},
		{"DHCP off: server ID unread", func(o *Options) { o.DHCP.Enabled, o.DHCP.ServerID = false, "x" }, ""},
		{"vsock transport", func(o *Options) { o.Relay.Transport = "tcp" }, `--vsock-transport "tcp" must be "vsock" or "unix:<dir>"`},
		{"emulated vsock transport", func(o *Options) { o.Relay.Transport = "unix:/run/x" }, ""},
		{"relay backend socket", func(o *Options) { o.Relay.BackendSocket = "/var/run/fastpath/vsock/backend/control.sock" }, ""},
		{"relay backend socket, root's group", func(o *Options) {
			o.Relay.BackendSocket, o.Relay.BackendGID = "/var/run/fastpath/vsock/backend/control.sock", 0
		}, "--relay-backend-gid 0 must be above 0"},
		{"no relay backend: its group unread", func(o *Options) { o.Relay.BackendGID = 0 }, ""},
		{"relative relay backend socket", func(o *Options) { o.Relay.BackendSocket = "backend/control.sock" },
			`--relay-backend-socket "backend/control.sock" must be an absolute path under 108 bytes`},
		{"long relay backend socket", func(o *Options) { o.Relay.BackendSocket = "/" + strings.Repeat("x", 107) },
			"must be an absolute path under 108 bytes (a UNIX socket)"},
		{"no macvtap devices", func(o *Options) { o.DevicePlugins.MacvtapDevices = 0 }, "--macvtap-devices 0 is out of range: must be 1-8192"},
		{"too many macvtap devices", func(o *Options) { o.DevicePlugins.MacvtapDevices = 8193 }, "--macvtap-devices 8193 is out of range: must be 1-8192"},
		{"most macvtap devices", func(o *Options) { o.DevicePlugins.MacvtapDevices = 8192 }, ""},
		{"too many sibling devices", func(o *Options) {
			o.Sibling.VhostDeviceVsock, o.DevicePlugins.SiblingDevices = "/bin/vhost-device-vsock", 4097
		}, "--sibling-devices 4097 is out of range: must be 1-4096"},
		{"negative sibling devices", func(o *Options) {
			o.Sibling.VhostDeviceVsock, o.DevicePlugins.SiblingDevices = "/bin/vhost-device-vsock", -1
		}, "--sibling-devices -1 is out of range: must be 1-4096"},
		{"sibling devices 0: the default", func(o *Options) {
			o.Sibling.VhostDeviceVsock, o.DevicePlugins.SiblingDevices = "/bin/vhost-device-vsock", 0
		}, ""},
		{"no Sibling: sibling devices unread", func(o *Options) { o.DevicePlugins.SiblingDevices = 5000 }, ""},
		{"backend pod: sibling devices read", func(o *Options) {
			o.Sibling.BackendSocket, o.DevicePlugins.SiblingDevices = "/var/run/fastpath/vsock/backend/control.sock", 5000
		}, "--sibling-devices 5000 is out of range"},
		{"backend socket below the socket dir", func(o *Options) { o.Sibling.BackendSocket = "/var/run/fastpath/vsock/backend/control.sock" }, ""},
		{"backend socket in the socket dir", func(o *Options) { o.Sibling.BackendSocket = "/var/run/fastpath/vsock/control.sock" }, ""},
		{"backend group root's", func(o *Options) {
			o.Sibling.BackendSocket, o.Sibling.BackendGID = "/var/run/fastpath/vsock/backend/control.sock", 0
		},
			"--sibling-backend-gid 0 must be above 0"},
		{"no backend: backend group unread", func(o *Options) { o.Sibling.BackendGID = 0 }, ""},
		{"backend socket and vhost-device-vsock", func(o *Options) {
			o.Sibling.BackendSocket, o.Sibling.VhostDeviceVsock = "/var/run/fastpath/vsock/backend/control.sock", "/bin/vhost-device-vsock"
		}, "--sibling-backend-socket \"/var/run/fastpath/vsock/backend/control.sock\" and --vhost-device-vsock \"/bin/vhost-device-vsock\" are exclusive"},
		{"relative backend socket", func(o *Options) { o.Sibling.BackendSocket = "backend/control.sock" }, "--sibling-backend-socket \"backend/control.sock\" must be an absolute path"},
		{"backend socket outside the socket dir", func(o *Options) { o.Sibling.BackendSocket = "/var/run/other/control.sock" },
			"--sibling-backend-socket \"/var/run/other/control.sock\" must be in --sibling-socket-dir \"/var/run/fastpath/vsock\""},
		{"backend socket in a sibling of the socket dir", func(o *Options) { o.Sibling.BackendSocket = "/var/run/fastpath/vsock-backend/control.sock" },
			"must be in --sibling-socket-dir"},
		{"backend socket in alloc", func(o *Options) { o.Sibling.BackendSocket = "/var/run/fastpath/vsock/alloc/control.sock" }, "other than alloc/"},
		{"no device plugins: sibling devices unread", func(o *Options) {
			o.Sibling.VhostDeviceVsock, o.DevicePlugins.Dir, o.DevicePlugins.SiblingDevices = "/bin/vhost-device-vsock", "", 5000
		}, ""},
		{"install-cni checks nothing", func(o *Options) {
			o.CNI.Install, o.NodeName, o.Datapath.OVSDatapathType, o.DevicePlugins.MacvtapDevices = true, "", "dpdk", 0
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := todaysDefaults
			tc.change(&o)
			err := o.Validate()
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestParseTheChartsCommandLines parses the args of the agent and its
// install-cni init container as config/default (the chart rendered with its
// defaults by make manifests) has them, and the extra args the chart renders
// with agent.sibling.enabled.
func TestParseTheChartsCommandLines(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("NODE_NAME", "node-a")
	t.Setenv("FASTPATH_MEMORY_LIMIT", "134217728")
	manifest, err := os.ReadFile(filepath.Join("..", "..", "config", "default", "fastpath.yaml"))
	g.Expect(err).NotTo(HaveOccurred())

	install, err := parse(chartArgs(t, manifest, "install-cni")...)
	g.Expect(err).NotTo(HaveOccurred())
	want := todaysDefaults
	want.CNI = CNIOptions{Install: true, BinDir: "/host/opt/cni/bin", NodeConfig: "/host/etc/cni/net.d/fastpath.d/node.json", StateDir: "/var/lib/cni/fastpath"}
	g.Expect(install).To(Equal(want))
	g.Expect(install.Validate()).To(Succeed())

	agentArgs := chartArgs(t, manifest, "agent")
	o, err := parse(agentArgs...)
	g.Expect(err).NotTo(HaveOccurred())
	want = todaysDefaults
	want.CNI = CNIOptions{VerifyOnly: true, BinDir: "/host/opt/cni/bin", NodeConfig: "/host/etc/cni/net.d/fastpath.d/node.json", StateDir: "/var/lib/cni/fastpath"}
	want.Datapath.DevDir = "/host/dev"
	want.DevicePlugins.Dir = "/var/lib/kubelet/device-plugins"
	want.Serving.HostCPUBindAddress, want.Serving.CgroupRoot = ":9446", "/host/sys/fs/cgroup"
	want.Relay.BackendSocket = "/var/run/fastpath/vsock/backend/control.sock" // agent.relay.backend.enabled, the default
	g.Expect(o).To(Equal(want))
	g.Expect(o.Validate()).To(Succeed())

	// charts/fastpath/templates/agent.yaml with agent.sibling.enabled and
	// values.yaml's agent.sibling.
	o, err = parse(append(agentArgs,
		"--sibling-backend-socket=/var/run/fastpath/vsock/backend/control.sock",
		"--sibling-socket-dir=/var/run/fastpath/vsock",
		"--sibling-devices=128",
		"--sibling-max-groups=64",
		"--sibling-max-groups-per-namespace=16",
		"--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock")...)
	g.Expect(err).NotTo(HaveOccurred())
	want.Sibling.BackendSocket = "/var/run/fastpath/vsock/backend/control.sock"
	g.Expect(o).To(Equal(want))
	g.Expect(o.Validate()).To(Succeed())

	// agent.devicePlugin.enabled=false renders an empty --device-plugin-dir.
	o, err = parse(append(agentArgs, "--device-plugin-dir=")...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.DevicePlugins.Dir).To(BeEmpty())
}

// chartArgs returns the args of container in the fastpath-agent DaemonSet of
// manifest.
func chartArgs(t *testing.T, manifest []byte, container string) []string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("failed to decode config/default/fastpath.yaml: %v", err)
		}
		if obj.Kind != "DaemonSet" || obj.Metadata.Name != "fastpath-agent" {
			continue
		}
		for _, c := range append(obj.Spec.Template.Spec.InitContainers, obj.Spec.Template.Spec.Containers...) {
			if c.Name == container {
				return c.Args
			}
		}
	}
	t.Fatalf("config/default/fastpath.yaml has no fastpath-agent container %s", container)
	return nil
}
