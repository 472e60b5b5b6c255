// Command fastpath-dev is the harness's one development binary (e2e/
// module, never shipped): its subcommands run and test Fastpath on this
// machine, and each only parses flags and wires a e2e/ package to
// stdout, stderr and the signals.
//
//	fastpath-dev demo [--full] [--guests=netns|qemu]   Fastpath's whole job here, no cluster needed (make demo; e2e/localenv/demo)
//	fastpath-dev cluster up|down|install              a REAL single-node Kubernetes here (make cluster; e2e/localenv/cluster)
//	fastpath-dev images build|import [IMAGE...]       the OCI images without a Docker daemon (make images; e2e/localenv/images)
//	fastpath-dev soak [--parts ...]                   the fault-injection soak (make soak; e2e/soak)
//
// The root command holds what they share: the signal context (SIGINT and
// SIGTERM cancel it; during the demo a second Ctrl-C ends the process at
// once), the logr logger on stderr and its --v flag, the error line
// "fastpath-dev <subcommand>: <error>" and the exit status: 0 on success
// and for --help, 1 when the work failed, 2 for a command line it rejects
// (and for a soak part that could not run).
//
// `kubectl fastpath demo ARGS` runs `fastpath-dev demo ARGS` (found beside
// kubectl-fastpath, then on PATH), so the kubectl plugin does not link the
// local environment.
package main
