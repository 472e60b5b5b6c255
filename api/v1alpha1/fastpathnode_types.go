package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FastPathNodeStatus is what the node agent found and did on one node.
type FastPathNodeStatus struct {
	// capabilities are the probed kernel devices and switches.
	// +optional
	Capabilities NodeCapabilities `json:"capabilities,omitempty"`
	// bridges are the fast-path bridges the agent ensures on this node.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Bridges []BridgeStatus `json:"bridges,omitempty"`
	// relayListeners are the vsock sibling-relay listeners on this node.
	// +optional
	// +listType=map
	// +listMapKey=port
	// +kubebuilder:validation:MaxItems=1024
	RelayListeners []RelayListenerStatus `json:"relayListeners,omitempty"`
	// relayLimits are the vsock relay's limits (agent flags --relay-*).
	// +optional
	RelayLimits *RelayLimits `json:"relayLimits,omitempty"`
	// siblingBackends are the vhost-device-vsock processes the agent supervises:
	// one per FastPathAttachment in vsock mode Sibling.
	// +optional
	// +listType=map
	// +listMapKey=attachment
	// +kubebuilder:validation:MaxItems=256
	SiblingBackends []SiblingBackendStatus `json:"siblingBackends,omitempty"`
	// sysctls are the node tunings the agent checked (with --tune-sysctls, applied).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Sysctls []SysctlStatus `json:"sysctls,omitempty"`
	// cniBinary is the path and sha256 of the installed fastpath CNI binary.
	// +optional
	CNIBinary string `json:"cniBinary,omitempty"`
	// agentVersion is the version of fastpath-agent that wrote this status.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// conditions: Ready, BridgesReady, VSOCKRelayReady (reasons in conditions.go).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeCapabilities are what the node's kernel and switches offer.
type NodeCapabilities struct {
	// vhostNet: /dev/vhost-net exists (in-kernel virtio-net backend).
	// +optional
	VhostNet bool `json:"vhostNet"`
	// vhostVSOCK: /dev/vhost-vsock exists (virtio-vsock backend).
	// +optional
	VhostVSOCK bool `json:"vhostVSOCK"`
	// vhostUserVSOCK: the agent runs vhost-device-vsock (the vhost-user vsock
	// backend of mode Sibling) on this node.
	// +optional
	VhostUserVSOCK bool `json:"vhostUserVSOCK"`
	// vhostUserVSOCKVersion is the backend's version as it reports it (e.g.
	// "0.3.0"); empty when the node has no backend.
	// +optional
	VhostUserVSOCKVersion string `json:"vhostUserVSOCKVersion,omitempty"`
	// tun: /dev/net/tun exists.
	// +optional
	Tun bool `json:"tun"`
	// kernel is the kernel release (uname -r).
	// +optional
	Kernel string `json:"kernel,omitempty"`
	// ovs describes Open vSwitch when its OVSDB answers.
	// +optional
	OVS *OVSInfo `json:"ovs,omitempty"`
	// datapathTypes are the FastPathNetwork datapaths this node can carry:
	// LinuxBridge when the kernel has the bridge driver (/sys/module/bridge),
	// OVS when OVSDB answers, Macvtap when the kernel has macvtap
	// (/sys/class/macvtap).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	DatapathTypes []Datapath `json:"datapathTypes,omitempty"`
}

// OVSInfo describes the node's Open vSwitch.
type OVSInfo struct {
	// reachable: OVSDB answered.
	Reachable bool `json:"reachable"`
	// version is Open_vSwitch ovs_version.
	// +optional
	Version string `json:"version,omitempty"`
	// datapathTypes are Open_vSwitch datapath_types (e.g. netdev, system).
	// +optional
	// +listType=atomic
	DatapathTypes []string `json:"datapathTypes,omitempty"`
	// message explains why OVS is not reachable.
	// +optional
	Message string `json:"message,omitempty"`
}

// BridgeStatus is one node bridge.
type BridgeStatus struct {
	// name of the bridge (of the macvtap lower device on datapath Macvtap).
	Name string `json:"name"`
	// datapath: LinuxBridge | OVS | Macvtap.
	// +optional
	Datapath Datapath `json:"datapath,omitempty"`
	// mtu is the bridge MTU in bytes as read back from the kernel or OVSDB.
	// +optional
	MTU int32 `json:"mtu,omitempty"`
	// ready: the bridge exists, is up and has the wanted MTU.
	// +optional
	Ready bool `json:"ready"`
	// attachments are the namespace/name of the FastPathAttachments that want it.
	// +optional
	// +listType=atomic
	Attachments []string `json:"attachments,omitempty"`
	// network is the FastPathNetwork that owns the bridge.
	// +optional
	Network string `json:"network,omitempty"`
	// message explains a bridge that is not ready (e.g. a datapath conflict).
	// +optional
	Message string `json:"message,omitempty"`
	// resourceName is, on datapath Macvtap, the extended resource the agent's
	// device plugin offers for the macvtap tap devices (/dev/tapN) of this
	// network, e.g. macvtap.fastpath.io/fastpath0; empty without a device
	// plugin.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
}

// RelayListenerStatus is one vsock relay listener.
type RelayListenerStatus struct {
	// port is the host vsock port the relay listens on.
	Port int64 `json:"port"`
	// attachment is the namespace/name of the FastPathAttachment.
	// +optional
	Attachment string `json:"attachment,omitempty"`
	// service name.
	// +optional
	Service string `json:"service,omitempty"`
	// targetCID and targetPort are where accepted connections go.
	// +optional
	TargetCID int64 `json:"targetCID,omitempty"`
	// +optional
	TargetPort int64 `json:"targetPort,omitempty"`
	// allowedCIDs are the accepted source CIDs.
	// +optional
	// +listType=set
	AllowedCIDs []int64 `json:"allowedCIDs,omitempty"`
}

// RelayLimits bound what guests can hold in the vsock relay.
type RelayLimits struct {
	// maxConns caps the relay's connections over all routes.
	MaxConns int32 `json:"maxConns"`
	// maxConnsPerCID caps one source CID's connections over all routes.
	MaxConnsPerCID int32 `json:"maxConnsPerCID"`
	// maxConnsPerRoute caps one route's connections.
	MaxConnsPerRoute int32 `json:"maxConnsPerRoute"`
	// maxConnsPerNamespace caps the connections of one namespace's routes.
	// +optional
	MaxConnsPerNamespace int32 `json:"maxConnsPerNamespace,omitempty"`
	// bufferBudgetBytes caps the bytes of copy buffers lent to busy
	// connections at once (0: none are lent).
	// +optional
	BufferBudgetBytes int64 `json:"bufferBudgetBytes,omitempty"`
	// idleTimeout closes a connection without payload in either direction
	// for this long (0: never).
	IdleTimeout metav1.Duration `json:"idleTimeout"`
	// halfCloseTimeout closes a connection this long after one direction
	// ended while the other has not (0: never).
	HalfCloseTimeout metav1.Duration `json:"halfCloseTimeout"`
}

// SiblingBackendStatus is one supervised vhost-device-vsock process.
type SiblingBackendStatus struct {
	// attachment is the namespace/name of the FastPathAttachment.
	Attachment string `json:"attachment"`
	// running: the process is up and serves every VM's vhost-user socket.
	// +optional
	Running bool `json:"running"`
	// pid of the process; 0 when not running.
	// +optional
	PID int64 `json:"pid,omitempty"`
	// restarts counts the times the agent restarted it after it exited.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// vms are the VMs (name=cid) in its group.
	// +optional
	// +listType=atomic
	VMs []string `json:"vms,omitempty"`
	// message says why it is not running, or what is pending.
	// +optional
	Message string `json:"message,omitempty"`
}

// SysctlStatus is one node sysctl.
type SysctlStatus struct {
	// name in dotted form, e.g. net.core.rmem_max.
	Name string `json:"name"`
	// value now in force.
	// +optional
	Value string `json:"value,omitempty"`
	// applied is true when --tune-sysctls is on and the value in force meets the
	// tuning, whoever wrote it (this agent, an earlier run, or the admin); the
	// agent never lowers a value.
	// +optional
	Applied bool `json:"applied,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fpn,categories=fastpath
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="vhost-net",type=boolean,JSONPath=`.status.capabilities.vhostNet`
// +kubebuilder:printcolumn:name="vhost-vsock",type=boolean,JSONPath=`.status.capabilities.vhostVSOCK`
// +kubebuilder:printcolumn:name="vhost-user-vsock",type=string,JSONPath=`.status.capabilities.vhostUserVSOCKVersion`,priority=1
// +kubebuilder:printcolumn:name="OVS",type=string,JSONPath=`.status.capabilities.ovs.version`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FastPathNode is written by the node agent: one per node, named after the node.
// It has no spec; everything is status.
type FastPathNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status FastPathNodeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FastPathNodeList is a list of FastPathNode.
type FastPathNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FastPathNode `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FastPathNode{}, &FastPathNodeList{})
}
