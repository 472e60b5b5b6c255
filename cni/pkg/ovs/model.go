package ovs

import "github.com/ovn-org/libovsdb/model"

// Table names of the Open_vSwitch database schema (vswitch.ovsschema).
const (
	DatabaseName   = "Open_vSwitch"
	TableOVS       = "Open_vSwitch"
	TableBridge    = "Bridge"
	TablePort      = "Port"
	TableInterface = "Interface"
)

// OpenvSwitch is the single row of the Open_vSwitch table (only the columns
// the plugin reads).
type OpenvSwitch struct {
	UUID        string            `ovsdb:"_uuid"`
	Bridges     []string          `ovsdb:"bridges"`
	OtherConfig map[string]string `ovsdb:"other_config"`
}

// Bridge is a row of the Bridge table.
type Bridge struct {
	UUID         string   `ovsdb:"_uuid"`
	Name         string   `ovsdb:"name"`
	Ports        []string `ovsdb:"ports"`
	DatapathType string   `ovsdb:"datapath_type"`
}

// Port is a row of the Port table.
type Port struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Interfaces  []string          `ovsdb:"interfaces"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// Interface is a row of the Interface table. MTU and Ofport are written by
// ovs-vswitchd: MTU in bytes, Ofport -1 when the interface failed (see Error).
type Interface struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Type        string            `ovsdb:"type"`
	MTU         *int              `ovsdb:"mtu"`
	MTURequest  *int              `ovsdb:"mtu_request"`
	Ofport      *int              `ovsdb:"ofport"`
	Error       *string           `ovsdb:"error"`
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
