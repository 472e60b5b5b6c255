package portsec

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// EgressTable is the nftables table (family netdev) in a pod's network
// namespace that holds the egress port security of its fastpath interfaces.
//
// It serves the datapaths whose bridge port the host's bridge family cannot
// see: an OVS port is no Linux bridge port, and userspace OVS
// (datapath_type=netdev) reads its ports with AF_PACKET, which the kernel
// serves before any ingress hook on the host end. So the frames are
// filtered where they leave the pod instead: the egress hook (Linux 5.16+)
// of the pod's end of the veth, which every frame of the guest passes
// (KubeVirt's bridge binding forwards them from the tap through its in-pod
// bridge out of that interface) before the host end and the switch see it.
// Nothing a guest controls can reach the pod's netfilter; virt-launcher
// runs without NET_ADMIN.
const EgressTable = "fastpath"

// EgressChainName returns the chain of ifName in EgressTable: "egress-<ifName>".
func EgressChainName(ifName string) string { return "egress-" + ifName }

// egressTable is EgressTable in a pod's network namespace.
var egressTable = &nftables.Table{Family: nftables.TableFamilyNetdev, Name: EgressTable}

// egressChain is ifName's base chain on its egress hook, "type filter hook
// egress device <ifName> priority filter; policy accept;".
func egressChain(ifName string) *nftables.Chain {
	return &nftables.Chain{Name: EgressChainName(ifName), Table: egressTable, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookEgress, Priority: nftables.ChainPriorityFilter, Device: ifName,
		Policy: ptr(nftables.ChainPolicyAccept)}
}

// ApplyEgress installs p's rules on the egress of ifName in the caller's
// network namespace (run it inside the pod's netns, e.g. in ns.Do: the
// netlink socket is opened from the calling thread), in one nftables
// transaction: the table, the base chain on ifName's egress hook and p's
// rules (p.HostIf is not used). Frames ifName sends before ApplyEgress
// returns are not filtered, so call it before the interface carries
// traffic.
//
// It reads the chain first (one netlink request). In a new pod namespace
// there is none, and the batch only creates objects (see Apply for why
// that matters). A chain of the same name that an earlier interface of
// that name left is replaced in the same batch (flushed, deleted and made
// again), so that the hook is the new interface's.
func ApplyEgress(ctx context.Context, ifName string, p Port) error {
	if len(p.MAC) != 6 {
		return fmt.Errorf("failed to apply port security to %s: MAC %q is not a 48-bit MAC address", ifName, p.MAC)
	}
	if !validIfName(ifName) {
		return fmt.Errorf("failed to apply port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", ifName)
	}
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", ifName, err)
	}
	defer c.close()
	chain := egressChain(ifName)
	_, err = c.getChain(egressTable.Family, EgressTable, chain.Name)
	if err != nil && !notFound(err) {
		return fmt.Errorf("failed to apply port security to %s: failed to read chain netdev %s %s: %w", ifName, EgressTable, chain.Name, err)
	}
	c.AddTable(egressTable)
	if err == nil {
		c.FlushChain(chain)
		c.DelChain(chain)
	}
	c.AddChain(chain)
	if err := (&batch{c: c, table: egressTable}).addRules(chain, p); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", ifName, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("failed to apply port security to %s: %w", ifName, err)
	}
	return nil
}

// RemoveEgress deletes ifName's chain in the caller's network namespace;
// none is success.
func RemoveEgress(ctx context.Context, ifName string) error {
	if !validIfName(ifName) {
		return fmt.Errorf("failed to remove port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", ifName)
	}
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to remove port security of %s: %w", ifName, err)
	}
	defer c.close()
	chain := egressChain(ifName)
	c.FlushChain(chain)
	c.DelChain(chain)
	if err := c.Flush(); err != nil && !notFound(err) {
		return fmt.Errorf("failed to remove port security of %s: %w", ifName, err)
	}
	return nil
}

// CheckEgress verifies, in the caller's network namespace, that ifName's
// chain exists on its egress hook.
func CheckEgress(ctx context.Context, ifName string) error {
	if !validIfName(ifName) {
		return fmt.Errorf("failed to check port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", ifName)
	}
	c, err := dialCtx(ctx)
	if err != nil {
		return fmt.Errorf("failed to check port security of %s: %w", ifName, err)
	}
	defer c.close()
	name := EgressChainName(ifName)
	info, err := c.getChain(egressTable.Family, EgressTable, name)
	if err != nil {
		return fmt.Errorf("port security of %s is missing: cannot read chain netdev %s %s: %w", ifName, EgressTable, name, err)
	}
	if !info.base || info.hook != unix.NF_NETDEV_EGRESS || !slices.Contains(info.devices, ifName) {
		return fmt.Errorf("port security of %s is missing: chain netdev %s %s is not on %s's egress hook", ifName, EgressTable, name, ifName)
	}
	return nil
}
