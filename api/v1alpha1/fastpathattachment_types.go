package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Placement says whether the VMs of one attachment are co-located on one node.
// +kubebuilder:validation:Enum=Required;Preferred;None
type Placement string

const (
	// PlacementRequired adds required pod affinity (topologyKey kubernetes.io/hostname)
	// between the VMs of the attachment: a VM that cannot join its siblings stays Pending.
	PlacementRequired Placement = "Required"
	// PlacementPreferred adds preferred pod affinity (weight 100).
	PlacementPreferred Placement = "Preferred"
	// PlacementNone adds no affinity; VMs on other nodes get no fast path to each other.
	PlacementNone Placement = "None"
)

// Eviction says what the operator does when a member VM must leave its node:
// a drain's eviction, KubeVirt's workload updater or a user's
// VirtualMachineInstanceMigration.
// +kubebuilder:validation:Enum=MigrateTogether;MigrateAlone
type Eviction string

const (
	// EvictionMigrateTogether moves every member VM on the node being left to
	// one other node, live, so the fast path works again there: the VMs get
	// KubeVirt's evictionStrategy External (KubeVirt denies the eviction and
	// marks the VMI, the operator migrates the group) and a migration of one
	// member that the operator did not start is replaced by a move of the
	// group. When no node can take them all, nothing moves and the drain
	// waits; the attachment's MovedTogether condition and an Event say why.
	EvictionMigrateTogether Eviction = "MigrateTogether"
	// EvictionMigrateAlone leaves each VM to KubeVirt: the cluster's eviction
	// strategy applies and a VM may end up on a node without its peers.
	EvictionMigrateAlone Eviction = "MigrateAlone"
)

// Datapath is the node-local switch that carries the fast virtio-net path.
// +kubebuilder:validation:Enum=LinuxBridge;OVS;Macvtap
type Datapath string

const (
	// DatapathLinuxBridge switches in a Linux bridge (veth host end enslaved).
	DatapathLinuxBridge Datapath = wellknown.DatapathLinuxBridge
	// DatapathOVS switches in an Open vSwitch bridge (veth host end added as a port).
	DatapathOVS Datapath = wellknown.DatapathOVS
	// DatapathMacvtap gives each pod a bridge-mode macvtap on a node-local
	// lower device the node agent owns: frames between two pods of the network
	// are switched by the kernel's macvlan code between siblings of that lower
	// device, with no veth and no bridge lookup (docs/design.md §2). VMs use it
	// through KubeVirt's macvtap network binding (docs/install.md).
	DatapathMacvtap Datapath = wellknown.DatapathMacvtap
)

// OffloadState turns one offload on or off.
// +kubebuilder:validation:Enum=On;Off
type OffloadState string

const (
	// OffloadOn enables the offload.
	OffloadOn OffloadState = "On"
	// OffloadOff disables the offload.
	OffloadOff OffloadState = "Off"
)

// FastPathAttachmentSpec declares the fast paths of a set of VMs.
// +kubebuilder:validation:XValidation:rule="has(self.network) || has(self.vsock)",message="at least one of spec.network or spec.vsock must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.eviction) || self.eviction != 'MigrateTogether' || !has(self.placement) || self.placement != 'None'",message="spec.eviction MigrateTogether needs spec.placement Required or Preferred: VMs placed apart have no group to move",fieldPath=".eviction"
// +kubebuilder:validation:XValidation:rule="has(self.network) || !has(self.vsock) || !has(self.vsock.mode) || self.vsock.mode != 'Sibling'",message="spec.vsock.mode Sibling needs spec.network: the domain hook that adds the vhost-user-vsock device runs as the sidecar of Fastpath's network binding plugin, which KubeVirt starts only for a VM with an interface of that binding",fieldPath=".vsock.mode"
type FastPathAttachmentSpec struct {
	// vmSelector selects KubeVirt VirtualMachines in the attachment's namespace by
	// their metadata labels.
	// +required
	VMSelector metav1.LabelSelector `json:"vmSelector"`

	// placement co-locates the selected VMs on one node: Required | Preferred | None.
	// Default Required (DefaultPlacement).
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// eviction says what happens when a member VM must leave its node (a
	// drain, KubeVirt's workload updater, a VirtualMachineInstanceMigration):
	// MigrateTogether | MigrateAlone. Default: MigrateTogether for placement
	// Required and Preferred, MigrateAlone for None (DefaultEviction).
	// +optional
	Eviction Eviction `json:"eviction,omitempty"`

	// networkRef names the cluster-scoped FastPathNetwork (made by a cluster
	// admin) that spec.network attaches to: its datapath and bridge, and the
	// bounds spec.network.mtu and spec.network.offloads must respect. The
	// network's namespaceSelector must select this attachment's namespace.
	// Default: the FastPathNetwork annotated fastpath.io/default-network=true
	// (exactly one may be).
	// +optional
	NetworkRef *NetworkReference `json:"networkRef,omitempty"`

	// network is the fast virtio-net path: a node-local network with jumbo frames
	// and offloads, delivered as a Multus NetworkAttachmentDefinition, on the
	// FastPathNetwork of spec.networkRef.
	// +optional
	Network *NetworkSpec `json:"network,omitempty"`

	// vsock is the path without an IP stack: virtio-vsock plus either the node
	// agent's relay (mode Relay) or the node's vhost-user vsock backend that joins
	// the guests directly (mode Sibling).
	// +optional
	VSOCK *VSOCKSpec `json:"vsock,omitempty"`
}

