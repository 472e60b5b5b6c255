package netconf

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// IPAMKeys are the keys of the "ipam" object the plugin accepts: what the
// operator renders (type, subnet, rangeStart, rangeEnd; controllers/attachment
// RenderNetConf) and host-local's gateway and routes. Any other key is refused
// naming it: the IPAM plugin runs as root with what the netconf says, so a
// key such as host-local's "dataDir" would let whoever writes a
// NetworkAttachmentDefinition choose where root creates directories and files.
// Keys are case-sensitive (host-local matches them case-insensitively, so
// "DataDir" is refused as well).
var IPAMKeys = []string{"type", "subnet", "rangeStart", "rangeEnd", "gateway", "routes"}

// IPAMDataDirName is the subdirectory of the node's state directory (NodeConfig
// StateDir) that the plugin gives host-local as its "dataDir".
const IPAMDataDirName = "ipam"

// IPAMDataDir returns the IPAM plugin's data directory under stateDir:
// <stateDir>/ipam. host-local keeps one directory per network name in it.
func IPAMDataDir(stateDir string) string { return filepath.Join(stateDir, IPAMDataDirName) }

// IPAMNetworkName returns the network name the IPAM plugin gets for every
// netconf on device bridge (the bridge, OVS bridge or Macvtap lower device
// of one FastPathNetwork on this node): "fpnet-<bridge>". host-local keeps
// its allocations in <dataDir>/<name>, so all attachments of a network on a
// node allocate from one directory and can never hand out one address
// twice, whatever their ranges (issue 39, item 4); each attachment's own
// CNI network name ("fp-<namespace>.<attachment>") would give each its own.
// A bridge name is 1-15 characters of [a-zA-Z0-9_.-], not "." or "..", so
// the result is one path component; CNI network names of attachments start
// with "fp-" and never equal it.
func IPAMNetworkName(bridge string) string { return "fpnet-" + bridge }

// validateIPAMKeys refuses an "ipam" key outside IPAMKeys, naming the first
// such key in sorted order.
func (c *NetConf) validateIPAMKeys() error {
	keys := make([]string, 0, len(c.IPAM))
	for k := range c.IPAM {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if slices.Contains(IPAMKeys, k) {
			continue
		}
		if strings.EqualFold(k, "dataDir") {
			return invalid("ipam.%s is not accepted in a network configuration: the plugin sets the IPAM data directory itself (%s under the node's state directory)",
				k, IPAMDataDirName)
		}
		return invalid("ipam.%s is not accepted in a network configuration: allowed keys are %s", k, strings.Join(IPAMKeys, ", "))
	}
	return nil
}

// ipamConf returns stdin with its "ipam" object replaced by c.IPAM (whose
// keys validateIPAMKeys checked) plus "dataDir": IPAMDataDir(c.StateDir),
// and its "name" replaced by IPAMNetworkName(c.Bridge): the network
// configuration the IPAM plugin gets. Every other top-level key
// (cniVersion, prevResult, cni.dev/valid-attachments, runtimeConfig, ...)
// is passed as it is.
func (c *NetConf) ipamConf(stdin []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &top); err != nil {
		return nil, fmt.Errorf("failed to decode network configuration: %w", err)
	}
	ipam := make(map[string]any, len(c.IPAM)+1)
	for k, v := range c.IPAM {
		ipam[k] = v
	}
	ipam["dataDir"] = IPAMDataDir(c.StateDir)
	raw, err := json.Marshal(ipam)
	if err != nil {
		return nil, fmt.Errorf("failed to encode ipam configuration: %w", err)
	}
	top["ipam"] = raw
	if top["name"], err = json.Marshal(IPAMNetworkName(c.Bridge)); err != nil {
		return nil, fmt.Errorf("failed to encode IPAM network name: %w", err)
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("failed to encode IPAM network configuration: %w", err)
	}
	return out, nil
}
