// Package allocator is host-local's address allocator,
// containernetworking/plugins v1.9.1 plugins/ipam/host-local/backend/allocator
// (allocator.go, config.go, range.go, range_set.go), copied unchanged but
// for one import: pkg/ip's helpers come from cni/internal/ip, because
// pkg/ip links two packages that compile regular expressions at init
// (cni/internal/ip says which and why that matters). The store is still
// the module's (backend.Store, backend/disk), so the allocation policy
// (first free from the last reserved address, the gateway skipped, no
// duplicate per container ID and interface) and the files are host-local's.
// Update the files together with the module's version in go.mod; package
// hostlocal's tests compare the result with the host-local binaries.
package allocator
