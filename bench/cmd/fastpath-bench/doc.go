// Command fastpath-bench runs the Fastpath benchmarks (issue 6, docs/design.md §5)
// and renders their reports:
//
//	fastpath-bench run --path fastpath=10.250.0.3 --path baseline=10.244.1.7 > results.json
//	fastpath-bench report results.json -o report/
//	fastpath-bench vsock-server --port 5201
//	fastpath-bench vsock-client --server 2:40000 --test VSOCK_RR
//	fastpath-bench local --out _out/bench
//
// run is also the runner of a FastPathBenchmark Job: its flags, the results
// ConfigMap it writes and the guest provisioning of VM mode live in
// api/benchjob and bench; vsock-server and vsock-client
// in bench (VSOCK_* tests, since netperf has no AF_VSOCK); local in
// bench/localbench. This package only wires them to cobra
// commands; the API server is reached with $KUBECONFIG when set, else the
// in-cluster configuration.
package main
