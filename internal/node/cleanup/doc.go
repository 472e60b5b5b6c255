// Package cleanup removes from a node what Fastpath made there, for an
// uninstall (`fastpath-agent --cleanup`, run on every node by the chart's
// pre-delete hook; docs/operations.md#uninstalling): the links and OVS bridges
// carrying the agent's marker (bridge.Manager.RemoveManaged: Linux bridges,
// macvtap lower devices and their peers), the CNI plugin's port security table
// (nftables family bridge wellknown.PortSecurityTable), and the files the
// plugin and the agent keep on the node (the plugin binaries, its node
// configuration, its state directory with records and DHCP leases). It
// touches no link without the marker, whatever its name, and no other
// nftables table. Everything it does is idempotent: a second run removes
// nothing and succeeds.
package cleanup