// NetworkReference names a cluster-scoped FastPathNetwork.
type NetworkReference struct {
	// name of the FastPathNetwork.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// NetworkSpec is the fast virtio-net path of an attachment.
// +kubebuilder:validation:XValidation:rule="!has(self.txQueueSize) || self.txQueueSize == 256",message="spec.network.txQueueSize must be 256: vhost-net supports no larger tx queue (larger sizes need vhost-user)"
// +kubebuilder:validation:XValidation:rule="!has(self.bridge)",message="spec.network.bridge is not accepted: node bridges belong to cluster admins; name a FastPathNetwork in spec.networkRef",fieldPath=".bridge"
// +kubebuilder:validation:XValidation:rule="!has(self.datapath)",message="spec.network.datapath is not accepted: the datapath is the FastPathNetwork's (spec.networkRef)",fieldPath=".datapath"
type NetworkSpec struct {
	// datapath is refused by the API server: the datapath comes from the
	// FastPathNetwork of spec.networkRef. Kept in the schema so an old
	// manifest fails with a message naming the field instead of being pruned.
	// The operator fills it in its in-memory view after resolving the network.
	// +optional
	Datapath Datapath `json:"datapath,omitempty"`

	// bridge is refused by the API server, like datapath: tenants do not
	// choose node bridges or macvtap lower devices (1-15 characters of
	// [a-zA-Z0-9_.-] when filled in by the operator from the FastPathNetwork).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_.-]{1,15}$`
	Bridge string `json:"bridge,omitempty"`

	// mtu is the MTU in bytes of both veth ends (of the macvtap on datapath
	// Macvtap) and (through virtio host_mtu) the guest: 1280-65535, and inside the FastPathNetwork's spec.mtu bounds.
	// Same-node frames never touch a wire, so "super-jumbo" sizes are legal.
	// Default: the network's spec.mtu.default.
	// +optional
	// +kubebuilder:validation:Minimum=1280
	// +kubebuilder:validation:Maximum=65535
	MTU *int32 `json:"mtu,omitempty"`

	// offloads turns each NIC offload on or off on the pod interface and the
	// guest NIC. Each defaults to the network's
	// spec.offloads; under the network's offloadPolicy Fixed a different value
	// is refused.
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`

	// rxQueueSize is the virtio-net RX ring size in descriptors: 256 | 512 | 1024
	// (QEMU's limits with vhost-net). Default 1024. Applied by the domain hook.
	// +optional
	// +kubebuilder:validation:Enum=256;512;1024
	RxQueueSize *int32 `json:"rxQueueSize,omitempty"`

	// txQueueSize is the virtio-net TX ring size in descriptors. With vhost-net
	// QEMU accepts only 256. Default 256.
	// +optional
	// +kubebuilder:validation:Enum=256;512;1024
	TxQueueSize *int32 `json:"txQueueSize,omitempty"`

	// queues is the number of virtio-net queue pairs (multiqueue): 1-256, capped by
	// the VM's vCPUs. Default 1 (no multiqueue).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	Queues *int32 `json:"queues,omitempty"`

	// ipam gives the pod interface an address from a node-local range (host-local
	// IPAM); the subnet may repeat on every node because the network never leaves one.
	// +required
	IPAM IPAMSpec `json:"ipam"`
}

// Offloads are the NIC offloads of the fast path. TSO and jumbo frames each gave
// up to 2x throughput in the ESX networking talk.
type Offloads struct {
	// tso is TCP segmentation offload: On | Off. Default On.
	// +optional
	TSO OffloadState `json:"tso,omitempty"`
	// gso is generic segmentation offload: On | Off. Default On.
	// +optional
	GSO OffloadState `json:"gso,omitempty"`
	// gro is generic receive offload: On | Off. Default On.
	// +optional
	GRO OffloadState `json:"gro,omitempty"`
	// txChecksum is TX checksum offload: On | Off. Default On.
	// +optional
	TXChecksum OffloadState `json:"txChecksum,omitempty"`
	// rxChecksum is RX checksum offload: On | Off. Default On.
	// +optional
	RXChecksum OffloadState `json:"rxChecksum,omitempty"`
}

// IPAMSpec is the address range of the node-local network.
// +kubebuilder:validation:XValidation:rule="isCIDR(self.subnet)",message="spec.network.ipam.subnet must be a CIDR such as 10.250.0.0/24"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeStart) || (isCIDR(self.subnet) && isIP(self.rangeStart) && cidr(self.subnet).containsIP(self.rangeStart))",message="spec.network.ipam.rangeStart must be an IP inside spec.network.ipam.subnet"
// +kubebuilder:validation:XValidation:rule="!has(self.rangeEnd) || (isCIDR(self.subnet) && isIP(self.rangeEnd) && cidr(self.subnet).containsIP(self.rangeEnd))",message="spec.network.ipam.rangeEnd must be an IP inside spec.network.ipam.subnet"
type IPAMSpec struct {
	// subnet is an IPv4 or IPv6 CIDR, e.g. 10.250.0.0/24.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=43
	Subnet string `json:"subnet"`
	// rangeStart is the first address handed out (default: the subnet's first host).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	RangeStart string `json:"rangeStart,omitempty"`
	// rangeEnd is the last address handed out (default: the subnet's last host).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	RangeEnd string `json:"rangeEnd,omitempty"`
}

// VSOCKMode is how the guests of an attachment reach each other's vsock services.
// +kubebuilder:validation:Enum=Relay;Sibling
type VSOCKMode string

const (
	// VSOCKModeRelay: KubeVirt's kernel vhost-vsock device; a guest dials the host
	// (CID 2) at a relay port and the node agent's relay copies the bytes to the
	// target guest. Works on every node with /dev/vhost-vsock.
	VSOCKModeRelay VSOCKMode = "Relay"
	// VSOCKModeSibling: the domain hook swaps KubeVirt's kernel vsock device for a
	// vhost-user-vsock device served by the node agent's vhost-device-vsock, which
	// puts the attachment's VMs in one group: a guest dials the target VM's CID and
	// the service port directly, with no copy on the host. Needs a node whose
	// FastPathNode reports capabilities.vhostUserVSOCK (docs/vsock-sibling.md).
	VSOCKModeSibling VSOCKMode = "Sibling"
)

// VSOCKSpec declares the vsock services the attachment's VMs may reach.
type VSOCKSpec struct {
	// mode is Relay (default: kernel vhost-vsock plus the node agent's relay) or
	// Sibling (vhost-user vsock backend, guests dial each other's CID directly).
	// +optional
	Mode VSOCKMode `json:"mode,omitempty"`

	// services are the guest vsock listeners the other VMs of the attachment may
	// reach; names are unique in the list.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Services []VSOCKService `json:"services"`
}

// VSOCKService is one vsock listener in one guest.
type VSOCKService struct {
	// name is a DNS label (RFC 1123), unique in the list.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// vm names the target VirtualMachine; it must be one of the selected VMs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	VM string `json:"vm"`
	// port is the vsock port the target guest listens on: 1-4294967294
	// (uint32; 0xFFFFFFFF is VMADDR_PORT_ANY).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967294
	Port int64 `json:"port"`
}

// FastPathAttachmentStatus is what the operator observed and did.
type FastPathAttachmentStatus struct {
	// observedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, NetworkAttachmentReady, VMsWired, Colocated, VSOCKReady,
	// NodesReady (reasons in conditions.go).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// networkAttachmentDefinition is the namespace/name of the NAD the operator owns.
	// +optional
	NetworkAttachmentDefinition string `json:"networkAttachmentDefinition,omitempty"`

	// network is the FastPathNetwork the attachment's NetworkAttachmentDefinition
	// was last rendered on; empty when it is on none.
	// +optional
	Network string `json:"network,omitempty"`

	// bridge is that network's spec.bridge (the node bridge, or lower device
	// on datapath Macvtap) the running VMs were wired to. When the network is
	// deleted, or its bridge or the attachment's network changes, the
	// operator restarts the running VMIs still on this one.
	// +optional
	Bridge string `json:"bridge,omitempty"`

	// subnet is the spec.network.ipam.subnet (CIDR, masked) the attachment
	// holds on status.network: set when it passed the one-address-per-port
	// check there, cleared when it is refused or leaves the network. While
	// an attachment holds a subnet, another asking for an overlapping one on
	// that network is refused (SubnetConflict) whichever is older, so an
	// older attachment cannot take a later one's subnet by changing its own.
	// +optional
	Subnet string `json:"subnet,omitempty"`

	// datapath is the effective datapath after defaulting (for printing).
	// +optional
	Datapath Datapath `json:"datapath,omitempty"`

	// mtu is the effective MTU in bytes after defaulting (for printing).
	// +optional
	MTU int32 `json:"mtu,omitempty"`

	// selectedVMs counts the VirtualMachines the selector matches.
	// +optional
	SelectedVMs int32 `json:"selectedVMs,omitempty"`

	// wiredVMs counts the selected VMs whose template carries this attachment's wiring.
	// +optional
	WiredVMs int32 `json:"wiredVMs,omitempty"`

	// vms has one entry per selected VM.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	VMs []VMStatus `json:"vms,omitempty"`

	// move is the group move in progress (spec.eviction MigrateTogether):
	// the member VMs that were on node from, migrating together to node to.
	// Unset when no move runs; the MovedTogether condition tells the last
	// one's outcome.
	// +optional
	Move *MoveStatus `json:"move,omitempty"`

	// vsockServices are the relay routes: one per declared service.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	VSOCKServices []VSOCKServiceStatus `json:"vsockServices,omitempty"`
}

// VMStatus is the state of one selected VM.
type VMStatus struct {
	// name of the VirtualMachine.
	Name string `json:"name"`
	// wired is true when the VM template carries this attachment's network, interface
	// and tuning.
	// +optional
	Wired bool `json:"wired,omitempty"`
	// node is the VMI's status.nodeName (empty while the VM is not running).
	// +optional
	Node string `json:"node,omitempty"`
	// interface is the fast-path interface name inside the guest, from the VMI status.
	// +optional
	Interface string `json:"interface,omitempty"`
	// podInterface is the virt-launcher pod interface name (CNI_IFNAME).
	// +optional
	PodInterface string `json:"podInterface,omitempty"`
	// mac is the fast-path interface MAC, from the VMI status.
	// +optional
	MAC string `json:"mac,omitempty"`
	// ips are the fast-path interface addresses, from the VMI status.
	// +optional
	// +listType=atomic
	IPs []string `json:"ips,omitempty"`
	// mtu is the configured fast-path MTU in bytes.
	// +optional
	MTU int32 `json:"mtu,omitempty"`
	// cid is the guest's vsock context ID: in mode Relay KubeVirt's (VMI
	// status.VSOCKCID), unset when the VMI has none; in mode Sibling the CID the
	// operator allocated in the attachment's group (3-65535, stable while the VM
	// stays selected), which the guest's vhost-user vsock device reports.
	// +optional
	CID *int64 `json:"cid,omitempty"`
	// vsockMode is the vsock mode the VM got: Relay or Sibling; empty without
	// spec.vsock.
	// +optional
	VSOCKMode VSOCKMode `json:"vsockMode,omitempty"`
	// vsockMessage says why the VM got that mode or why it does not work yet
	// (e.g. its node cannot do Sibling).
	// +optional
	VSOCKMessage string `json:"vsockMessage,omitempty"`
	// relayPorts are the host (CID 2) ports this VM dials to reach each service.
	// +optional
	// +listType=map
	// +listMapKey=service
	RelayPorts []RelayPort `json:"relayPorts,omitempty"`
	// restartRequired is true when a running VMI lacks the wiring its VM template
	// now has: the operator never restarts a VM; restart it to apply.
	// +optional
	RestartRequired bool `json:"restartRequired,omitempty"`
	// message explains the state in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// MoveStatus is one move of a group of member VMs to another node.
type MoveStatus struct {
	// from is the node the VMs leave.
	From string `json:"from"`
	// to is the node the operator chose for all of them: schedulable, its
	// FastPathNode Ready for the attachment's network, with room for every VM
	// (the requests of their virt-launcher pods).
	To string `json:"to"`
	// vms are the VMs that move, by name.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	VMs []string `json:"vms"`
	// cause is what started the move: Eviction (a VMI marked for evacuation,
	// as a drain does) or Migration (a VirtualMachineInstanceMigration of a
	// member that the operator did not create, such as KubeVirt's workload
	// updater's or a user's).
	// +kubebuilder:validation:Enum=Eviction;Migration
	Cause string `json:"cause"`
	// startTime is when the operator started the move.
	StartTime metav1.Time `json:"startTime"`
	// attempts counts the migrations the operator created for the move,
	// retries included (at most MaxMoveAttempts per VM).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// Causes of a move (MoveStatus.Cause).
const (
	MoveCauseEviction  = "Eviction"
	MoveCauseMigration = "Migration"
)

// RelayPort maps a service name to the host relay port a guest dials at CID 2.
type RelayPort struct {
	// service name from spec.vsock.services.
	Service string `json:"service"`
	// port is the relay's vsock listen port on the host.
	Port int64 `json:"port"`
}

// VSOCKServiceStatus is one service. Mode Relay: guests selected by the
// attachment dial (CID 2, relayPort) and the relay forwards to (targetCID, port)
// on node. Mode Sibling: guests dial address (targetCID:port) directly.
type VSOCKServiceStatus struct {
	// name of the service.
	Name string `json:"name"`
	// mode is the attachment's vsock mode: Relay or Sibling.
	// +optional
	Mode VSOCKMode `json:"mode,omitempty"`
	// address is what a guest dials: "<cid>:<port>" (mode Sibling, the target's
	// CID in the group) or "2:<relayPort>" (mode Relay); empty while unknown.
	// +optional
	Address string `json:"address,omitempty"`
	// vm is the target VM.
	VM string `json:"vm"`
	// port is the guest vsock port of the target.
	Port int64 `json:"port"`
	// relayPort is the host vsock port allocated for the service: unique per node
	// and stable while the attachment lives.
	// +optional
	RelayPort int64 `json:"relayPort,omitempty"`
	// node is where the target VM runs.
	// +optional
	Node string `json:"node,omitempty"`
	// targetCID is the target guest's CID.
	// +optional
	TargetCID *int64 `json:"targetCID,omitempty"`
	// allowedCIDs are the source CIDs the relay accepts: the other selected VMs on
	// the same node.
	// +optional
	// +listType=set
	AllowedCIDs []int64 `json:"allowedCIDs,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fpa,categories=fastpath
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Datapath",type=string,JSONPath=`.status.datapath`
// +kubebuilder:printcolumn:name="MTU",type=integer,JSONPath=`.status.mtu`
// +kubebuilder:printcolumn:name="VSOCK",type=string,JSONPath=`.spec.vsock.mode`,priority=1
// +kubebuilder:printcolumn:name="Eviction",type=string,JSONPath=`.spec.eviction`,priority=1
// +kubebuilder:printcolumn:name="VMs",type=integer,JSONPath=`.status.wiredVMs`
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selectedVMs`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FastPathAttachment declares fast-path network attachments for a set of KubeVirt VMs.
type FastPathAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FastPathAttachmentSpec `json:"spec"`
	// +optional
	Status FastPathAttachmentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FastPathAttachmentList is a list of FastPathAttachment.
type FastPathAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FastPathAttachment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FastPathAttachment{}, &FastPathAttachmentList{})
}
