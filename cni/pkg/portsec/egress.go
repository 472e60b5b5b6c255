package portsec

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
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

// EgressScript returns the nftables script ApplyEgress runs: the table, the
// base chain on ifName's egress hook, and p's rules (p.HostIf is not used).
// The chain is created ("create chain"), not added: the script fails with
// "File exists", changing nothing, when the chain is already there.
func EgressScript(ifName string, p Port) string {
	var b strings.Builder
	t, chain := "netdev "+EgressTable, EgressChainName(ifName)
	fmt.Fprintf(&b, "add table %s { comment \"fastpath port security: each fastpath interface sends only its own MAC and IPs\" ; }\n", t)
	fmt.Fprintf(&b, "create chain %s %s { type filter hook egress device \"%s\" priority filter ; policy accept ; }\n", t, chain, ifName)
	for _, r := range p.Rules() {
		fmt.Fprintf(&b, "add rule %s %s %s\n", t, chain, r)
	}
	return b.String()
}

// ApplyEgress installs p's rules on the egress of ifName in the caller's
// network namespace (run it inside the pod's netns, e.g. in ns.Do: nft is
// executed from the calling thread). Frames ifName sends before ApplyEgress
// returns are not filtered, so call it before the interface carries traffic.
//
// In a new pod namespace it executes nft once, with EgressScript, which
// only creates objects (see Apply for why that matters). A chain of the same
// name that an earlier interface of that name left is replaced, so that the
// hook is the new interface's: when EgressScript finds it, ApplyEgress
// removes it (RemoveEgress) and runs EgressScript again.
func ApplyEgress(ctx context.Context, ifName string, p Port) error {
	if len(p.MAC) != 6 {
		return fmt.Errorf("failed to apply port security to %s: MAC %q is not a 48-bit MAC address", ifName, p.MAC)
	}
	if !validIfName(ifName) {
		return fmt.Errorf("failed to apply port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", ifName)
	}
	_, err := run(ctx, EgressScript(ifName, p))
	if exists(err) {
		if err := RemoveEgress(ctx, ifName); err != nil {
			return err
		}
		_, err = run(ctx, EgressScript(ifName, p))
	}
	if err != nil {
		return fmt.Errorf("failed to apply port security to %s (it needs the nft binary on the node): %w", ifName, err)
	}
	return nil
}

// RemoveEgress deletes ifName's chain in the caller's network namespace;
// none is success.
func RemoveEgress(ctx context.Context, ifName string) error {
	if !validIfName(ifName) {
		return fmt.Errorf("failed to remove port security: interface name %q is not 1-15 characters of [a-zA-Z0-9_.-]", ifName)
	}
	t, chain := "netdev "+EgressTable, EgressChainName(ifName)
	if _, err := run(ctx, fmt.Sprintf("flush chain %s %s\ndelete chain %s %s\n", t, chain, t, chain)); err != nil && !notFound(err) {
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
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, nftBinary, "list", "chain", "netdev", EgressTable, EgressChainName(ifName))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("port security of %s is missing: cannot list chain netdev %s %s: %w: %s", ifName, EgressTable, EgressChainName(ifName), err, strings.TrimSpace(stderr.String()))
	}
	if !strings.Contains(stdout.String(), `hook egress device "`+ifName+`"`) {
		return fmt.Errorf("port security of %s is missing: chain netdev %s %s is not on %s's egress hook", ifName, EgressTable, EgressChainName(ifName), ifName)
	}
	return nil
}
