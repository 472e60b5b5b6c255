// Package benchjob renders the Kubernetes objects a FastPathBenchmark runs
// on, as pure functions of the benchmark and what the controller observed:
// the runner Job, the netserver pods of Pod mode, the runner's ServiceAccount,
// Role and RoleBinding, the results ConfigMap, and the runner's command line.
//
// The command line and the ConfigMap protocol between the controller and
// `fastpath-bench run` are a contract, written down once in RunnerArgs and
// the ConfigMap key constants (contract.go). This package holds the
// controller's half: RunnerArgs.Args renders the flags, and
// ReadOutcome/ReadResults read the outcome (read.go) for the controller and
// `kubectl fastpath bench report`. The runner's half, which parses the flags
// (RunnerFlags, ParseRunnerArgs) and writes the outcome (ConfigMapSink), is
// bench/jobrunner, so the operator links no runner code.
//
// The package also reads endpoint addresses out of the objects that carry
// them: Multus's network-status annotation on a netserver pod and the
// interfaces of a KubeVirt VMI status (endpoints.go).
//
// Rendering is pure; the controller in controllers/benchmark creates, owns
// and watches what is rendered. ReadResults is the only
// API call, on the one results ConfigMap.
package benchjob
