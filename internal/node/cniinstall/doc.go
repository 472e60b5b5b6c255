// Package cniinstall installs the fastpath CNI plugin binaries that ship next
// to the node agent into the node's CNI binary directory (/opt/cni/bin by
// default), where Multus executes them: fastpath, and before it the
// companion it hands OVS invocations over to (fastpath-ovs-plugin). Each copy is atomic: a temporary file in
// the destination directory is written, fsynced and renamed over the old
// binary, so a plugin invocation running concurrently sees either the old or
// the new binary, never a partial one (and a running binary is never
// overwritten in place, which would fail with ETXTBSY). Nothing is written when
// the installed binary already has the same sha256.
package cniinstall
