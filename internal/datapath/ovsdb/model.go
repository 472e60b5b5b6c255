package ovsdb

import "github.com/ovn-org/libovsdb/model"

// Database and table names of the Open vSwitch schema (vswitch.ovsschema).
const (
	DatabaseName   = "Open_vSwitch"
	TableOVS       = "Open_vSwitch"
	TableBridge    = "Bridge"
	TablePort      = "Port"
	TableInterface = "Interface"
)

// Datapath types of the Bridge datapath_type column (vswitch.xml).
const (
	// DatapathSystem is the kernel datapath (the openvswitch module); what real
	// nodes use. OVSDB stores it as "system" or as the empty string.
	DatapathSystem = "system"
	// DatapathNetdev is the userspace datapath inside ovs-vswitchd; what tests
	// use on kernels without the openvswitch module.
	DatapathNetdev = "netdev"
)

// InterfaceTypeInternal is the Interface type of a bridge's own interface
// (the one named like the bridge).
const InterfaceTypeInternal = "internal"

// The model below holds the columns that the node agent and the CNI plugin
// read or write through Client; Connect monitors all of them. libovsdb leaves
// zero-valued columns out of the rows it inserts.

// OpenvSwitch is the single row of the Open_vSwitch table.
type OpenvSwitch struct {
	UUID    string   `ovsdb:"_uuid"`
	Bridges []string `ovsdb:"bridges"`
	// OtherConfig holds switch-wide settings, e.g. "userspace-tso-enable"
	// ("true" or "false"), which ovs-vswitchd reads when it starts.
	OtherConfig map[string]string `ovsdb:"other_config"`
	// OVSVersion is written by the start-up scripts (ovs-ctl), e.g. "3.1.0";
	// unset when OVS was started by hand.
	OVSVersion *string `ovsdb:"ovs_version"`
	// DatapathTypes is written by ovs-vswitchd: the datapath types it
	// supports, e.g. ["netdev", "system"].
	DatapathTypes []string `ovsdb:"datapath_types"`
}

// Bridge is a row of the Bridge table.
type Bridge struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Ports        []string          `ovsdb:"ports"`
	DatapathType string            `ovsdb:"datapath_type"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
}

// Port is a row of the Port table.
type Port struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Interfaces  []string          `ovsdb:"interfaces"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// Interface is a row of the Interface table. MTU (bytes), Ofport, Error and
// MACInUse are written by ovs-vswitchd: Ofport is the OpenFlow port number,
// -1 when ovs-vswitchd could not open the interface (Error then says why);
// MACInUse is the interface's own Ethernet address (for the bridge's
// internal interface, the bridge's). MTURequest (bytes) is written by the
// agent.
type Interface struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Type        string            `ovsdb:"type"`
	MTU         *int              `ovsdb:"mtu"`
	MTURequest  *int              `ovsdb:"mtu_request"`
	Ofport      *int              `ovsdb:"ofport"`
	Error       *string           `ovsdb:"error"`
	MACInUse    *string           `ovsdb:"mac_in_use"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// ClientDBModel returns the libovsdb client model of the four tables.
func ClientDBModel() (model.ClientDBModel, error) {
	return model.NewClientDBModel(DatabaseName, map[string]model.Model{
		TableOVS:       &OpenvSwitch{},
		TableBridge:    &Bridge{},
		TablePort:      &Port{},
		TableInterface: &Interface{},
	})
}
