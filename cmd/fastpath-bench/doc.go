// Command fastpath-bench runs the Fastpath benchmark matrix with netperf and
// renders reports (issue 6, DESIGN §5).
//
//	fastpath-bench run --path fastpath=10.250.0.3 --path baseline=10.244.1.7 > results.json
//	fastpath-bench report results.json -o report/
//
// Subcommands register themselves in commands (see register); vsock-server,
// vsock-client (internal/vsockbench) and local (the local node benchmark)
// are added the same way, each in its own file of this package.
package main
