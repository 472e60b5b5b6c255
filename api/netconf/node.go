package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// The node configuration: what names a host path or address comes from a
// file the node agent writes, not from the NetworkAttachmentDefinition that
// anyone able to write NADs controls (as Multus's daemon config does).
const (
	// DefaultNodeConfigPath is the node configuration the node agent
	// (fastpath-agent) writes in the CNI configuration directory.
	DefaultNodeConfigPath = "/etc/cni/net.d/fastpath.d/node.json"
	// NodeConfigEnv names another node configuration file. It is read from
	// the plugin's environment, which the container runtime sets, never from
	// the netconf; tests and the local benchmark use it.
	NodeConfigEnv = "FASTPATH_NODE_CONFIG"
	// MaxNodeConfigBytes bounds the node configuration file.
	MaxNodeConfigBytes = 4096
)

// NodeConfig is the node configuration file, e.g.
//
//	{"stateDir": "/var/lib/cni/fastpath", "ovs": {"socket": "unix:/var/run/openvswitch/db.sock"}}
//
// A missing file means the defaults (DefaultStateDir, wellknown.DefaultOVSSocket).
type NodeConfig struct {
	// StateDir is an absolute directory for the per-attachment cache and the
	// lock file; default DefaultStateDir.
	StateDir string `json:"stateDir,omitempty"`
	// OVS is the Open vSwitch endpoint.
	OVS OVS `json:"ovs,omitempty"`
}

// NodeConfigPath returns $FASTPATH_NODE_CONFIG, else DefaultNodeConfigPath.
func NodeConfigPath() string {
	if p := os.Getenv(NodeConfigEnv); p != "" {
		return p
	}
	return DefaultNodeConfigPath
}

// LoadNodeConfig reads, defaults and validates the node configuration at
// path. A missing file gives the defaults. The file must be a regular file
// owned by root (uid 0) and writable by its owner only, at most
// MaxNodeConfigBytes, with only the keys of NodeConfig. Errors are
// *types.Error with code ErrInvalidNetworkConfig naming the file and field.
func LoadNodeConfig(path string) (NodeConfig, error) {
	nc := NodeConfig{}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nc, nc.defaultAndValidate(path)
	case err != nil:
		return nc, invalid("failed to read the node configuration %s: %v", path, err)
	case !st.Mode().IsRegular():
		return nc, invalid("node configuration %s is not a regular file", path)
	case st.Mode().Perm()&0o022 != 0:
		return nc, invalid("node configuration %s is writable by group or others (mode %04o): it must be writable by root only", path, st.Mode().Perm())
	case st.Size() > MaxNodeConfigBytes:
		return nc, invalid("node configuration %s is %d bytes: must be at most %d", path, st.Size(), MaxNodeConfigBytes)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 {
		return nc, invalid("node configuration %s is owned by uid %d: it must be owned by root", path, sys.Uid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nc, invalid("failed to read the node configuration %s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil {
		return nc, invalid("node configuration %s is invalid: %v", path, err)
	}
	return nc, nc.defaultAndValidate(path)
}

// Validate defaults and checks nc as LoadNodeConfig does (stateDir absolute
// and cleaned, ovs.socket unix:/tcp:/ssl:); the error names the field.
func (nc *NodeConfig) Validate() error { return nc.defaultAndValidate("(to write)") }

func (nc *NodeConfig) defaultAndValidate(path string) error {
	if nc.OVS.Socket == "" {
		nc.OVS.Socket = wellknown.DefaultOVSSocket
	}
	if !strings.HasPrefix(nc.OVS.Socket, "unix:/") && !strings.HasPrefix(nc.OVS.Socket, "tcp:") && !strings.HasPrefix(nc.OVS.Socket, "ssl:") {
		return invalid("node configuration %s: ovs.socket %q is invalid: must be unix:<absolute path>, tcp:<host>:<port> or ssl:<host>:<port>", path, nc.OVS.Socket)
	}
	if nc.StateDir == "" {
		nc.StateDir = DefaultStateDir
	}
	if !filepath.IsAbs(nc.StateDir) {
		return invalid("node configuration %s: stateDir %q is invalid: must be an absolute path", path, nc.StateDir)
	}
	nc.StateDir = filepath.Clean(nc.StateDir)
	return nil
}

// applyNodeConfig refuses a netconf that sets a host path or address
// (stateDir, ovs.socket) and fills them from the node configuration.
func (c *NetConf) applyNodeConfig() error {
	const why = "is not accepted in a network configuration: host paths and addresses come from the node configuration %s, which the node agent writes"
	path := NodeConfigPath()
	if len(c.InputStateDir) > 0 {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("stateDir "+why, path), "")
	}
	if len(c.InputOVS) > 0 {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("ovs.socket "+why, path), "")
	}
	nc, err := LoadNodeConfig(path)
	if err != nil {
		return err
	}
	c.StateDir = nc.StateDir
	c.OVS = &OVS{Socket: nc.OVS.Socket}
	return nil
}

// WriteNodeConfig writes nc to path as root-owned mode 0644 (through a
// temporary file and a rename, so the plugin never reads half a file),
// creating the directory (0755) when missing.
func WriteNodeConfig(path string, nc NodeConfig) error {
	data, err := json.Marshal(nc)
	if err != nil {
		return fmt.Errorf("failed to encode the node configuration: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".node-*.json")
	if err != nil {
		return fmt.Errorf("failed to write the node configuration %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write the node configuration %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write the node configuration %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write the node configuration %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to write the node configuration %s: %w", path, err)
	}
	return nil
}
