package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

func TestLoadNetConfDefaults(t *testing.T) {
	g := NewWithT(t)
	conf, version, err := LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "fp-db-link", "type": "fastpath",
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(version).To(Equal("1.0.0"))
	g.Expect(conf.Datapath).To(Equal(DatapathLinuxBridge))
	g.Expect(conf.Bridge).To(Equal("fastpath0"))
	g.Expect(conf.MTU).To(Equal(9000))
	g.Expect(conf.Offloads.Map()).To(Equal(map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true}))
	g.Expect(conf.OVS.Socket).To(Equal("unix:/var/run/openvswitch/db.sock"))
	g.Expect(conf.StateDir).To(Equal("/var/lib/cni/fastpath"))
	g.Expect(conf.IPAM.Type()).To(Equal("host-local"))
	g.Expect(conf.IPAM).To(HaveKeyWithValue("subnet", "10.250.0.0/24"))
}

func TestLoadNetConfFullConfig(t *testing.T) {
	g := NewWithT(t)
	nodeConfig(t, NodeConfig{StateDir: "/run/fp/../fp2/", OVS: OVS{Socket: "tcp:127.0.0.1:6640"}})
	conf, _, err := LoadNetConf([]byte(`{"cniVersion": "1.1.0", "name": "fp", "type": "fastpath",
		"datapath": "OVS", "bridge": "br-fast.1", "mtu": 65535,
		"offloads": {"tso": false, "gso": false, "gro": true, "txChecksum": false, "rxChecksum": false},
		"ipam": {"type": "static"},
		"runtimeConfig": {"mac": "02:00:00:aa:bb:cc"},
		"cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}],
		"someFutureKey": {"x": 1}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conf.Datapath).To(Equal(DatapathOVS))
	g.Expect(conf.Bridge).To(Equal("br-fast.1"))
	g.Expect(conf.MTU).To(Equal(65535))
	g.Expect(conf.Offloads.Map()).To(Equal(map[string]bool{"tso": false, "gso": false, "gro": true, "txChecksum": false, "rxChecksum": false}))
	g.Expect(conf.OVS.Socket).To(Equal("tcp:127.0.0.1:6640"))
	g.Expect(conf.StateDir).To(Equal("/run/fp2"))
	g.Expect(conf.RuntimeConfig.MAC).To(Equal("02:00:00:aa:bb:cc"))
	g.Expect(conf.ValidAttachments).To(Equal([]types.GCAttachment{{ContainerID: "c1", IfName: "net1"}}))
}

// TestNetConfMarshalKeepsContractKeys guards the JSON keys the operator
// renders into NetworkAttachmentDefinitions (docs/design.md §3.1).
func TestNetConfMarshalKeepsContractKeys(t *testing.T) {
	g := NewWithT(t)
	on, off := true, false
	conf := NetConf{CNIVersion: "1.0.0", Name: "fp-db-link", Type: wellknown.PluginType, Datapath: DatapathOVS,
		Bridge: "fastpath0", MTU: 9000, Offloads: &Offloads{TSO: &on, GSO: &on, GRO: &off, TXChecksum: &on, RXChecksum: &off},
		IPAM: IPAM{"type": "host-local", "subnet": "10.250.0.0/24"}, OVS: &OVS{Socket: wellknown.DefaultOVSSocket},
		StateDir: "/var/lib/cni/fastpath", RuntimeConfig: &RuntimeConfig{MAC: "02:00:00:00:00:01"}}
	data, err := json.Marshal(conf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(MatchJSON(`{"cniVersion": "1.0.0", "name": "fp-db-link", "type": "fastpath",
		"datapath": "OVS", "bridge": "fastpath0", "mtu": 9000,
		"offloads": {"tso": true, "gso": true, "gro": false, "txChecksum": true, "rxChecksum": false},
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24"},
		"runtimeConfig": {"mac": "02:00:00:00:00:01"}}`), "the node's stateDir and ovs.socket are never rendered")
}

func TestLoadNetConfRejects(t *testing.T) {
	base := `"cniVersion": "1.0.0", "name": "fp", "type": "fastpath"`
	ipam := `"ipam": {"type": "host-local"}`
	for _, tc := range []struct {
		name string
		conf string
		code uint
		msg  string
	}{
		{"syntax", `{"name": `, types.ErrDecodingFailure, "failed to parse network configuration"},
		{"not an object", `[1, 2]`, types.ErrInvalidNetworkConfig, "must be a JSON object"},
		{"missing name", `{"cniVersion": "1.0.0", ` + ipam + `}`, types.ErrInvalidNetworkConfig, "name is required"},
		{"bad name", `{"cniVersion": "1.0.0", "name": "-x", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `name "-x" is invalid`},
		{"missing version", `{"name": "fp", ` + ipam + `}`, types.ErrInvalidNetworkConfig, "cniVersion is required: must be one of 0.3.1, 0.4.0, 1.0.0, 1.1.0"},
		{"old version", `{"cniVersion": "0.2.0", "name": "fp", ` + ipam + `}`, types.ErrIncompatibleCNIVersion, `cniVersion "0.2.0" is not supported`},
		{"unknown datapath", `{` + base + `, "datapath": "macvtap", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `datapath "macvtap" is not supported: must be LinuxBridge, OVS or Macvtap`},
		{"mtu too large", `{` + base + `, "mtu": 70000, ` + ipam + `}`, types.ErrInvalidNetworkConfig, "mtu 70000 is out of range: must be 1280-65535"},
		{"mtu too small", `{` + base + `, "mtu": 1279, ` + ipam + `}`, types.ErrInvalidNetworkConfig, "mtu 1279 is out of range: must be 1280-65535"},
		{"mtu negative", `{` + base + `, "mtu": -1, ` + ipam + `}`, types.ErrInvalidNetworkConfig, "mtu -1 is out of range"},
		{"mtu string", `{` + base + `, "mtu": "9000", ` + ipam + `}`, types.ErrInvalidNetworkConfig, "mtu must be of type int"},
		{"bridge too long", `{` + base + `, "bridge": "abcdefghijklmnop", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `bridge "abcdefghijklmnop" is invalid: must be 1-15 characters of [a-zA-Z0-9_.-]`},
		{"bridge bad char", `{` + base + `, "bridge": "br/0", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `bridge "br/0" is invalid`},
		{"bridge dot", `{` + base + `, "bridge": "..", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `bridge ".." is invalid`},
		{"unknown offload", `{` + base + `, "offloads": {"tso": true, "lro": true}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `offloads has unknown key "lro": allowed keys are tso, gso, gro, txChecksum, rxChecksum`},
		{"offload not bool", `{` + base + `, "offloads": {"gro": "On"}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `offloads.gro must be a boolean`},
		{"rxChecksum not bool", `{` + base + `, "offloads": {"rxChecksum": "Off"}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `offloads.rxChecksum must be a boolean`},
		{"offloads not object", `{` + base + `, "offloads": [], ` + ipam + `}`, types.ErrInvalidNetworkConfig, `offloads`},
		{"tso without csum", `{` + base + `, "offloads": {"txChecksum": false}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `offloads.tso true requires offloads.txChecksum true`},
		{"namespace uppercase", `{` + base + `, "namespace": "Apps", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `namespace "Apps" is invalid: must be a Kubernetes namespace name, 1-63 characters of [a-z0-9-]`},
		{"namespace dash", `{` + base + `, "namespace": "apps-", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `namespace "apps-" is invalid`},
		{"namespace too long", `{` + base + `, "namespace": "` + strings.Repeat("a", 64) + `", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `is invalid: must be a Kubernetes namespace name`},
		{"namespace not string", `{` + base + `, "namespace": 1, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `namespace must be of type string`},
		{"missing ipam", `{` + base + `}`, types.ErrInvalidNetworkConfig, "ipam is required"},
		{"empty ipam", `{` + base + `, "ipam": {}}`, types.ErrInvalidNetworkConfig, "ipam is required"},
		{"ipam without type", `{` + base + `, "ipam": {"subnet": "10.0.0.0/24"}}`, types.ErrInvalidNetworkConfig, "ipam.type is required"},
		{"ipam type path", `{` + base + `, "ipam": {"type": "../x"}}`, types.ErrInvalidNetworkConfig, `ipam.type "../x" is invalid`},
		{"ipam dataDir", `{` + base + `, "ipam": {"type": "host-local", "subnet": "10.0.0.0/24", "dataDir": "/etc"}}`, types.ErrInvalidNetworkConfig, `ipam.dataDir is not accepted in a network configuration: the plugin sets the IPAM data directory itself`},
		{"ipam DataDir", `{` + base + `, "ipam": {"type": "host-local", "DataDir": "/etc"}}`, types.ErrInvalidNetworkConfig, `ipam.DataDir is not accepted`},
		{"ipam ranges", `{` + base + `, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.0.0.0/24"}]]}}`, types.ErrInvalidNetworkConfig, `ipam.ranges is not accepted in a network configuration: allowed keys are type, subnet, rangeStart, rangeEnd, gateway, routes`},
		{"ipam Subnet", `{` + base + `, "ipam": {"type": "host-local", "Subnet": "10.0.0.0/24"}}`, types.ErrInvalidNetworkConfig, `ipam.Subnet is not accepted`},
		{"ovs socket", `{` + base + `, "ovs": {"socket": "/run/db.sock"}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `ovs.socket is not accepted in a network configuration: host paths and addresses come from the node configuration`},
		{"relative state dir", `{` + base + `, "stateDir": "state", ` + ipam + `}`, types.ErrInvalidNetworkConfig, `stateDir is not accepted in a network configuration`},
		{"bad mac", `{` + base + `, "runtimeConfig": {"mac": "zz"}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `runtimeConfig.mac "zz" is invalid`},
		{"multicast mac", `{` + base + `, "runtimeConfig": {"mac": "01:00:5e:00:00:01"}, ` + ipam + `}`, types.ErrInvalidNetworkConfig, `must be a unicast address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := LoadNetConf([]byte(tc.conf))
			g.Expect(err).To(HaveOccurred())
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v is not a *types.Error", err)
			g.Expect(cniErr.Code).To(Equal(tc.code))
			g.Expect(cniErr.Msg).To(ContainSubstring(tc.msg))
		})
	}
}

func TestParseMAC(t *testing.T) {
	g := NewWithT(t)
	mac, err := ParseMAC("CNI_ARGS MAC", "02:AA:bb:00:00:01")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mac.String()).To(Equal("02:aa:bb:00:00:01"))
	_, err = ParseMAC("CNI_ARGS MAC", "02:aa:bb:00:00:01:02:03")
	g.Expect(err).To(MatchError(ContainSubstring(`CNI_ARGS MAC "02:aa:bb:00:00:01:02:03" is invalid: must be a 48-bit MAC address`)))
}

func TestLoadNetConfStrict(t *testing.T) {
	base := `"cniVersion": "1.0.0", "name": "fp", "type": "fastpath"`
	ipam := `"ipam": {"type": "host-local"}`
	long := strings.Repeat("n", wellknown.MaxNetworkNameLen+1)
	for _, tc := range []struct {
		name string
		conf string
		msg  string
	}{
		{"offload key in upper case", `{` + base + `, "offloads": {"TSO": true}, ` + ipam + `}`, `offloads has unknown key "TSO": keys are case-sensitive, the key is "tso"`},
		{"top-level key in upper case", `{` + base + `, "MTU": 9000, ` + ipam + `}`, `network configuration has unknown key "MTU": keys are case-sensitive, the key is "mtu"`},
		{"ovs key in other case", `{` + base + `, "ovs": {"Socket": "unix:/x"}, ` + ipam + `}`, `ovs has unknown key "Socket"`},
		{"duplicate top-level key", `{` + base + `, "mtu": 9000, "mtu": 1500, ` + ipam + `}`, `network configuration has key "mtu" twice`},
		{"duplicate offload key", `{` + base + `, "offloads": {"gro": true, "gro": false}, ` + ipam + `}`, `offloads has key "gro" twice`},
		{"duplicate ipam key", `{` + base + `, "ipam": {"type": "host-local", "subnet": "10.0.0.0/24", "subnet": "10.1.0.0/24"}}`, `ipam has key "subnet" twice`},
		{"duplicate key in array", `{` + base + `, ` + ipam + `, "cni.dev/valid-attachments": [{"containerID": "a", "containerID": "b"}]}`, `cni.dev/valid-attachments[0] has key "containerID" twice`},
		{"offloads string", `{` + base + `, "offloads": "on", ` + ipam + `}`, `offloads must be an object of booleans (keys tso, gso, gro, txChecksum, rxChecksum), got JSON string`},
		{"name too long", `{"cniVersion": "1.0.0", "name": "` + long + `", ` + ipam + `}`, fmt.Sprintf("name is %d characters long: must be at most %d", wellknown.MaxNetworkNameLen+1, wellknown.MaxNetworkNameLen)},
		{"too large", `{` + base + `, ` + ipam + `, "pad": "` + strings.Repeat("x", MaxNetConfBytes) + `"}`, "network configuration is larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := LoadNetConf([]byte(tc.conf))
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v is not a *types.Error", err)
			g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
			g.Expect(cniErr.Msg).To(ContainSubstring(tc.msg))
		})
	}
	g := NewWithT(t)
	_, _, err := LoadNetConf([]byte(`{"cniVersion": "1.0.0", "name": "` + long[1:] + `", ` + ipam + `, "unknownKey": {"TSO": 1}}`))
	g.Expect(err).NotTo(HaveOccurred(), "a name of MaxNetworkNameLen passes; keys of objects the plugin does not decode are not checked")
}

func TestPreflight(t *testing.T) {
	g := NewWithT(t)
	for _, conf := range []string{`{"name": "fp"}`, `{"cniVersion": "", "name": "fp"}`, `{"cniVersion": null}`} {
		err := Preflight([]byte(conf))
		g.Expect(err).To(MatchError("cniVersion is required: must be one of 0.3.1, 0.4.0, 1.0.0, 1.1.0"), conf)
	}
	g.Expect(Preflight([]byte(`{"cniVersion": "1.0.0"}`))).To(Succeed())
	g.Expect(Preflight([]byte(`{"name": `))).To(Succeed(), "malformed JSON is LoadNetConf's to report")
	g.Expect(Preflight(make([]byte, MaxNetConfBytes+1))).To(MatchError(ContainSubstring("larger than 1048576 bytes")))
	_, err := ReadStdin(strings.NewReader(strings.Repeat(" ", MaxNetConfBytes+1)))
	g.Expect(err).To(MatchError(ContainSubstring("larger than 1048576 bytes")))
	data, err := ReadStdin(strings.NewReader(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(`{}`))
}

func TestPeekDatapath(t *testing.T) {
	for in, want := range map[string]string{
		`{"datapath": "OVS"}`: "OVS",
		`{"cniVersion": "1.0.0", "datapath": "LinuxBridge", "mtu": 9000}`: "LinuxBridge",
		`{"cniVersion": "1.0.0"}`: "",
		`{"datapath": 7}`:         "",
		`{"datapath": "OVS"`:      "",
		`["OVS"]`:                 "",
		``:                        "",
	} {
		if got := PeekDatapath([]byte(in)); got != want {
			t.Errorf("PeekDatapath(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestRequireNamespace(t *testing.T) {
	g := NewWithT(t)
	c := &NetConf{Name: "fp-a.db", Namespace: "a"}
	g.Expect(c.RequireNamespace("a")).To(Succeed())
	for pod, msg := range map[string]string{
		"b": `network "fp-a.db" belongs to namespace "a": refused to add a pod of namespace "b"`,
		"":  `network "fp-a.db" belongs to namespace "a" but CNI_ARGS has no K8S_POD_NAMESPACE`,
	} {
		err := c.RequireNamespace(pod)
		var cniErr *types.Error
		g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
		g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
		g.Expect(cniErr.Msg).To(ContainSubstring(msg))
	}
	g.Expect((&NetConf{Name: "fp"}).RequireNamespace("a")).To(MatchError(ContainSubstring(`namespace is required: network "fp" names no namespace`)))
}

// TestIPAMConf: the IPAM plugin gets the netconf with "ipam" holding the
// accepted keys plus the node's data directory, "name" naming the bridge's
// one allocator (IPAMNetworkName), and every other key as it was.
func TestIPAMConf(t *testing.T) {
	g := NewWithT(t)
	nodeConfig(t, NodeConfig{StateDir: "/run/fpstate"})
	conf, _, err := LoadNetConf([]byte(`{"cniVersion": "1.1.0", "name": "fp-a.db", "type": "fastpath", "namespace": "a",
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24", "rangeStart": "10.250.0.10", "rangeEnd": "10.250.0.20",
			"gateway": "10.250.0.1", "routes": [{"dst": "10.9.0.0/16"}]},
		"runtimeConfig": {"mac": "02:00:00:aa:bb:cc"},
		"cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(IPAMDataDir(conf.StateDir)).To(Equal("/run/fpstate/ipam"))
	g.Expect(conf.IPAMConf).To(MatchJSON(`{"cniVersion": "1.1.0", "name": "fpnet-fastpath0", "type": "fastpath", "namespace": "a",
		"ipam": {"type": "host-local", "subnet": "10.250.0.0/24", "rangeStart": "10.250.0.10", "rangeEnd": "10.250.0.20",
			"gateway": "10.250.0.1", "routes": [{"dst": "10.9.0.0/16"}], "dataDir": "/run/fpstate/ipam"},
		"runtimeConfig": {"mac": "02:00:00:aa:bb:cc"},
		"cni.dev/valid-attachments": [{"containerID": "c1", "ifname": "net1"}]}`))
}
