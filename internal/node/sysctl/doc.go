// Package sysctl applies the node tuning of `fastpath-agent --tune-sysctls`:
// the socket buffer limits that let applications use the 256 KB socket
// buffers with which the VMCI sockets paper (VMware, 2009) measured its best
// VM-to-VM throughput (docs/design.md §1). It only ever raises a value: a field an
// admin set higher is kept. It reads and writes /proc/sys of the process's
// network namespace, which for the agent (host network) is the node's.
package sysctl
