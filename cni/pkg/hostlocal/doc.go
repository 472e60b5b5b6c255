// Package hostlocal runs host-local's IPAM (containernetworking/plugins
// plugins/ipam/host-local: its backend/allocator and backend/disk packages)
// inside the fastpath plugin's own process, instead of executing the
// host-local binary as a second process for every ADD and DEL.
//
// What it writes is what the binary writes, in the same place, under the
// same lock: <dataDir>/<network name>/ holds one file per allocated address,
// named by the address and holding "<containerID>\r\n<ifname>",
// last_reserved_ip.<range index> and the flock(2) file "lock"; dataDir
// defaults to /var/lib/cni/networks as the binary's does. So the binary and
// this package can serve the same network at once (e.g. during an upgrade),
// and an allocation one made the other finds and releases.
//
// One thing differs, for crash consistency: an address file appears whole or
// not at all (Store.Reserve writes it as an unnamed O_TMPFILE and links it in
// place). The binary creates the file and then writes the owner into it;
// when the plugin ran it as a child, the child survived a SIGKILL of the
// plugin and finished. In-process, a kill between the two steps would leave
// an empty file that no DEL can release.
package hostlocal
