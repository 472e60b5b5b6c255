package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OffloadPolicy says who chooses a network's offloads.
// +kubebuilder:validation:Enum=TenantChoice;Fixed
type OffloadPolicy string

const (
	// OffloadPolicyTenantChoice lets each attachment set spec.network.offloads;
	// unset keys take the network's spec.offloads.
	OffloadPolicyTenantChoice OffloadPolicy = "TenantChoice"
	// OffloadPolicyFixed applies the network's spec.offloads to every
	// attachment; an attachment that sets a different value is refused.
	OffloadPolicyFixed OffloadPolicy = "Fixed"
)

// PortSecurity says whether a network's bridge ports forward only their own
// addresses.
// +kubebuilder:validation:Enum=Enabled;Disabled
type PortSecurity string

const (
	// PortSecurityEnabled: each VM's (or pod's) bridge port forwards only
	// frames from the MAC and IP addresses its attachment was given.
	PortSecurityEnabled PortSecurity = "Enabled"
	// PortSecurityDisabled: bridge ports forward frames from any source.
	PortSecurityDisabled PortSecurity = "Disabled"
)

// MTURange bounds the MTU attachments may choose on a network, in bytes.
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="spec.mtu.min must not exceed spec.mtu.max"
// +kubebuilder:validation:XValidation:rule="!has(self.default) || ((!has(self.min) || self.min <= self.default) && (!has(self.max) || self.default <= self.max))",message="spec.mtu.default must lie within spec.mtu.min and spec.mtu.max"
type MTURange struct {
	// min is the smallest MTU an attachment may ask for, bytes: 1280-65535.
	// Default 1280.
	// +optional
	// +kubebuilder:validation:Minimum=1280
	// +kubebuilder:validation:Maximum=65535
	Min *int32 `json:"min,omitempty"`
	// max is the largest MTU an attachment may ask for, bytes: 1280-65535. It
	// is also the MTU of the node bridge (a bridge's own MTU does not limit
	// what it forwards between ports, but the CNI plugin refuses a pod MTU
	// above it), or of the macvtap lower device (the kernel refuses a macvtap
	// MTU above its lower device's). Default 9000.
	// +optional
	// +kubebuilder:validation:Minimum=1280
	// +kubebuilder:validation:Maximum=65535
	Max *int32 `json:"max,omitempty"`
	// default is the MTU of attachments that set none, bytes. Default: max.
	// +optional
	// +kubebuilder:validation:Minimum=1280
	// +kubebuilder:validation:Maximum=65535
	Default *int32 `json:"default,omitempty"`
}

