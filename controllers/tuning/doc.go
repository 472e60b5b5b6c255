// Package tuning is the FastPathNetwork tuning controller (issue 27,
// docs/design.md §5.5): a network with spec.tuning.mode Recommend or Apply
// measures its own datapath on each node that serves it and records the
// candidate that wins by its objective in status.tuning.
//
// It does not measure anything itself: per candidate it creates a
// FastPathAttachment (the candidate's MTU and offloads on the network,
// selecting no VM) and per step a Pod-mode FastPathBenchmark on that
// attachment pinned to the node, so the FastPathBenchmark controller and its
// runner (bench) do the measuring. One node is swept at a time;
// within it one benchmark runs at a time, in the alternating order of
// controllers/tuning/sweep.Order. All of these objects live in the operator's
// namespace, carry a controller reference to the network and the label
// fastpath.io/tuning-network, and are deleted when the node's sweep ends or
// the mode goes back to Off; an object of one of their names that the
// network does not control is never adopted (the sweep fails with
// SweepFailed and names it).
//
// Register it in the operator with
//
//	(&tuning.Reconciler{Namespace: ns}).SetupWithManager(ctx, mgr, controller.Options{})
package tuning
