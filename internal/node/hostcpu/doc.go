// Package hostcpu is the node agent's read-only host CPU endpoint
// (`fastpath-agent --host-cpu-bind-address`, issue 41): for the pod UIDs a
// benchmark runner asks about, the cgroup v2 CPU time of each pod (cpu.stat
// usage_usec of its pod cgroup, which holds every thread of the pod: for a
// virt-launcher QEMU's vCPU, I/O and vhost worker threads), with the node's
// /proc/stat aggregate cpu line and whether the node has /dev/kvm, as one
// api/benchjob/results.HostCPUReading.
//
// The runner is unprivileged; the agent, which can read the host's cgroup
// tree, answers for it. Nothing a client sends names a path: a pod is asked
// for by its UID, which must be a UUID, and is looked up under the kubelet's
// two cgroup layouts (PodCgroup); the agent answers only for pods on its node
// that a VirtualMachineInstance controls (Handler.Allowed). See
// docs/security.md, "The host CPU endpoint", and docs/design.md §5.3.
package hostcpu
