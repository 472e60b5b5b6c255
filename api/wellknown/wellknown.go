package wellknown

import (
	"reflect"
	"strings"
)

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

// PortSecurityTable is the node's nftables table (family bridge) where the
// CNI plugin keeps the port security rules of every Linux bridge port
// (cni/pkg/portsec). The name is the mark: the node agent's cleanup
// (internal/node/cleanup) deletes that one table and no other.
const PortSecurityTable = "fastpath"

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
	// OffloadRXChecksum is receive checksum offload.
	OffloadRXChecksum = "rxChecksum"
)

// Offload is one NIC offload of the fast path: one row of Offloads, the one
// list that the API type, the netconf, the plugin's and the agent's ethtool
// switches, the domain hook's libvirt edit, the tuning sweep's candidates and
// the docs range over. A new offload is a new row (plus a field named Name in
// v1alpha1.Offloads and netconf.Offloads, which tests check).
type Offload struct {
	// Name is the key of the netconf "offloads" object and the JSON name of
	// the field in the API's and the tuning annotation's Offloads.
	Name string
	// Ethtool are the kernel feature strings (the long names `ethtool -k`
	// prints) that the switch turns on or off on the host side of an
	// interface, grouped as ethtool(8)'s off_flag_def table groups them. Names
	// a kernel does not know are skipped.
	Ethtool []string
	// EthtoolGroup is the top-level line `ethtool -k` prints for the group
	// (ethtool(8) off_flag_def's long name, e.g. "tcp-segmentation-offload"):
	// what the benchmark runner reads in a VM-mode guest, where it has only
	// the guest's ethtool over SSH.
	EthtoolGroup string
	// Host and Guest are the attributes of libvirt's <driver><host/> and
	// <driver><guest/> that the domain hook sets to on or off for it
	// (libvirt formatdomain "Setting NIC driver-specific options"; QEMU turns
	// them into the virtio-net properties of the same names, host_ and
	// guest_ prefixed).
	Host, Guest []string
	// Summary says what the offload is, for docs and messages.
	Summary string
}

// Offloads is the table of the fast path's offloads, in canonical order
// (the order of status, messages and tuning candidates). Every offload's
// default is on. Sources: ethtool(8) off_flag_def (NETIF_F_ALL_TSO,
// NETIF_F_GSO, NETIF_F_GRO, NETIF_F_CSUM_MASK|NETIF_F_SCTP_CRC|NETIF_F_FCOE_CRC,
// NETIF_F_RXCSUM); virtio 1.2 §5.1.3 for the feature bits behind the libvirt
// attributes: host csum is CSUM (the device takes the guest's packets with a
// partial checksum, the guest's transmit side), guest csum is GUEST_CSUM (the
// guest takes such packets, its receive side).
var Offloads = []Offload{
	{Name: OffloadTSO, EthtoolGroup: "tcp-segmentation-offload", Summary: "TCP segmentation offload",
		Ethtool: []string{"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation"},
		Host:    []string{"tso4", "tso6", "ecn"}},
	{Name: OffloadGSO, EthtoolGroup: "generic-segmentation-offload", Summary: "generic segmentation offload",
		Ethtool: []string{"tx-generic-segmentation"},
		Host:    []string{"gso"}},
	{Name: OffloadGRO, EthtoolGroup: "generic-receive-offload", Summary: "generic receive offload",
		Ethtool: []string{"rx-gro"},
		Guest:   []string{"tso4", "tso6", "ecn"}},
	{Name: OffloadTXChecksum, EthtoolGroup: "tx-checksumming", Summary: "transmit checksum offload",
		Ethtool: []string{"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-fcoe-crc", "tx-checksum-sctp"},
		Host:    []string{"csum"}},
	{Name: OffloadRXChecksum, EthtoolGroup: "rx-checksumming", Summary: "receive checksum offload",
		Ethtool: []string{"rx-checksum"},
		Guest:   []string{"csum"}},
}

// OffloadNames returns the Name of every row of Offloads, in table order.
func OffloadNames() []string {
	out := make([]string, len(Offloads))
	for i, o := range Offloads {
		out[i] = o.Name
	}
	return out
}

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

// OffloadField returns a pointer to the field of the struct *p whose JSON
// name (the first part of its json tag) is name, as a *T; nil when p has no
// such field of type T. The API's, the netconf's and the annotation's
// Offloads structs name their fields after Offloads' rows, so each consumer
// reaches a field by the row's Name instead of listing the fields by hand.
// p must be a non-nil pointer to a struct.
func OffloadField[T any](p any, name string) *T {
	v := reflect.ValueOf(p).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != name {
			continue
		}
		f, ok := v.Field(i).Addr().Interface().(*T)
		if !ok {
			return nil
		}
		return f
	}
	return nil
}

// SSHUserPattern is the form of a FastPathBenchmark's spec.sshUser, the guest
// user the benchmark runner logs in as: a POSIX user name (IEEE Std 1003.1
// §3.437, from the portable filename character set §3.282: letters, digits,
// '.', '_', '-') that starts with a letter or '_', as shadow-utils' useradd
// and Debian's adduser require, so that it can never be read as an option
// ('-…') or a path. At most SSHUserMaxLength characters. The CRD repeats it
// in a CEL rule (controller-gen takes markers only as literals);
// api/v1alpha1's TestCRDSSHUserIsWellKnown holds the two equal, and the
// runner checks its --ssh-user with ValidSSHUser.
const (
	SSHUserPattern   = `^[A-Za-z_][A-Za-z0-9_.-]*$`
	SSHUserMaxLength = 32
)

// ValidSSHUser reports whether s matches SSHUserPattern and is 1 to
// SSHUserMaxLength characters long.
func ValidSSHUser(s string) bool {
	if s == "" || len(s) > SSHUserMaxLength {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r == '_':
		case i > 0 && (r >= '0' && r <= '9' || r == '.' || r == '-'):
		default:
			return false
		}
	}
	return true
}
