package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// OVSPluginBinary is the plugin binary with the Open vSwitch datapath, in the
// directory of the wellknown.PluginType binary, which hands it every
// invocation that needs OVSDB (see package cni/pkg/datapath for why there
// are two).
const OVSPluginBinary = "fastpath-ovs-plugin"

// Datapath names (the "datapath" field): the netconf's names of the values
// in api/wellknown, which are also the API enum of spec.datapath
// (docs/design.md §3.1).
const (
	DatapathLinuxBridge = wellknown.DatapathLinuxBridge
	DatapathOVS         = wellknown.DatapathOVS
	DatapathMacvtap     = wellknown.DatapathMacvtap
)

// DefaultStateDir holds the plugin's per-attachment cache and its lock
// file. LoadNetConf applies it, and wellknown.DefaultBridge,
// wellknown.DefaultMTU and wellknown.DefaultOVSSocket, to fields that are
// absent (or zero).
const DefaultStateDir = "/var/lib/cni/fastpath"

// MaxBridgeNameLen is IFNAMSIZ-1 (Linux include/uapi/linux/if.h): the longest
// interface name the kernel accepts.
const MaxBridgeNameLen = 15

// SupportedVersions are the CNI specification versions the plugin speaks.
var SupportedVersions = []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// OffloadKeys are the keys the "offloads" object accepts, in canonical order
// (the Names of wellknown.Offloads).
var OffloadKeys = wellknown.OffloadNames()

