// Package cniinstall installs the fastpath CNI plugin binary that ships next
// to the node agent into the node's CNI binary directory (/opt/cni/bin by
// default), where Multus executes it. The copy is atomic: a temporary file in
// the destination directory is written, fsynced and renamed over the old
// binary, so a plugin invocation running concurrently sees either the old or
// the new binary, never a partial one (and a running binary is never
// overwritten in place, which would fail with ETXTBSY). Nothing is written when
// the installed binary already has the same sha256.
package cniinstall
