// Package benchjob renders the Kubernetes objects a FastPathBenchmark runs
// on, as pure functions of the benchmark and what the controller observed:
// the runner Job, the netserver pods of Pod mode, the runner's ServiceAccount,
// Role and RoleBinding, the results ConfigMap, and the runner's command line.
//
// The command line and the ConfigMap protocol between the controller and
// `fastpath-bench run` are a contract, written down once in RunnerArgs and
// the ConfigMap key constants (contract.go); the runner implements the flags
// and the write-back exactly as documented there.
//
// The package also reads endpoint addresses out of the objects that carry
// them: Multus's network-status annotation on a netserver pod and the
// interfaces of a KubeVirt VMI status (endpoints.go).
//
// Nothing here talks to an API server; the controller in
// controllers/benchmark creates, owns and watches what is rendered.
package benchjob