// bridgeNameOK reports whether name is 1-MaxBridgeNameLen characters of
// [a-zA-Z0-9_.-]. A loop, not a regexp: a package-level regexp is compiled
// at every start of the plugin process, which every CNI invocation pays for
// (the profile: docs/design.md §4.3).
func bridgeNameOK(name string) bool {
	if len(name) == 0 || len(name) > MaxBridgeNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// NetConf is the fastpath network configuration, e.g.
//
//	{"cniVersion": "1.0.0", "name": "fp-db-link", "type": "fastpath",
//	 "datapath": "LinuxBridge", "bridge": "fastpath0", "mtu": 9000,
//	 "offloads": {"tso": true, "gso": true, "gro": true, "txChecksum": true},
//	 "ipam": {"type": "host-local", "subnet": "10.250.0.0/24"}}
//
// The operator marshals it into a NetworkAttachmentDefinition; the fields
// marked "set by the runtime" are filled by Multus or libcni and are never
// rendered by the operator.
type NetConf struct {
	// CNIVersion is the CNI specification version, one of SupportedVersions.
	CNIVersion string `json:"cniVersion,omitempty"`
	// Name is the network name, 1-165 (wellknown.MaxNetworkNameLen) characters of [a-zA-Z0-9_.-]
	// starting with a letter or digit; GC matches attachments by it.
	Name string `json:"name,omitempty"`
	// Type is the plugin binary name, wellknown.PluginType.
	Type string `json:"type,omitempty"`
	// Capabilities asks the runtime for runtimeConfig entries, e.g. {"mac": true}.
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	// Namespace is the Kubernetes namespace the network belongs to (the
	// FastPathAttachment's, which the operator renders): a DNS label, 1-63
	// characters of [a-z0-9-] starting and ending with a letter or digit.
	// ADD refuses a pod whose CNI_ARGS K8S_POD_NAMESPACE differs or is
	// missing, and a netconf without it (see RequireNamespace). DEL, CHECK,
	// STATUS and GC accept a netconf without it, so that attachments made
	// before it existed can still be removed.
	Namespace string `json:"namespace,omitempty"`

	// Datapath is DatapathLinuxBridge (default), DatapathOVS or DatapathMacvtap.
	Datapath string `json:"datapath,omitempty"`
	// Bridge is the node bridge, 1-15 characters of [a-zA-Z0-9_.-]; default
	// wellknown.DefaultBridge; on DatapathMacvtap the macvtap lower device. The node
	// agent creates it; the plugin never does.
	Bridge string `json:"bridge,omitempty"`
	// DeviceID is the device a device plugin allocated to the pod for this
	// network (set by the runtime: Multus adds it for a NetworkAttachmentDefinition
	// with a k8s.v1.cni.cncf.io/resourceName annotation). On DatapathMacvtap
	// it names the macvtap's interface index and so its /dev/tapN
	// (ParseDeviceID); other datapaths ignore it.
	DeviceID string `json:"deviceID,omitempty"`
	// MTU in bytes of both veth ends, 1280-65535 (wellknown.MinMTU,
	// wellknown.MaxMTU); default wellknown.DefaultMTU (0 means default).
	MTU int `json:"mtu,omitempty"`
	// Offloads switches the offloads of wellknown.Offloads on both veth
	// ends (ethtool -K); an absent key means true.
	Offloads *Offloads `json:"offloads,omitempty"`
	// PortSecurity, on datapaths LinuxBridge and OVS, makes the attachment
	// forward only frames from the MAC and IP addresses ADD gave it (package
	// cni/pkg/portsec: the bridge port's rules on LinuxBridge, the pod
	// interface's egress on OVS); absent means true. Macvtap ignores it.
	PortSecurity *bool `json:"portSecurity,omitempty"`
	// IPAM is the delegated IPAM configuration for the IPAM plugin named by
	// its "type" (required): only the keys IPAMKeys; the plugin adds
	// "dataDir" (IPAMDataDir) itself, see IPAMConf.
	IPAM IPAM `json:"ipam,omitempty"`
	// IPAMConf is the network configuration the IPAM plugin gets: the input
	// with "ipam" holding the IPAMKeys it has plus "dataDir":
	// IPAMDataDir(StateDir). LoadNetConf fills it.
	IPAMConf []byte `json:"-"`
	// OVS configures the Open vSwitch datapath (ignored for LinuxBridge):
	// LoadNetConf fills it from the node configuration (NodeConfig), never
	// from the input.
	OVS *OVS `json:"-"`
	// StateDir is an absolute directory for the per-attachment cache and the
	// lock file: LoadNetConf fills it from the node configuration.
	StateDir string `json:"-"`
	// InputOVS and InputStateDir catch "ovs" and "stateDir" in the input,
	// which LoadNetConf refuses naming the field: they name host paths and
	// addresses, which whoever writes NetworkAttachmentDefinitions must not
	// choose for a plugin running as root.
	InputOVS      json.RawMessage `json:"ovs,omitempty"`
	InputStateDir json.RawMessage `json:"stateDir,omitempty"`

	// RuntimeConfig carries capability arguments (set by the runtime).
	RuntimeConfig *RuntimeConfig `json:"runtimeConfig,omitempty"`
	// RawPrevResult is the previous result, given to CHECK (set by the runtime).
	RawPrevResult map[string]any `json:"prevResult,omitempty"`
	// ValidAttachments lists the attachments GC must keep (set by the runtime, CNI 1.1).
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`
}

// Offloads are the per-interface offload switches (ethtool -K). Each pointer
// is nil when absent; LoadNetConf defaults nil to true.
type Offloads struct {
	// TSO is TCP segmentation offload (ethtool "tso"); requires TXChecksum.
	TSO *bool `json:"tso,omitempty"`
	// GSO is generic segmentation offload (ethtool "gso").
	GSO *bool `json:"gso,omitempty"`
	// GRO is generic receive offload (ethtool "gro").
	GRO *bool `json:"gro,omitempty"`
	// TXChecksum is transmit checksum offload (ethtool "tx").
	TXChecksum *bool `json:"txChecksum,omitempty"`
	// RXChecksum is receive checksum offload (ethtool "rx").
	RXChecksum *bool `json:"rxChecksum,omitempty"`
}

// IPAM is the "ipam" object. Only "type" is read by the plugin; the other
// keys of IPAMKeys (subnet, rangeStart, ...) belong to the IPAM plugin.
type IPAM map[string]any

// Type returns the IPAM plugin name, or "" when "type" is absent or not a string.
func (i IPAM) Type() string {
	s, _ := i["type"].(string)
	return s
}

// OVS is the "ovs" object.
type OVS struct {
	// Socket is the OVSDB endpoint: unix:<path>, tcp:<host>:<port> or
	// ssl:<host>:<port>; default wellknown.DefaultOVSSocket.
	Socket string `json:"socket,omitempty"`
}

// RuntimeConfig is the "runtimeConfig" object the runtime fills from the
// capabilities the configuration asks for.
type RuntimeConfig struct {
	// MAC is the container interface MAC address (Multus "mac" capability).
	MAC string `json:"mac,omitempty"`
}

// unknownOffloadError reports a key in "offloads" that is not in OffloadKeys.
type unknownOffloadError struct{ msg string }

func (e *unknownOffloadError) Error() string { return e.msg }

// UnmarshalJSON decodes the offloads object strictly: unknown keys and
// non-boolean values are errors naming the key.
func (o *Offloads) UnmarshalJSON(data []byte) error {
	type plain Offloads
	var p plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return &unknownOffloadError{msg: fmt.Sprintf("offloads must be an object of booleans (keys %s), got JSON %s",
					strings.Join(OffloadKeys, ", "), typeErr.Value)}
			}
			return &unknownOffloadError{msg: fmt.Sprintf("offloads.%s must be a boolean, got JSON %s", typeErr.Field, typeErr.Value)}
		}
		if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &unknownOffloadError{msg: fmt.Sprintf("offloads has unknown key %s: allowed keys are %s", key, strings.Join(OffloadKeys, ", "))}
		}
		return &unknownOffloadError{msg: fmt.Sprintf("offloads is invalid: %v", err)}
	}
	*o = Offloads(p)
	return nil
}

// PortSecurityOn reports whether the attachment forwards only its own MAC
// and IP addresses: PortSecurity, true when absent, on datapaths LinuxBridge
// and OVS; false on Macvtap.
func (c *NetConf) PortSecurityOn() bool {
	return (c.Datapath == DatapathLinuxBridge || c.Datapath == DatapathOVS) && (c.PortSecurity == nil || *c.PortSecurity)
}

// Offload returns o's field for the offload named name (a row of
// wellknown.Offloads), or nil when Offloads has no field of that JSON name.
func (o *Offloads) Offload(name string) **bool {
	return wellknown.OffloadField[*bool](o, name)
}

// NewOffloads returns Offloads with each offload of wellknown.Offloads set to
// on(its name).
func NewOffloads(on func(name string) bool) *Offloads {
	o := &Offloads{}
	for _, row := range wellknown.Offloads {
		b := on(row.Name)
		*o.Offload(row.Name) = &b
	}
	return o
}

// Map returns the offload switches keyed by OffloadKeys; nil fields count as true.
func (o *Offloads) Map() map[string]bool {
	if o == nil {
		o = &Offloads{}
	}
	out := make(map[string]bool, len(wellknown.Offloads))
	for _, row := range wellknown.Offloads {
		b := *o.Offload(row.Name)
		out[row.Name] = b == nil || *b
	}
	return out
}

// LoadNetConf parses, defaults and validates the network configuration on a
// plugin's stdin. It returns the configuration with every default filled in
// (Datapath, Bridge, MTU, all four Offloads, OVS.Socket, StateDir) and its
// cniVersion.
//
// Errors are *types.Error: ErrDecodingFailure (6) for malformed JSON,
// ErrIncompatibleCNIVersion (1) for an unsupported cniVersion and
// ErrInvalidNetworkConfig (7) for everything else, with a message naming the
// field and the allowed values: among others an "ipam" key outside IPAMKeys
// (ipam.dataDir included: IPAMConf sets it), a configuration larger than
// MaxNetConfBytes, a key that occurs twice in one object, and a key of the
// plugin's own objects (top level, offloads, ovs, runtimeConfig) spelt in
// another case ("TSO" for "tso"; keys are case-sensitive).
func LoadNetConf(stdin []byte) (*NetConf, string, error) {
	if len(stdin) > MaxNetConfBytes {
		return nil, "", tooLarge()
	}
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, "", decodeError(err)
	}
	if err := checkKeys(stdin); err != nil {
		return nil, "", err
	}
	if err := conf.defaultAndValidate(); err != nil {
		return nil, "", err
	}
	var err error
	if conf.IPAMConf, err = conf.ipamConf(stdin); err != nil {
		return nil, "", invalid("%v", err)
	}
	return conf, conf.CNIVersion, nil
}

func decodeError(err error) error {
	var offErr *unknownOffloadError
	if errors.As(err, &offErr) {
		return types.NewError(types.ErrInvalidNetworkConfig, offErr.msg, "")
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("network configuration must be a JSON object, got JSON %s", typeErr.Value), "")
		}
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("%s must be of type %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value), "")
	}
	return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("failed to parse network configuration: %v", err), "")
}

func invalid(format string, args ...any) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(format, args...), "")
}

func (c *NetConf) defaultAndValidate() error {
	if c.Name == "" {
		return invalid("name is required")
	}
	if len(c.Name) > wellknown.MaxNetworkNameLen {
		return invalid("name is %d characters long: must be at most %d", len(c.Name), wellknown.MaxNetworkNameLen)
	}
	if err := utils.ValidateNetworkName(c.Name); err != nil {
		return invalid("name %q is invalid: must be [a-zA-Z0-9] followed by [a-zA-Z0-9_.-]", c.Name)
	}

	versions := strings.Join(SupportedVersions, ", ")
	if c.CNIVersion == "" {
		return invalid("cniVersion is required: must be one of %s", versions)
	}
	if !slices.Contains(SupportedVersions, c.CNIVersion) {
		return types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("cniVersion %q is not supported: must be one of %s", c.CNIVersion, versions), "")
	}

	switch c.Datapath {
	case "":
		c.Datapath = DatapathLinuxBridge
	case DatapathLinuxBridge, DatapathOVS, DatapathMacvtap:
	default:
		return invalid("datapath %q is not supported: must be %s, %s or %s", c.Datapath, DatapathLinuxBridge, DatapathOVS, DatapathMacvtap)
	}

	if c.Bridge == "" {
		c.Bridge = wellknown.DefaultBridge
	}
	if err := ValidateBridgeName(c.Bridge); err != nil {
		return err
	}

	if c.MTU == 0 {
		c.MTU = wellknown.DefaultMTU
	}
	if c.MTU < wellknown.MinMTU || c.MTU > wellknown.MaxMTU {
		return invalid("mtu %d is out of range: must be %d-%d", c.MTU, wellknown.MinMTU, wellknown.MaxMTU)
	}

	if c.Offloads == nil {
		c.Offloads = &Offloads{}
	}
	for _, row := range wellknown.Offloads {
		if p := c.Offloads.Offload(row.Name); *p == nil {
			t := true
			*p = &t
		}
	}
	if *c.Offloads.TSO && !*c.Offloads.TXChecksum {
		return invalid("offloads.tso true requires offloads.txChecksum true: the kernel turns TSO off without TX checksum offload")
	}
	if err := c.validateNamespace(); err != nil {
		return err
	}
	if c.Datapath == DatapathMacvtap {
		if err := c.validateMacvtap(); err != nil {
			return err
		}
	}

	if len(c.IPAM) == 0 {
		return invalid("ipam is required: fastpath delegates addresses to an IPAM plugin, e.g. {\"type\": \"host-local\", \"subnet\": \"10.250.0.0/24\"}")
	}
	if c.IPAM.Type() == "" {
		return invalid("ipam.type is required: must name an IPAM plugin binary, e.g. host-local")
	}
	if strings.ContainsAny(c.IPAM.Type(), `/\`) {
		return invalid("ipam.type %q is invalid: must be a plugin name without a path", c.IPAM.Type())
	}
	if err := c.validateIPAMKeys(); err != nil {
		return err
	}

	if err := c.applyNodeConfig(); err != nil {
		return err
	}

	if c.RuntimeConfig != nil && c.RuntimeConfig.MAC != "" {
		if _, err := ParseMAC("runtimeConfig.mac", c.RuntimeConfig.MAC); err != nil {
			return err
		}
	}
	return nil
}

// ValidateBridgeName checks a bridge name: 1-15 characters of [a-zA-Z0-9_.-],
// and not "." or ".." (which the kernel refuses as interface names).
// The error is a *types.Error with code ErrInvalidNetworkConfig.
func ValidateBridgeName(name string) error {
	if !bridgeNameOK(name) || name == "." || name == ".." {
		return invalid("bridge %q is invalid: must be 1-%d characters of [a-zA-Z0-9_.-]", name, MaxBridgeNameLen)
	}
	return nil
}

// ParseMAC parses a unicast 48-bit MAC address such as "02:00:00:00:00:01".
// field names the source in the error (e.g. "runtimeConfig.mac" or "CNI_ARGS
// MAC"); the error is a *types.Error with code ErrInvalidNetworkConfig.
func ParseMAC(field, s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, invalid("%s %q is invalid: must be a 48-bit MAC address such as 02:00:00:00:00:01", field, s)
	}
	if mac[0]&1 == 1 {
		return nil, invalid("%s %q is invalid: must be a unicast address (least significant bit of the first octet clear)", field, s)
	}
	return mac, nil
}
