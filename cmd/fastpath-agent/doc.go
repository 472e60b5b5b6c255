// Command fastpath-agent is the Fastpath node agent (docs/design.md §3): one per node
// (a DaemonSet with host network; a plain process in tests and the demo). It
// installs the fastpath CNI binary, ensures the node bridges and their MTU,
// optionally raises socket-buffer sysctls, probes the node's capabilities,
// runs the vsock sibling relay, answers DHCPv4 on its Linux bridges for the
// addresses the CNI plugin assigned, and publishes the node's FastPathNode. It only
// parses flags and wires dependencies; the logic lives in controllers/nodeagent and
// the packages it drives.
//
// main.go parses the command line and runs the steps in order; options.go
// holds the flags (Options: their groups, defaults and Validate); setup.go
// holds the steps, one per dependency of the node reconciler (the manager,
// the relay, the reconciler, the device plugins, vsock mode Sibling, the
// DHCP responders).
package main
