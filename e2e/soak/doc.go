// Package soak is Fastpath's fault-injection soak (issue 18): it drives the
// real components, injects the faults a node sees (SIGKILL at random points,
// a network namespace removed under an attachment, repeated and parallel
// requests, a restarted process) and counts what survived and what leaked.
//
// Each part returns a Summary, printed as one line:
//
//	soak plugin/LinuxBridge: cycles=1000 faults=1150 survived=1150 lost=0 leaked=0 transient=0 duration=1m36s (...)
//
// A fault is survived when every step a runtime (or Kubernetes) takes to
// recover from it succeeds and the object ends as it must. lost counts
// recoveries that failed and attachments that reported success but failed
// a later check; leaked counts objects left on the node (links, bridge
// ports, IP allocations, state and temporary files) or in the cluster after
// a batch. transient counts requests that failed and then succeeded when
// retried the way a runtime retries (DEL, then ADD again); each is listed
// with its error. A part passes when lost and leaked are 0.
//
// The agent part runs the vsock relay in fastpath-vsock-backend, a process
// of its own that is never killed (the agent's --relay-backend-socket), and
// ends with a streams phase (streams.go, issue 38): a TCP connection over the
// fast path (CNI ADD on a bridge the agent made) and relayed vsock
// connections (EMULATED over UNIX sockets) stream while the agent is
// SIGKILLed and restarted, and none may be reset or lose, reorder or corrupt
// a byte; its summary line is "agent/streams".
//
// e2e/cmd/fastpath-dev soak runs the full soak (make soak); the package's test runs
// a short version of every part (make test).
package soak
