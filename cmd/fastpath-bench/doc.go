// Command fastpath-bench runs the Fastpath benchmarks (issue 6, docs/design.md §5)
// and renders their reports.
//
//	fastpath-bench run --path fastpath=10.250.0.3 --path baseline=10.244.1.7 > results.json
//	fastpath-bench report results.json -o report/
//	fastpath-bench vsock-server --port 5201
//	fastpath-bench vsock-client --server 2:40000 --test VSOCK_RR
//	fastpath-bench local --out _out/bench
//
// run is also the runner of a FastPathBenchmark Job: it accepts exactly the
// command line internal/bench/benchjob.RunnerArgs renders (VM mode with
// --ssh-clients runs pair i's netperf on client VM i over SSH) and writes
// its outcome into the results ConfigMap named by --results-configmap
// (internal/bench.ConfigMapSink), reached with the in-cluster configuration
// or $KUBECONFIG when set. The results JSON is printed on stdout in any case.
//
// vsock-server and vsock-client measure VSOCK_STREAM and VSOCK_RR
// (internal/bench/vsockbench), since netperf has no AF_VSOCK; --transport
// unix:<dir> with --cid selects the UNIX-socket EMULATION of vsock instead
// of real AF_VSOCK sockets ($FASTPATH_VSOCK_TRANSPORT and $FASTPATH_VSOCK_CID
// set the defaults; the emulation's ssh sets them in emulated guests). run
// measures the same tests with --tests VSOCK_STREAM,VSOCK_RR and
// --vsock-path name=<cid>:<port> (or --path when every test is a vsock
// test); in VM mode it copies itself into the client and server VMs over
// SSH, starts vsock-server in the server VM (--ssh-servers,
// --vsock-server-port) and runs vsock-client in the client VM (guest.go).
//
// local builds the datapaths of docs/design.md §5.2 between network namespaces on
// this machine (internal/localenv/localbench), measures them, writes results.json and
// the report, and prints the ratio lines and the targets.
//
// Subcommands register themselves with register, each in its own file.
package main