// FastPathNetworkSpec is a node-local L2 network a cluster admin offers to
// tenants: which switch, which bridge, the limits attachments must respect,
// and which namespaces may attach.
// +kubebuilder:validation:XValidation:rule="!has(self.tuning) || !has(self.tuning.candidates) || !has(self.tuning.candidates.mtus) || self.tuning.candidates.mtus.all(m, m >= (has(self.mtu) && has(self.mtu.min) ? self.mtu.min : 1280) && m <= (has(self.mtu) && has(self.mtu.max) ? self.mtu.max : 9000))",message="spec.tuning.candidates.mtus must each lie within spec.mtu.min (default 1280) and spec.mtu.max (default 9000)",fieldPath=".tuning.candidates.mtus"
// +kubebuilder:validation:XValidation:rule="!has(self.tuning) || !has(self.tuning.candidates) || !has(self.tuning.candidates.offloads) || ((!has(self.offloadPolicy) || self.offloadPolicy != 'Fixed') && (!has(self.datapath) || self.datapath != 'Macvtap'))",message="spec.tuning.candidates.offloads must be empty when spec.offloadPolicy is Fixed or spec.datapath is Macvtap: only the network's spec.offloads are allowed there",fieldPath=".tuning.candidates.offloads"
// +kubebuilder:validation:XValidation:rule="!has(self.datapath) || self.datapath != 'Macvtap' || self.bridge.matches('^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$')",message="spec.bridge must start and end with a letter or digit when spec.datapath is Macvtap: it names the device plugin resource macvtap.fastpath.io/<bridge>",fieldPath=".bridge"
// +kubebuilder:validation:XValidation:rule="!has(self.datapath) || self.datapath != 'Macvtap' || !has(self.offloads) || ((!has(self.offloads.tso) || self.offloads.tso == 'On') && (!has(self.offloads.gso) || self.offloads.gso == 'On') && (!has(self.offloads.gro) || self.offloads.gro == 'On') && (!has(self.offloads.txChecksum) || self.offloads.txChecksum == 'On') && (!has(self.offloads.rxChecksum) || self.offloads.rxChecksum == 'On'))",message="spec.offloads must all be On when spec.datapath is Macvtap: the kernel keeps a macvtap's offloads on or takes them from its lower device, whose offloads the node agent turns on",fieldPath=".offloads"
type FastPathNetworkSpec struct {
	// datapath is the node switch: LinuxBridge | OVS | Macvtap. Default
	// LinuxBridge. Macvtap gives every pod a bridge-mode macvtap on the
	// node-local lower device spec.bridge; VMs need KubeVirt's macvtap network
	// binding registered (docs/install.md).
	// +optional
	Datapath Datapath `json:"datapath,omitempty"`

	// bridge is the node bridge the node agent creates, marks as its own and
	// tunes on every node: 1-15 characters of [a-zA-Z0-9_.-] (Linux IFNAMSIZ).
	// For datapath Macvtap it is the macvtap lower device instead: the agent
	// creates it as one end of a veth pair whose other end only provides
	// carrier, and it must start and end with a letter or digit (it is part
	// of the extended resource name macvtap.fastpath.io/<bridge>). Tenants
	// never name it: it comes from this network only. The agent never adopts,
	// changes or deletes a link of this name it did not create, and two
	// FastPathNetworks naming one bridge are both refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_.-]{1,15}$`
	Bridge string `json:"bridge"`

	// mtu bounds the MTU of the attachments, bytes. Defaults: min 1280, max
	// 9000, default max.
	// +optional
	MTU *MTURange `json:"mtu,omitempty"`

	// offloadPolicy: TenantChoice (attachments may set spec.network.offloads)
	// | Fixed (spec.offloads applies to all). Default TenantChoice.
	// +optional
	OffloadPolicy OffloadPolicy `json:"offloadPolicy,omitempty"`

	// offloads are the network's offloads: the defaults under TenantChoice,
	// the only values under Fixed. Each defaults to On, and each must be On
	// on datapath Macvtap (the kernel keeps a macvtap's offloads on).
	// +optional
	Offloads *Offloads `json:"offloads,omitempty"`

	// portSecurity: Enabled | Disabled. Default Enabled: each bridge port
	// forwards only frames whose source MAC, ARP sender and IPv4/IPv6 source
	// are the ones its attachment was given (IPv6 link-local sources stay
	// allowed), so a guest cannot pose as a neighbour; the CNI plugin drops
	// the rest with nftables: on datapath LinuxBridge at the bridge port
	// (bridge family, on the node), on datapath OVS on the egress of the
	// pod's interface (netdev family, in the pod's network namespace: OVS
	// ports are not Linux bridge ports). Macvtap interfaces are not filtered
	// yet. Disabled is for guests that route or bridge other addresses.
	// +optional
	PortSecurity PortSecurity `json:"portSecurity,omitempty"`

	// namespaceSelector selects the namespaces whose FastPathAttachments may
	// use this network, by the namespaces' labels (e.g.
	// kubernetes.io/metadata.name). {} selects every namespace: their VMs then
	// share one L2 segment. Required, so that sharing is always a decision.
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// tuning makes the network measure its own datapath on each node and
	// recommend or apply the MTU and offloads that win (issue 27;
	// docs/design.md §5.5). Default: mode Off.
	// +optional
	Tuning *NetworkTuning `json:"tuning,omitempty"`
}

// FastPathNetworkStatus is written by the tuning controller.
type FastPathNetworkStatus struct {
	// observedGeneration is the generation the tuning controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// tuning is the result of the network's sweeps.
	// +optional
	Tuning *NetworkTuningStatus `json:"tuning,omitempty"`
	// inUse is true while a FastPathAttachment's status.network names this
	// network (fastpath-operator keeps it, writing only when it turns). While
	// it is true, spec.bridge cannot change: the running VMs of those
	// attachments are on the bridge.
	// +optional
	InUse bool `json:"inUse,omitempty"`
	// conditions of the network.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fpnet,categories=fastpath
// +kubebuilder:printcolumn:name="Datapath",type=string,JSONPath=`.spec.datapath`
// +kubebuilder:printcolumn:name="Bridge",type=string,JSONPath=`.spec.bridge`
// +kubebuilder:printcolumn:name="MaxMTU",type=integer,JSONPath=`.spec.mtu.max`
// +kubebuilder:printcolumn:name="Tuning",type=string,JSONPath=`.spec.tuning.mode`
// +kubebuilder:printcolumn:name="TuningReady",type=string,JSONPath=`.status.conditions[?(@.type=="TuningReady")].reason`
// +kubebuilder:printcolumn:name="InUse",type=boolean,JSONPath=`.status.inUse`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.inUse) || !oldSelf.status.inUse || self.spec.bridge == oldSelf.spec.bridge",message="spec.bridge cannot change while FastPathAttachments use the network (status.inUse): their running VMs are on the old bridge; delete those attachments first, or create another network"

// FastPathNetwork is a cluster-scoped, admin-owned node-local network that
// FastPathAttachments name in spec.networkRef. Only cluster admins write it
// (the chart aggregates no FastPathNetwork rights into admin or edit).
type FastPathNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FastPathNetworkSpec `json:"spec"`
	// +optional
	Status FastPathNetworkStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FastPathNetworkList is a list of FastPathNetwork.
type FastPathNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FastPathNetwork `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FastPathNetwork{}, &FastPathNetworkList{})
}
