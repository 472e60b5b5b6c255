package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// NamespaceNotAdmittedError is ResolveNetwork's error when the network's
// spec.namespaceSelector does not select the attachment's namespace: the
// admin's decision, which revokes what the attachment wired.
// +kubebuilder:object:generate=false
type NamespaceNotAdmittedError struct {
	// Network is the FastPathNetwork; Selector its namespaceSelector.
	Network, Selector string
}

func (e *NamespaceNotAdmittedError) Error() string {
	return fmt.Sprintf("spec.networkRef: FastPathNetwork %s does not admit this namespace (its spec.namespaceSelector %s does not select it); ask a cluster admin",
		e.Network, e.Selector)
}

// Defaults of FastPathNetwork (applied in code like the attachment's).
const (
	// DefaultNetworkMinMTU is the smallest MTU the API allows
	// (wellknown.MinMTU, the IPv6 minimum link MTU), bytes.
	DefaultNetworkMinMTU = int32(wellknown.MinMTU)
	// DefaultNetworkMaxMTU is the jumbo-frame MTU of DESIGN §2, bytes.
	DefaultNetworkMaxMTU = DefaultMTU
	// DefaultOffloadPolicy lets tenants choose offloads.
	DefaultOffloadPolicy = OffloadPolicyTenantChoice
	// DefaultPortSecurity filters every bridge port to its own addresses.
	DefaultPortSecurity = PortSecurityEnabled
)

// DefaultNetworkAnnotation set to "true" on one FastPathNetwork makes it the
// network of attachments without spec.networkRef (like the default
// StorageClass). With none, or more than one, such attachments are refused.
const DefaultNetworkAnnotation = "fastpath.io/default-network"

// DefaultNetworkSpec returns a copy of spec with every unset field defaulted:
// datapath LinuxBridge, mtu {min 1280, max 9000, default max}, offloadPolicy
// TenantChoice, every offload On. It never mutates its argument.
func DefaultNetworkSpec(spec FastPathNetworkSpec) FastPathNetworkSpec {
	out := *spec.DeepCopy()
	if out.Datapath == "" {
		out.Datapath = DefaultDatapath
	}
	if out.MTU == nil {
		out.MTU = &MTURange{}
	}
	if out.MTU.Min == nil {
		out.MTU.Min = ptrTo(DefaultNetworkMinMTU)
	}
	if out.MTU.Max == nil {
		out.MTU.Max = ptrTo(max(DefaultNetworkMaxMTU, *out.MTU.Min))
	}
	if out.MTU.Default == nil {
		out.MTU.Default = ptrTo(*out.MTU.Max)
	}
	if out.OffloadPolicy == "" {
		out.OffloadPolicy = DefaultOffloadPolicy
	}
	if out.PortSecurity == "" {
		out.PortSecurity = DefaultPortSecurity
	}
	if out.Offloads == nil {
		out.Offloads = &Offloads{}
	}
	out.Offloads.FillFrom(AllOffloads(OffloadOn))
	return out
}

// NetworkRefName returns the FastPathNetwork an attachment names, or "" when
// it names none (the default network applies).
func NetworkRefName(spec *FastPathAttachmentSpec) string {
	if spec.NetworkRef == nil {
		return ""
	}
	return spec.NetworkRef.Name
}

// ResolveNetwork returns the attachment spec as it applies on network: the
// attachment's defaults (DefaultAttachmentSpec) with spec.network.datapath
// and bridge taken from the network, mtu defaulted to the network's
// spec.mtu.default and offloads to its spec.offloads. nsLabels are the labels
// of the attachment's namespace.
//
// It fails, naming the field, when the network's namespaceSelector does not
// select the namespace (spec.networkRef), when the attachment sets
// spec.network.bridge or datapath, when spec.network.mtu is outside the
// network's spec.mtu bounds, when an offload differs from a Fixed
// network's, or when an offload is Off on a Macvtap network. A spec without spec.network is returned defaulted and unchecked.
func ResolveNetwork(spec FastPathAttachmentSpec, nsLabels map[string]string, network *FastPathNetwork) (FastPathAttachmentSpec, error) {
	if spec.Network == nil {
		return DefaultAttachmentSpec(spec), nil
	}
	net := DefaultNetworkSpec(network.Spec)
	sel, err := metav1.LabelSelectorAsSelector(&net.NamespaceSelector)
	if err != nil {
		return spec, fmt.Errorf("spec.networkRef: FastPathNetwork %s has an invalid spec.namespaceSelector: %v", network.Name, err)
	}
	if !sel.Matches(labels.Set(nsLabels)) {
		return spec, &NamespaceNotAdmittedError{Network: network.Name, Selector: sel.String()}
	}
	n := spec.Network
	if n.Bridge != "" {
		return spec, fmt.Errorf("spec.network.bridge %q is not accepted: the bridge is FastPathNetwork %s's (spec.bridge %s)", n.Bridge, network.Name, net.Bridge)
	}
	if n.Datapath != "" {
		return spec, fmt.Errorf("spec.network.datapath %q is not accepted: the datapath is FastPathNetwork %s's (spec.datapath %s)", n.Datapath, network.Name, net.Datapath)
	}
	if n.MTU != nil && (*n.MTU < *net.MTU.Min || *n.MTU > *net.MTU.Max) {
		return spec, fmt.Errorf("spec.network.mtu %d is outside FastPathNetwork %s's bounds: must be %d-%d (its spec.mtu)", *n.MTU, network.Name, *net.MTU.Min, *net.MTU.Max)
	}
	if n.Offloads != nil && net.OffloadPolicy == OffloadPolicyFixed {
		for _, row := range wellknown.Offloads {
			got, want := *n.Offloads.Offload(row.Name), *net.Offloads.Offload(row.Name)
			if got != "" && got != want {
				return spec, fmt.Errorf("spec.network.offloads.%s %s is not accepted: FastPathNetwork %s fixes it to %s (spec.offloadPolicy Fixed)", row.Name, got, network.Name, want)
			}
		}
	}
	if n.Offloads != nil && net.Datapath == DatapathMacvtap {
		for _, row := range wellknown.Offloads {
			if *n.Offloads.Offload(row.Name) == OffloadOff {
				return spec, fmt.Errorf("spec.network.offloads.%s Off is not accepted: FastPathNetwork %s uses datapath Macvtap, where the kernel keeps a macvtap's offloads on or takes them from its lower device, whose offloads the node agent turns on", row.Name, network.Name)
			}
		}
	}
	out := *spec.DeepCopy()
	on := out.Network
	on.Datapath, on.Bridge = net.Datapath, net.Bridge
	if on.MTU == nil {
		on.MTU = ptrTo(*net.MTU.Default)
	}
	if on.Offloads == nil {
		on.Offloads = &Offloads{}
	}
	on.Offloads.FillFrom(*net.Offloads)
	return DefaultAttachmentSpec(out), nil
}
