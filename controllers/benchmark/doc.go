// Package benchmark is the FastPathBenchmark controller (docs/design.md §5.1).
//
// For a benchmark it creates, all owned by the benchmark:
//   - the results ConfigMap <benchmark>-results (empty) and the runner's
//     ServiceAccount, Role and RoleBinding <benchmark>-runner, which allow the
//     runner to write that one ConfigMap;
//   - Pod mode: one netserver pod per pair on the attachment's network (and one
//     per pair on the pod network for the baseline), all on one node;
//   - the runner Job <benchmark>-run-<generation>, once every server address is
//     known: from Multus's network-status annotation and status.podIP of the
//     netserver pods (Pod mode), or from the VMI status of the server VMs, with
//     the client VMs reached over SSH at their pod-network address (VM mode).
//
// The runner writes its outcome into the ConfigMap (the protocol is in
// api/benchjob); the controller watches it, summarises results.json into
// status (controllers/benchmark/summary), judges the success criteria, deletes the
// netserver pods, records Events on every phase transition and exports
// Prometheus gauges on controller-runtime's metrics registry.
//
// Pending waits for the attachment: VM mode needs it Ready; Pod mode, which
// measures the node datapath without VMs, needs only its
// NetworkAttachmentDefinition (condition NetworkAttachmentReady), because an
// attachment that selects no VM is never Ready.
//
// Lifecycle: Pending (waiting for the attachment, the endpoints or the SSH key)
// → Running (the Job exists) → Succeeded or Failed. A finished benchmark is not
// run again while its spec is unchanged; a spec change (a new
// metadata.generation) starts a new run at any time, also during a run: the
// Job and netserver pods of the older generation are deleted, the status is
// reset, and results written by an older runner are ignored (their runID
// differs).
//
// Register it in the operator with
//
//	(&benchmark.Reconciler{RunnerImage: image}).SetupWithManager(ctx, mgr, controller.Options{})
package benchmark
