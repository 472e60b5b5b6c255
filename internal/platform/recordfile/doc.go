// Package recordfile is the file mechanism of a directory of small records,
// one file per key, that a reader must see whole or not at all: the CNI
// plugin's attachment records (cni/pkg/state) and the DHCP leases it hands
// the node agent (internal/node/leases). It names a record file, writes one
// by rename, removes one with the temporary file a killed writer left,
// sweeps stranded temporary files and lists the record files. What a record
// holds, and how it is encoded and validated, is the caller's.
//
// File names in a record directory:
//
//	<containerID>:<ifname>.json       a record (Name)
//	.tmp-<containerID>:<ifname>.json  the same while Write writes it (TempPrefix)
//
// It is a leaf of layer 2 (docs/architecture.md, "Layers") that imports only
// the standard library: cni/pkg/state is in layer 3 and internal/node/leases
// in layer 2, so the leases may not import the state package (upward), and
// both import this one instead. The agent reads the leases the plugin
// writes, so the names and the write order here are a contract between the
// two binaries: change them only with both.
package recordfile
