// Package nodeagent (imported as agent) is the node agent's reconciler (fastpath-agent, docs/design.md §3):
// it prepares one node for the fast paths and reports what the node can do.
//
// Every FastPathNetwork and FastPathAttachment in the cluster, this node's
// FastPathNode and its launcher pods map to one reconcile request (the node
// name); a reconcile is level-based and idempotent, so an agent killed at any
// point and started again converges without duplicates. One reconcile:
//
//  1. computes the desired bridges (DesiredBridges): one per FastPathNetwork,
//     its spec.bridge with its datapath and spec.mtu.max. A bridge name two
//     networks claim is a conflict: it is reported (BridgesReady False,
//     BridgeConflict, naming the networks) and the bridge is neither created
//     nor changed, because two networks on one bridge would join their tenants
//     in one L2 segment;
//  2. ensures those bridges (BridgeManager: netlink or OVSDB), and lists the
//     bridges the agent created that no FastPathNetwork names any more. Those are
//     left in place, never deleted (they may still carry VM traffic), and
//     shown in status with a message saying so;
//  3. programs the vsock sibling relay with the routes of
//     status.vsockServices whose node is this node (the operator allocates
//     relay ports and fills in CIDs);
//  4. installs the CNI binary and (with --tune-sysctls) raises the socket
//     buffer sysctls;
//  5. probes capabilities; the status patch deferred at the start (where the
//     FastPathNode named after the node is created when missing) then writes
//     the status, only when it changed, with conditions Ready, BridgesReady,
//     VSOCKRelayReady and (with vsock mode Sibling) SiblingBackendsReady whose
//     messages say what to fix (docs/troubleshooting.md).
//
// The shape is that of the operator's two reconcilers (Cluster API style):
// get the object, defer one status patch, run a []phases.Phase[*scope] (internal/platform/phases, shared by all three) with the signature
// func(context.Context, *scope) (ctrl.Result, error); a phase that failed in a
// way a retry may fix asks for RetryPeriod instead of ResyncPeriod.
package nodeagent
