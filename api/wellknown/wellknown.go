package wellknown

// Datapath names: the values of FastPathNetwork and FastPathAttachment
// spec.datapath (api/v1alpha1.Datapath) and of the CNI netconf "datapath"
// (api/netconf) that the operator writes from them.
const (
	// DatapathLinuxBridge enslaves the host end of a veth pair to a Linux bridge.
	DatapathLinuxBridge = "LinuxBridge"
	// DatapathOVS adds the host end of a veth pair as a port of an Open vSwitch bridge.
	DatapathOVS = "OVS"
	// DatapathMacvtap makes the pod interface a bridge-mode macvtap on a
	// node-local lower device the node agent owns.
	DatapathMacvtap = "Macvtap"
)

// PluginType is the CNI "type" of the fastpath netconf: the name of the
// plugin binary in CNI_PATH, which the operator writes into the
// NetworkAttachmentDefinition and the node agent installs.
const PluginType = "fastpath"

// MarkerKey marks what the node agent made on a node: the key of an OVS
// bridge's external_ids, and the prefix of the alias of a Linux bridge or a
// macvtap lower device ("fastpath.io/managed-by=<agent>"). The CNI plugin
// attaches only to bridges and lower devices that carry it, so a tenant's
// pod never joins the node's own cni0 or br-ex.
const MarkerKey = "fastpath.io/managed-by"

// Defaults of the node bridge and its MTU, applied by the API's defaulting
// (api/v1alpha1) and by the plugin to a netconf without them.
const (
	// DefaultBridge is the node bridge the node agent creates when a network
	// names none.
	DefaultBridge = "fastpath0"
	// DefaultMTU in bytes: jumbo frames, which the ESX networking study found
	// to give up to 2x throughput (docs/design.md §1).
	DefaultMTU = 9000
)

// MTU bounds in bytes, of an attachment, a network and a tuned domain
// interface. MinMTU is the IPv6 minimum link MTU (RFC 8200 §5); MaxMTU is
// the largest MTU a veth accepts (ETH_MAX_MTU, Linux
// include/uapi/linux/if_ether.h); same-node frames never touch a wire, so
// super-jumbo values are legal (docs/design.md §2).
const (
	MinMTU = 1280
	MaxMTU = 65535
)

// MaxNetworkNameLen is the longest CNI network "name" in bytes: 165. The
// name is part of the alias of every host veth,
// "fastpath/<name>/<containerID>/<ifname>", which must fit IFALIASZ-1 = 255
// bytes (Linux include/uapi/linux/if.h) with a 64-character container ID
// (containerd and CRI-O sandbox IDs) and a 15-character ifname:
// 255 - 9 - 1 - 64 - 1 - 15 = 165. It also keeps host-local's per-network
// directory (<dataDir>/<name>) under NAME_MAX (255). The operator's network
// names (api/v1alpha1.CNINetworkName) stay within it.
const MaxNetworkNameLen = 165

// DefaultOVSSocket is the OVSDB endpoint where Debian's and upstream's
// ovsdb-server listen: the node agent's default and the plugin's for a
// netconf without one.
const DefaultOVSSocket = "unix:/var/run/openvswitch/db.sock"

// Offload names: the keys of the netconf "offloads" object and of the
// offload switches the plugin, the node agent and the local benchmark hand
// to internal/datapath/offload (map[string]bool, true = on), which maps each
// to its ethtool features. The API and the tuning annotation use the same
// names as JSON fields of their Offloads structs.
const (
	// OffloadTSO is TCP segmentation offload.
	OffloadTSO = "tso"
	// OffloadGSO is generic segmentation offload.
	OffloadGSO = "gso"
	// OffloadGRO is generic receive offload.
	OffloadGRO = "gro"
	// OffloadTXChecksum is transmit checksum offload.
	OffloadTXChecksum = "txChecksum"
)

// QEMUUID and QEMUGID are the user and group KubeVirt's non-root
// virt-launcher runs QEMU as ("qemu", 107:107; kubevirt.io/kubevirt
// pkg/util NonRootUID and the virt-launcher image). The CNI plugin gives
// them a macvtap's /dev/tap<N> on the node, whose mode the kernel makes 0600
// root: the container runtime copies that ownership into the compute
// container, where QEMU must open it. KubeVirt up to v1.4 changed it itself;
// kubevirt/macvtap-cni does the same with the same defaults.
const (
	QEMUUID = 107
	QEMUGID = 107
)
