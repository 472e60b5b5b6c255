package attachment

import (
	"encoding/json"
	"fmt"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// NetConfCNIVersion is the cniVersion of the rendered netconf (docs/design.md §3.1);
// Multus and the fastpath plugin both speak it.
const NetConfCNIVersion = "1.0.0"

// IPAMPlugin is the IPAM plugin the netconf delegates to: host-local, whose
// per-node allocation fits a network that never leaves one node.
const IPAMPlugin = "host-local"

// RenderOptions are what a netconf takes from the attachment's resolved
// FastPathNetwork rather than from the attachment.
type RenderOptions struct {
	// PortSecurity is the network's spec.portSecurity; "" means
	// v1alpha1.DefaultPortSecurity (Enabled).
	PortSecurity v1alpha1.PortSecurity
}

// RenderNetConf returns the fastpath CNI netconf (docs/design.md §3.1) of an
// attachment: the JSON of netconf.NetConf with the spec's defaults applied
// (v1alpha1.DefaultAttachmentSpec), e.g. for apps/db-link
//
//	{"cniVersion":"1.0.0","name":"fp-apps.db-link","type":"fastpath","namespace":"apps",
//	 "datapath":"LinuxBridge","bridge":"fastpath0","mtu":9000,
//	 "offloads":{"tso":true,"gso":true,"gro":true,"txChecksum":true},
//	 "ipam":{"subnet":"10.250.0.0/24","type":"host-local"}}
//
// The name is unique per namespace (v1alpha1.CNINetworkName) and the
// namespace is the attachment's: the plugin adds only pods of that namespace.
//
// With opts.PortSecurity Disabled it adds "portSecurity": false; otherwise
// the key is absent and the plugin filters each Linux bridge port to its own
// MAC and IPs (netconf.NetConf.PortSecurityOn).
//
// The output is deterministic. It fails when the attachment has no spec.network.
func RenderNetConf(att *v1alpha1.FastPathAttachment, opts RenderOptions) (string, error) {
	spec := v1alpha1.DefaultAttachmentSpec(att.Spec)
	n := spec.Network
	if n == nil {
		return "", fmt.Errorf("failed to render netconf of FastPathAttachment %s/%s: spec.network is not set", att.Namespace, att.Name)
	}
	ipam := netconf.IPAM{"type": IPAMPlugin, "subnet": n.IPAM.Subnet}
	if n.IPAM.RangeStart != "" {
		ipam["rangeStart"] = n.IPAM.RangeStart
	}
	if n.IPAM.RangeEnd != "" {
		ipam["rangeEnd"] = n.IPAM.RangeEnd
	}
	conf := netconf.NetConf{
		CNIVersion: NetConfCNIVersion,
		Name:       v1alpha1.CNINetworkName(att.Namespace, att.Name),
		Type:       wellknown.PluginType,
		Namespace:  att.Namespace,
		Datapath:   string(n.Datapath),
		Bridge:     n.Bridge,
		MTU:        int(*n.MTU),
		Offloads:   netconf.NewOffloads(func(name string) bool { return n.Offloads.Offload(name).On() }),
		IPAM:       ipam,
	}
	if opts.PortSecurity == v1alpha1.PortSecurityDisabled {
		off := false
		conf.PortSecurity = &off
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return "", fmt.Errorf("failed to render netconf of FastPathAttachment %s/%s: %w", att.Namespace, att.Name, err)
	}
	return string(data), nil
}
