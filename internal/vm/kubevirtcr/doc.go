// Package kubevirtcr is what Fastpath writes into the KubeVirt CR to be a
// KubeVirt network binding plugin: the entries the CR carries for it under
// spec.configuration.network.binding, writing and removing them, and
// checking that they are there before the operator wires a VM. (The
// reconciler that keeps them there is controllers/bindingplugin.)
//
// KubeVirt runs a binding plugin's sidecarImage in the virt-launcher pod of
// every VMI with an interface of that binding ("binding": {"name": <name>};
// kubevirt/kubevirt v1.7.0 pkg/network/netbinding, NetBindingPluginSidecarList)
// and calls its onDefineDomain hook, the same hook protocol as the
// deprecated hooks.kubevirt.io/hookSidecars annotation but without the
// cluster-wide Sidecar feature gate. Fastpath registers two plugins, both
// with the domain hook as sidecar:
//
//   - "fastpath" (datapaths LinuxBridge and OVS): domainAttachmentType
//     managedTap. virt-launcher makes the tap and the in-pod bridge to the
//     pod interface the fastpath CNI plugin wired, as for its bridge
//     binding, and the domain gets <interface type='ethernet'> on that tap
//     (pkg/network/domainspec, managedTap is handled as tap).
//   - "fastpath-macvtap" (datapath Macvtap): domainAttachmentType tap. The
//     pod interface is the macvtap the CNI plugin made and QEMU opens its
//     /dev/tapN, as with KubeVirt's own macvtap binding.
//
// The registration is an admin's act on a cluster-scoped singleton, so the
// operator writes it only behind --register-binding-plugins (the chart's
// kubevirt.registerBindingPlugins), with RBAC that allows patching that one
// KubeVirt object; the chart's pre-delete hook removes it again
// (fastpath-operator --unregister-binding-plugins). On clusters where the
// KubeVirt CR is managed by another operator (HCO) the admin registers the
// same entries there (docs/install.md#the-binding-plugin).
package kubevirtcr
