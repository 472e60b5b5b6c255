package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// One allocator per bridge (netconf.IPAMNetworkName, issue 39 item 4)
// replaced one host-local directory per attachment network
// (<dataDir>/<netconf name>). VMs wired before the change keep their
// addresses in those directories, which the new allocator does not read:
// without the two steps below the first new VM of an attachment on a node
// would get the address of its oldest running VM.

// hostLocal is the IPAM plugin whose directory layout the steps below know.
const hostLocal = "host-local"

// adoptLegacyAllocations reserves in the bridge's host-local directory
// every address host-local holds in the directory of conf's own network
// name, where a plugin before one allocator per bridge put it: the file is
// copied (same name, the address; same content, its owner) unless the
// bridge's directory has that address already. It is a no-op for other
// IPAM plugins and when there is no such directory. A copy is released
// with its original (legacyIPAMInput).
func adoptLegacyAllocations(conf *netconf.NetConf) error {
	if conf.IPAM.Type() != hostLocal {
		return nil
	}
	dataDir := netconf.IPAMDataDir(conf.StateDir)
	legacy := filepath.Join(dataDir, conf.Name)
	entries, err := os.ReadDir(legacy)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read the addresses host-local holds in %s: %w", legacy, err)
	}
	shared := filepath.Join(dataDir, netconf.IPAMNetworkName(conf.Bridge))
	for _, e := range entries {
		if net.ParseIP(e.Name()) == nil {
			continue // "lock", "last_reserved_ip.0"
		}
		owner, err := os.ReadFile(filepath.Join(legacy, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return fmt.Errorf("failed to read the owner of %s in %s: %w", e.Name(), legacy, err)
		}
		if err := os.MkdirAll(shared, 0o700); err != nil {
			return fmt.Errorf("failed to create host-local directory %s: %w", shared, err)
		}
		f, err := os.OpenFile(filepath.Join(shared, e.Name()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to reserve %s in %s: %w", e.Name(), shared, err)
		}
		_, werr := f.Write(owner)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("failed to reserve %s in %s: %w", e.Name(), shared, werr)
		}
		logger.Printf("Reserved an address of %s in the bridge's allocator address=%s directory=%s", legacy, e.Name(), shared)
	}
	return nil
}

// legacyIPAMInput returns, for a record of host-local whose IPAM input names
// the attachment's own network (an ADD before one allocator per bridge),
// that input naming the bridge's allocator instead: a DEL with it releases
// the copy adoptLegacyAllocations may have made. ok is false for every other
// record.
func legacyIPAMInput(a *state.Attachment) (in []byte, ok bool, err error) {
	if a.IPAMType != hostLocal {
		return nil, false, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(a.IPAMInput(), &top); err != nil {
		return nil, false, fmt.Errorf("failed to decode the recorded IPAM input of %s/%s: %w", a.ContainerID, a.IfName, err)
	}
	var name string
	_ = json.Unmarshal(top["name"], &name)
	shared := netconf.IPAMNetworkName(a.Bridge)
	if name == shared {
		return nil, false, nil
	}
	if top["name"], err = json.Marshal(shared); err != nil {
		return nil, false, err
	}
	if in, err = json.Marshal(top); err != nil {
		return nil, false, fmt.Errorf("failed to encode the IPAM input of %s/%s: %w", a.ContainerID, a.IfName, err)
	}
	return in, true, nil
}

// checkIPAMInput returns what CHECK gives the IPAM plugin for the recorded
// attachment att: conf.IPAMConf (with prevResult) under the network name its
// ADD gave the IPAM plugin, whose directory holds att's addresses: the
// bridge's allocator, or for an ADD before one allocator per bridge the
// attachment's own network.
func checkIPAMInput(conf *netconf.NetConf, att *state.Attachment) ([]byte, error) {
	var recorded struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(att.IPAMInput(), &recorded); err != nil {
		return nil, fmt.Errorf("failed to decode the recorded IPAM input of %s/%s: %w", att.ContainerID, att.IfName, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(conf.IPAMConf, &top); err != nil {
		return nil, fmt.Errorf("failed to decode the IPAM network configuration: %w", err)
	}
	var current string
	_ = json.Unmarshal(top["name"], &current)
	if recorded.Name == "" || recorded.Name == current {
		return conf.IPAMConf, nil
	}
	var err error
	if top["name"], err = json.Marshal(recorded.Name); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}
