// Package netconf parses, defaults and validates the network configuration of
// the fastpath CNI plugin (docs/design.md §3.1). The operator imports NetConf to render
// the configuration it writes into a NetworkAttachmentDefinition, and the
// plugin calls LoadNetConf on the bytes the runtime (Multus) passes on stdin.
//
// Bad input is reported as a *types.Error with code ErrInvalidNetworkConfig
// (7) whose message names the field and the allowed values, e.g.
// "mtu 70000 is out of range: must be 1280-65535".
package netconf
