package dhcp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// hostLocal is the IPAM type whose allocations the responder can read.
const hostLocal = "host-local"

// maxReservation bounds what is read of an address file: host-local writes
// "<containerID>\r\n<ifname>", well below it.
const maxReservation = 4096

// Reservation is what a lease's allocator holds for the lease's address
// (issue 39, item 4: one allocator per network on a node, and DHCP
// answering from it). The allocator is host-local's directory
// <ipamDir>/<network name> (netconf.IPAMDataDir, netconf.IPAMNetworkName),
// whose files are named by address and hold their owner,
// "<containerID>\r\n<ifname>" (host-local backend/disk, Store.Reserve).
type Reservation struct {
	// Dir is the allocator directory the address was looked up in; ""
	// when the lease names no allocator the responder can read (another
	// IPAM type, or an old lease whose candidate directories do not exist).
	Dir string
	// Found is true when Dir has a file for the address.
	Found bool
	// ContainerID and IfName are its owner; IfName is "" in the format of
	// host-local before v0.8, which wrote the container ID alone.
	ContainerID, IfName string
}

// Checked reports whether the lease's allocator could be read.
func (r Reservation) Checked() bool { return r.Dir != "" }

// Confirms reports whether r is l's: the address reserved for l's
// container ID and ifname, matched as host-local's own lookups match
// (disk.Store.GetByID: the owner "<id>\r\n<ifname>", or "<id>" alone).
func (r Reservation) Confirms(l *leases.Lease) bool {
	return r.Found && r.ContainerID == strings.TrimSpace(l.ContainerID) && (r.IfName == l.IfName || r.IfName == "")
}

// Holder returns r's owner as "<containerID>/<ifname>", "" when none.
func (r Reservation) Holder() string {
	if !r.Found {
		return ""
	}
	return r.ContainerID + "/" + r.IfName
}

// lookupReservation returns what the allocator of l holds for l.Address,
// under ipamDir (the plugin's netconf.IPAMDataDir):
//
//   - l.IPAMType "host-local": the directory l.IPAMNetwork (a missing one
//     holds nothing).
//   - another l.IPAMType: none the responder can read (Reservation.Dir "").
//   - no l.IPAMType (a lease of a plugin before leases named their
//     allocator): the first of the bridge's allocator
//     (netconf.IPAMNetworkName(l.Bridge)) and, before one allocator per
//     bridge, the attachment network's own (l.Network) that has a file for
//     the address; when neither directory exists the lease was not
//     host-local's, and Dir is "".
//
// It reads only the address's file (host-local's GetByID walks the whole
// directory, and disk.New would create a missing one) and never takes
// host-local's lock: the plugin's in-process host-local makes an address
// file appear whole, the binary writes it right after creating it, and an
// empty file read in between gets that message no answer, not a wrong one.
// An error is a directory or file that cannot be read.
func lookupReservation(ipamDir string, l *leases.Lease) (Reservation, error) {
	switch l.IPAMType {
	case hostLocal:
		r, exists, err := readReservation(ipamDir, l.IPAMNetwork, l)
		if err == nil && !exists {
			r.Dir = filepath.Join(ipamDir, l.IPAMNetwork) // it holds nothing
		}
		return r, err
	case "":
	default:
		return Reservation{}, nil
	}
	var seen Reservation
	for _, network := range []string{netconf.IPAMNetworkName(l.Bridge), l.Network} {
		if network == "" {
			continue // a lease without its network name
		}
		r, exists, err := readReservation(ipamDir, network, l)
		if err != nil || r.Found {
			return r, err
		}
		if exists && !seen.Checked() {
			seen = r
		}
	}
	return seen, nil
}

// readReservation reads the file of l.Address in host-local's directory
// of network under ipamDir; dirExists is false when that directory is
// missing (then r.Dir is "").
func readReservation(ipamDir, network string, l *leases.Lease) (r Reservation, dirExists bool, err error) {
	if !leases.IsPathComponent(network) {
		return Reservation{}, false, fmt.Errorf("IPAM network %q of lease %s:%s is not a directory name", network, l.ContainerID, l.IfName)
	}
	dir := filepath.Join(ipamDir, network)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return Reservation{}, false, nil
	} else if err != nil {
		return Reservation{}, false, fmt.Errorf("failed to read host-local directory %s: %w", dir, err)
	}
	r = Reservation{Dir: dir}
	name := disk.GetEscapedPath(dir, l.Address.Addr().String())
	// O_NOFOLLOW: host-local writes regular files; a link is nobody's.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return r, true, nil
	}
	if err != nil {
		return r, true, fmt.Errorf("failed to read the reservation %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReservation))
	if err != nil {
		return r, true, fmt.Errorf("failed to read the reservation %s: %w", name, err)
	}
	r.Found = true
	r.ContainerID, r.IfName, _ = strings.Cut(strings.TrimSpace(string(data)), disk.LineBreak)
	return r, true, nil
}
