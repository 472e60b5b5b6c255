// Command fastpath-demo runs Fastpath's whole job on this machine, no
// cluster needed (root; test/localenv/demo): an embedded control plane,
// the real operator and agent, the emulated KubeVirt, Multus and kubelet,
// the samples applied with kubectl, a benchmark through the controller, the
// status and the results, and removal of everything it made.
//
//	fastpath-demo [--full]
//
// `kubectl fastpath demo ARGS` runs it (found beside kubectl-fastpath, then
// on PATH), so the kubectl plugin does not link the local environment. It
// only parses flags and wires the demo to stdout and the signals: the
// first Ctrl-C cleans up, a second one ends the process at once.
package main
