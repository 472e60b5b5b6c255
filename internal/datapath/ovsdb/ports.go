package ovsdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// External ID keys the CNI plugin sets on the ports it creates. KeyNetwork,
// KeyContainerID and KeyIfName identify the attachment for GC (which matches
// cni.dev/valid-attachments of one network); KeyNetns and KeyPod help debugging.
const (
	KeyOwner       = "fastpath.io/owner"
	KeyNetwork     = "fastpath.io/network"
	KeyContainerID = "fastpath.io/container-id"
	KeyIfName      = "fastpath.io/ifname"
	KeyNetns       = "fastpath.io/netns"
	KeyPod         = "fastpath.io/pod"
	// KeyAttachedMAC is the OVS convention (Interface external_ids:attached-mac)
	// for the MAC address behind a port.
	KeyAttachedMAC = "attached-mac"
	// Owner is the value of KeyOwner.
	Owner = "fastpath-cni"
)

// ErrBridgeNotFound is wrapped by the methods that need a bridge that the
// database does not have (RequireBridge, BridgeMTU, AddPort, PortOnBridge,
// Ports).
var ErrBridgeNotFound = errors.New("bridge not found")

// AttachTimeout bounds how long AddPort waits for ovs-vswitchd to open a new
// port (assign its ofport). 30 s, within the plugin's opTimeout (60 s): the
// userspace (netdev) datapath's main loop was seen to stall for seconds
// under concurrent ADDs on a loaded machine, and the port opened right
// after; a shorter bound failed ADDs that would have succeeded (the
// figures: docs/design.md §4.2).
const AttachTimeout = 30 * time.Second

// BridgeMTU returns the MTU in bytes of the bridge's internal interface (the
// interface named like the bridge): the MTU ovs-vswitchd reports, else the
// requested one. The node agent sets mtu_request on it; without one OVS gives
// the internal interface the smallest MTU of the other ports (1500 when it
// has none).
func (c *Client) BridgeMTU(ctx context.Context, bridge string) (int, error) {
	if _, err := c.RequireBridge(ctx, bridge); err != nil {
		return 0, err
	}
	i, err := c.Interface(ctx, bridge)
	if err != nil {
		return 0, err
	}
	switch {
	case i == nil:
		return 0, fmt.Errorf("failed to read MTU of OVS bridge %s: it has no internal interface %s", bridge, bridge)
	case i.MTU != nil && *i.MTU > 0:
		return *i.MTU, nil
	case i.MTURequest != nil:
		return *i.MTURequest, nil
	}
	errText := ""
	if i.Error != nil {
		errText = ": " + *i.Error
	}
	return 0, fmt.Errorf("failed to read MTU of OVS bridge %s: ovs-vswitchd reports none for interface %s%s", bridge, bridge, errText)
}

// UserspaceTSO reports whether Open_vSwitch other_config:userspace-tso-enable
// is "true" (ovs-vswitchd reads it only when it starts). Without it the
// userspace datapath (datapath_type=netdev) reads veths through AF_PACKET
// without virtio-net headers and cannot carry TCP from veths with checksum
// offload, TSO or GRO on.
func (c *Client) UserspaceTSO(ctx context.Context) (bool, error) {
	o, err := c.root(ctx)
	if err != nil {
		return false, err
	}
	return o.OtherConfig["userspace-tso-enable"] == "true", nil
}

// AddPort adds the system interface name as a port of bridge, with
// portIDs as the Port's external_ids and ifaceIDs as the Interface's, in one
// transaction. A port of that name left over from an earlier attachment is
// removed first. It then waits up to AttachTimeout for ovs-vswitchd to open
// the interface (WaitInterface) and fails with ovs-vswitchd's error when it
// cannot.
func (c *Client) AddPort(ctx context.Context, bridge, name string, portIDs, ifaceIDs map[string]string) error {
	if _, err := c.RequireBridge(ctx, bridge); err != nil {
		return err
	}
	if err := c.DeletePort(ctx, name); err != nil {
		return err
	}
	iface := &Interface{UUID: "fpiface", Name: name, ExternalIDs: ifaceIDs}
	port := &Port{UUID: "fpport", Name: name, Interfaces: []string{iface.UUID}, ExternalIDs: portIDs}
	ops, err := c.c.Create(iface, port)
	if err != nil {
		return fmt.Errorf("failed to build insert of OVS port %s: %w", name, err)
	}
	br := &Bridge{Name: bridge}
	mut, err := c.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build mutation of OVS bridge %s: %w", bridge, err)
	}
	ops = append(ops, mut...)
	res, err := transact(ctx, c.c, fmt.Sprintf("add port %s to OVS bridge %s", name, bridge), ops)
	if err != nil {
		return err
	}
	if res[len(res)-1].Count == 0 {
		return fmt.Errorf("failed to add port %s to OVS bridge %s: %w", name, bridge, ErrBridgeNotFound)
	}

	// ovs-vswitchd opens the interface asynchronously: it assigns an ofport,
	// or -1 and an error.
	wctx, cancel := context.WithTimeout(ctx, AttachTimeout)
	defer cancel()
	i, err := c.WaitInterface(wctx, name, func(i *Interface) bool {
		return (i.Error != nil && *i.Error != "") || (i.Ofport != nil && *i.Ofport > 0)
	})
	switch {
	case i != nil && i.Error != nil && *i.Error != "":
		return fmt.Errorf("failed to attach %s to OVS bridge %s: ovs-vswitchd: %s", name, bridge, *i.Error)
	case err != nil && wctx.Err() != nil:
		return fmt.Errorf("failed to attach %s to OVS bridge %s: ovs-vswitchd did not open it within %s (is ovs-vswitchd running?)", name, bridge, AttachTimeout)
	}
	return err
}

