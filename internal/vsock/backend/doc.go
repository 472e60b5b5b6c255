// Package backend runs and supervises vhost-device-vsock (rust-vmm, v0.3.0),
// the vhost-user vsock backend of vsock mode Sibling, for the node agent.
//
// One process serves one Group: every VM of one FastPathAttachment, each as a
// --vm entry (guest-cid, vhost-user socket, hybrid-vsock uds-path, the
// attachment's group name). VMs in one group reach each other's CIDs inside
// the process (vhost-device-vsock's "sibling" forwarding); nothing else can,
// so the group is the allow-list. Args never contains --forward-cid or
// --forward-listen: those open AF_VSOCK on the host.
//
// Why one process per group, declared up front (docs/vsock-sibling.md has
// the long form): vhost-device-vsock v0.3.0 reads its VMs once, from the
// command line or a YAML file, at start (main.rs start_backend_servers); it
// has no way to add a VM to a running process, and siblings are found in a
// map shared by the threads of one process (vhu_vsock.rs CidMap), so groups
// cannot span processes. What it does do is serve each VM's socket again
// after that VM's QEMU disconnects (start_backend_server loops), so a VM can
// stop, restart or migrate away without touching the others. The
// Supervisor therefore declares a slot for every VM the attachment selects,
// running or not, and only restarts a process when the set of slots changes
// — and then only once no QEMU is connected to any of its sockets, because a
// restart drops every open connection of the group. Until then the group is
// reported pending. A process that exits is restarted with a back-off.
//
// The Supervisor runs either inside the node agent (fastpath-agent
// --vhost-device-vsock: the local environment and tests) or in a pod of its
// own (cmd/fastpath-vsock-backend), where a Server offers it over HTTP on a
// UNIX socket beside the vhost-user sockets (PUT /v1/groups, GET /v1/status)
// and the agent drives it with a Client (fastpath-agent
// --sibling-backend-socket). Then a new agent image restarts only the
// agent: the processes, their sockets and the guests' connections stay, and
// the new agent's first Sync of the same groups changes nothing
// (docs/vsock-sibling.md, "Surviving an agent rollout").
//
// The same Server can host vsock mode Relay's relay (relay.go: PUT/GET
// /v1/relay, the relay's metrics on GET /metrics), which the agent then
// programs with a RelayClient (fastpath-agent --relay-backend-socket), so
// that an agent restart keeps the relay's listeners and relayed
// connections; Serve closes the relay when it stops, so a backend restart
// ends them at once rather than leaving them hanging.
package backend
