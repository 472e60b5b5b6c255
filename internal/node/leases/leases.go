package leases

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/fastpath-io/fastpath/internal/platform/recordfile"
)

// Dir is the directory of the leases under a CNI state directory.
const Dir = "leases"

// Lease is what the DHCPv4 responder on Bridge answers a guest whose
// interface has MAC.
type Lease struct {
	// ContainerID and IfName are the attachment's CNI_CONTAINERID and
	// CNI_IFNAME: the key.
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	// Network is the netconf "name".
	Network string `json:"network"`
	// Bridge is the Linux bridge the attachment's host veth is a port of.
	Bridge string `json:"bridge"`
	// MAC is the pod interface's MAC, which the guest gets (managedTap).
	MAC string `json:"mac"`
	// Address is the IPv4 address and prefix from the IPAM plugin, e.g. 10.56.0.7/24.
	Address netip.Prefix `json:"address"`
	// Gateway is the router a guest is told (DHCP option 3): the gateway of
	// the IPAM result's IPv4 default route; unset without one.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// MTU is the pod interface's MTU in bytes (DHCP option 26).
	MTU int `json:"mtu,omitempty"`
	// IPAMType is the IPAM plugin that allocated Address (the netconf's
	// ipam.type, e.g. "host-local"), and IPAMNetwork the network name the
	// plugin gave it (netconf.IPAMNetworkName: "fpnet-<bridge>"), under
	// which host-local keeps the address in <stateDir>/ipam/<IPAMNetwork>.
	// The responder answers only while that allocator holds Address for
	// this ContainerID and IfName. Both are empty in a lease written by a
	// plugin before they existed.
	IPAMType    string `json:"ipamType,omitempty"`
	IPAMNetwork string `json:"ipamNetwork,omitempty"`
}

// HardwareAddr returns l.MAC parsed.
func (l *Lease) HardwareAddr() (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(l.MAC)
	if err != nil {
		return nil, fmt.Errorf("failed to parse MAC %q of lease %s:%s: %w", l.MAC, l.ContainerID, l.IfName, err)
	}
	return mac, nil
}

// valid reports whether l can be answered: an IPv4 address with a prefix
// of at most 30 bits, a MAC of 6 bytes, an IPv4 gateway if any.
func (l *Lease) valid() error {
	mac, err := l.HardwareAddr()
	if err != nil {
		return err
	}
	if len(mac) != 6 {
		return fmt.Errorf("lease %s:%s: MAC %s is not 6 bytes", l.ContainerID, l.IfName, l.MAC)
	}
	if !l.Address.IsValid() || !l.Address.Addr().Is4() {
		return fmt.Errorf("lease %s:%s: address %s is not IPv4", l.ContainerID, l.IfName, l.Address)
	}
	if l.Gateway.IsValid() && !l.Gateway.Is4() {
		return fmt.Errorf("lease %s:%s: gateway %s is not IPv4", l.ContainerID, l.IfName, l.Gateway)
	}
	if l.IPAMNetwork != "" && !IsPathComponent(l.IPAMNetwork) {
		return fmt.Errorf("lease %s:%s: IPAM network %q is not a directory name", l.ContainerID, l.IfName, l.IPAMNetwork)
	}
	return nil
}

// IsPathComponent reports whether s names one entry of a directory: not
// empty, ".", "..", and without "/" or NUL.
func IsPathComponent(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// name returns the file name of the lease of containerID/ifName, or an
// error when either is empty or could leave the directory. The plugin
// validated both (state.Store.Path) before it got here.
func name(containerID, ifName string) (string, error) {
	for _, s := range []string{containerID, ifName} {
		if s == "" || strings.ContainsAny(s, "/:\x00") || s == "." || s == ".." {
			return "", fmt.Errorf("failed to name lease file for %q/%q", containerID, ifName)
		}
	}
	return recordfile.Name(containerID, ifName), nil
}

// Write records l under stateDir (in Dir, created mode 0700 when missing)
// atomically (internal/platform/recordfile, as state.Store.Save): a reader
// sees the old lease or the new one, never part of one. It does not fsync:
// the leases do not outlive the veths they describe.
func Write(stateDir string, l *Lease) error {
	if err := l.valid(); err != nil {
		return err
	}
	n, err := name(l.ContainerID, l.IfName)
	if err != nil {
		return err
	}
	dir := filepath.Join(stateDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create lease directory %s: %w", dir, err)
	}
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("failed to encode lease %s: %w", n, err)
	}
	if err := recordfile.Write(filepath.Join(dir, n), append(data, '\n')); err != nil {
		return fmt.Errorf("failed to write lease %s: %w", n, err)
	}
	return nil
}

// Remove removes the lease of containerID/ifName under stateDir and a
// temporary file a killed Write of it left; a missing one is not an error.
func Remove(stateDir, containerID, ifName string) error {
	n, err := name(containerID, ifName)
	if err != nil {
		return err
	}
	if err := recordfile.Remove(filepath.Join(stateDir, Dir, n)); err != nil {
		return fmt.Errorf("failed to remove lease %s: %w", n, err)
	}
	return nil
}

// List returns the leases in dir (a state directory's Dir), sorted by
// container ID and ifname. A missing directory holds none. Files that
// cannot be read or decoded, or that are not valid, are skipped and
// reported in the returned error (joined), alongside the leases that could
// be read.
func List(dir string) ([]*Lease, error) {
	names, err := recordfile.List(dir)
	if err != nil {
		return nil, err
	}
	var out []*Lease
	var errs []error
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				errs = append(errs, fmt.Errorf("failed to read lease %s: %w", n, err))
			}
			continue
		}
		l := &Lease{}
		if err := json.Unmarshal(data, l); err != nil {
			errs = append(errs, fmt.Errorf("failed to decode lease %s: %w", n, err))
			continue
		}
		if err := l.valid(); err != nil {
			errs = append(errs, fmt.Errorf("failed to use lease %s: %w", n, err))
			continue
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}
