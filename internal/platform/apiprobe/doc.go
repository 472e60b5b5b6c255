// Package apiprobe asks the API server whether it serves an API (a group
// version with given resources), and restarts the process when one appears:
// the operator starts without KubeVirt installed (no VirtualMachine watches,
// which would otherwise never sync and stop the manager), and must watch
// VMs once KubeVirt's CRDs are installed.
package apiprobe
