// Package demo is `make demo` (`kubectl fastpath demo`): Fastpath's whole job
// on one machine without a cluster (issue 7). It starts the local Stack — the
// embedded control plane (internal/testing/testenv: real kube-apiserver and etcd),
// the real fastpath-operator and fastpath-agent as processes, and the
// emulation of KubeVirt, Multus and the kubelet (e2e/localenv/emulation) — then
// applies config/samples/ with the real kubectl, waits for the attachment,
// exchanges data over vsock through the agent's relay (and shows a refused
// CID), waits for the FastPathBenchmark, prints the status and the results
// table, writes _out/demo/report.md, report.html and results.json, and
// removes everything it made, also on Ctrl-C. A later run first removes what
// a killed run left behind (recorded in _out/demo/state).
//
// With real guests (Options.Guests "qemu") the agent also runs
// vhost-device-vsock, the demo adds a second attachment in vsock mode Sibling
// with two more guests (sibling.go), checks vsock services in both modes from
// inside the guests, and compares VSOCK_STREAM Sibling, Relay and TCP over
// the fast path by write size (streams.go) into results.json and report.html.
//
// The e2e suite uses the same Stack.
package demo