// DeletePort removes the port name from every bridge that has it (OVSDB then
// drops the unreferenced Port and Interface rows). A missing port is not an
// error.
func (c *Client) DeletePort(ctx context.Context, name string) error {
	p, err := lookupPort(ctx, c.c, name)
	if err != nil || p == nil {
		return err
	}
	br := &Bridge{}
	mut, err := c.c.WhereCache(func(b *Bridge) bool { return slices.Contains(b.Ports, p.UUID) }).
		Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{p.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build removal of OVS port %s: %w", name, err)
	}
	if len(mut) == 0 {
		return nil // on no bridge: already unreferenced
	}
	return c.run(ctx, fmt.Sprintf("remove OVS port %s", name), mut)
}

// PortOnBridge reports whether bridge has a port named name.
func (c *Client) PortOnBridge(ctx context.Context, bridge, name string) (bool, error) {
	b, err := c.RequireBridge(ctx, bridge)
	if err != nil {
		return false, err
	}
	p, err := lookupPort(ctx, c.c, name)
	if err != nil || p == nil {
		return false, err
	}
	return slices.Contains(b.Ports, p.UUID), nil
}

// Ports returns the ports of bridge whose external_ids carry KeyOwner=Owner
// (the CNI plugin's), sorted by name.
func (c *Client) Ports(ctx context.Context, bridge string) ([]Port, error) {
	b, err := c.RequireBridge(ctx, bridge)
	if err != nil {
		return nil, err
	}
	var ports []Port
	err = c.c.WhereCache(func(p *Port) bool {
		return p.ExternalIDs[KeyOwner] == Owner && slices.Contains(b.Ports, p.UUID)
	}).List(ctx, &ports)
	if err != nil {
		return nil, fmt.Errorf("failed to list ports of OVS bridge %s: %w", bridge, err)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
	return ports, nil
}

// MACHolder returns the name of the port of bridge, other than except,
// one of whose interfaces has mac: as its external_ids:attached-mac (the
// MAC behind the port, which the CNI plugin writes at AddPort, as OVN and
// other OVS integrations do) or as its mac_in_use (the interface's own
// address, which ovs-vswitchd writes; the bridge's internal interface has
// the bridge's). "" when none has; except is the port about to be
// replaced (AddPort removes a leftover of its name). The error wraps
// ErrBridgeNotFound when there is no bridge.
//
// It reads the cache, so a port added by another client in the last
// moments may not be seen yet: the CNI plugin's records, saved before it
// looks, are what orders two ADDs racing for one MAC.
func (c *Client) MACHolder(ctx context.Context, bridge string, mac net.HardwareAddr, except string) (string, error) {
	b, err := c.RequireBridge(ctx, bridge)
	if err != nil {
		return "", err
	}
	same := func(s *string) bool {
		if s == nil {
			return false
		}
		m, err := net.ParseMAC(*s)
		return err == nil && bytes.Equal(m, mac)
	}
	for _, uuid := range b.Ports {
		p := &Port{UUID: uuid}
		if err := c.c.Get(ctx, p); err != nil {
			if errors.Is(err, client.ErrNotFound) {
				continue // removed since b was read
			}
			return "", fmt.Errorf("failed to look up port %s of OVS bridge %s: %w", uuid, bridge, err)
		}
		if p.Name == except {
			continue
		}
		for _, iu := range p.Interfaces {
			i := &Interface{UUID: iu}
			if err := c.c.Get(ctx, i); err != nil {
				if errors.Is(err, client.ErrNotFound) {
					continue
				}
				return "", fmt.Errorf("failed to look up interface %s of OVS port %s: %w", iu, p.Name, err)
			}
			if attached, ok := i.ExternalIDs[KeyAttachedMAC]; (ok && same(&attached)) || same(i.MACInUse) {
				return p.Name, nil
			}
		}
	}
	return "", nil
}
