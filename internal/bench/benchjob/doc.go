// Package benchjob renders the Kubernetes objects a FastPathBenchmark runs
// on, as pure functions of the benchmark and what the controller observed:
// the runner Job, the netserver pods of Pod mode, the runner's ServiceAccount,
// Role and RoleBinding, the results ConfigMap, and the runner's command line.
//
// The command line and the ConfigMap protocol between the controller and
// `fastpath-bench run` are a contract, written down once in RunnerArgs and
// the ConfigMap key constants (contract.go), and both sides of each live
// here: RunnerArgs.Args renders the flags and RunnerFlags/ParseRunnerArgs
// parse them (runner.go, into an internal/bench.RunConfig); ConfigMapSink
// writes the outcome (outcome.go) and ReadOutcome/ReadResults read it
// (read.go) for the controller and `kubectl fastpath bench report`.
//
// The package also reads endpoint addresses out of the objects that carry
// them: Multus's network-status annotation on a netserver pod and the
// interfaces of a KubeVirt VMI status (endpoints.go).
//
// Rendering is pure; the controller in controllers/benchmark creates, owns
// and watches what is rendered. ConfigMapSink and ReadResults are the only
// API calls, each on the one results ConfigMap.
package benchjob
