package ovs

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

// External ID keys the plugin sets on the ports it creates. KeyNetwork,
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
// database does not have.
var ErrBridgeNotFound = errors.New("bridge not found")

// AttachTimeout bounds how long AddPort waits for ovs-vswitchd to open a new
// port (assign its ofport).
const AttachTimeout = 10 * time.Second

// Client is a connection to ovsdb-server with a cache of the columns of
// internal/datapath/ovsdb's model that the plugin uses (only those are monitored).
type Client struct {
	c        client.Client
	endpoint string
}

// Connect dials the OVSDB endpoint (unix:<path>, tcp:<host>:<port>,
// ssl:<host>:<port>) with ovsdb.Dial and monitors the columns the plugin
// uses; libovsdb logs to stderr. ctx bounds the dial and the initial
// monitor. Close the client when done.
func Connect(ctx context.Context, endpoint string) (*Client, error) {
	o, b, p, i := &ovsdb.OpenvSwitch{}, &ovsdb.Bridge{}, &ovsdb.Port{}, &ovsdb.Interface{}
	c, err := ovsdb.Dial(ctx, endpoint, ovsdb.DialOptions{
		Log: stdr.New(log.New(os.Stderr, "libovsdb: ", log.LstdFlags)),
		Tables: []client.MonitorOption{
			client.WithTable(o, &o.Bridges, &o.OtherConfig),
			client.WithTable(b, &b.Name, &b.Ports, &b.DatapathType),
			client.WithTable(p, &p.Name, &p.Interfaces, &p.ExternalIDs),
			client.WithTable(i, &i.Name, &i.Type, &i.MTU, &i.MTURequest, &i.Ofport, &i.Error, &i.ExternalIDs),
		},
	})
	if err != nil {
		return nil, err
	}
	return &Client{c: c, endpoint: endpoint}, nil
}

// Close disconnects from ovsdb-server.
func (c *Client) Close() { c.c.Close() }

// Endpoint returns the OVSDB endpoint the client is connected to.
func (c *Client) Endpoint() string { return c.endpoint }

// Echo checks that ovsdb-server answers (RFC 7047 "echo").
func (c *Client) Echo(ctx context.Context) error {
	if err := c.c.Echo(ctx); err != nil {
		return fmt.Errorf("failed to reach OVSDB at %s: %w", c.endpoint, err)
	}
	return nil
}

// Bridge returns the bridge row name; the error wraps ErrBridgeNotFound when
// there is none.
func (c *Client) Bridge(ctx context.Context, name string) (*ovsdb.Bridge, error) {
	b, err := ovsdb.LookupBridge(ctx, c.c, name)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("failed to find OVS bridge %s: %w", name, ErrBridgeNotFound)
	}
	return b, nil
}

// Interface returns the interface row name, or nil when there is none.
func (c *Client) Interface(ctx context.Context, name string) (*ovsdb.Interface, error) {
	return ovsdb.LookupInterface(ctx, c.c, name)
}

// BridgeMTU returns the MTU in bytes of the bridge's internal interface (the
// interface named like the bridge): the MTU ovs-vswitchd reports, else the
// requested one. The node agent sets mtu_request on it; without one OVS gives
// the internal interface the smallest MTU of the other ports (1500 when it
// has none).
func (c *Client) BridgeMTU(ctx context.Context, bridge string) (int, error) {
	if _, err := c.Bridge(ctx, bridge); err != nil {
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
	var rows []ovsdb.OpenvSwitch
	if err := c.c.List(ctx, &rows); err != nil {
		return false, fmt.Errorf("failed to read Open_vSwitch table: %w", err)
	}
	if len(rows) == 0 {
		return false, fmt.Errorf("failed to read Open_vSwitch table: it has no row")
	}
	return rows[0].OtherConfig["userspace-tso-enable"] == "true", nil
}

// AddPort adds the system interface name as a port of bridge, with
// portIDs as the Port's external_ids and ifaceIDs as the Interface's, in one
// transaction. A port of that name left over from an earlier attachment is
// removed first. It then waits up to AttachTimeout for ovs-vswitchd to open
// the interface and fails with ovs-vswitchd's error when it cannot.
func (c *Client) AddPort(ctx context.Context, bridge, name string, portIDs, ifaceIDs map[string]string) error {
	if _, err := c.Bridge(ctx, bridge); err != nil {
		return err
	}
	if err := c.DeletePort(ctx, name); err != nil {
		return err
	}
	iface := &ovsdb.Interface{UUID: "fpiface", Name: name, ExternalIDs: ifaceIDs}
	port := &ovsdb.Port{UUID: "fpport", Name: name, Interfaces: []string{iface.UUID}, ExternalIDs: portIDs}
	ops, err := c.c.Create(iface, port)
	if err != nil {
		return fmt.Errorf("failed to build insert of OVS port %s: %w", name, err)
	}
	br := &ovsdb.Bridge{Name: bridge}
	mut, err := c.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: libovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build mutation of OVS bridge %s: %w", bridge, err)
	}
	ops = append(ops, mut...)
	res, err := ovsdb.Transact(ctx, c.c, fmt.Sprintf("add port %s to OVS bridge %s", name, bridge), ops)
	if err != nil {
		return err
	}
	if res[len(res)-1].Count == 0 {
		return fmt.Errorf("failed to add port %s to OVS bridge %s: %w", name, bridge, ErrBridgeNotFound)
	}
	return c.waitAttached(ctx, bridge, name)
}

// waitAttached polls the cache until ovs-vswitchd assigned name an ofport.
func (c *Client) waitAttached(ctx context.Context, bridge, name string) error {
	ctx, cancel := context.WithTimeout(ctx, AttachTimeout)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		i, err := c.Interface(ctx, name)
		if err != nil {
			return err
		}
		if i != nil && i.Error != nil && *i.Error != "" {
			return fmt.Errorf("failed to attach %s to OVS bridge %s: ovs-vswitchd: %s", name, bridge, *i.Error)
		}
		if i != nil && i.Ofport != nil && *i.Ofport > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to attach %s to OVS bridge %s: ovs-vswitchd did not open it within %s (is ovs-vswitchd running?)", name, bridge, AttachTimeout)
		case <-tick.C:
		}
	}
}

// DeletePort removes the port name from every bridge that has it (OVSDB then
// drops the unreferenced Port and Interface rows). A missing port is not an
// error.
func (c *Client) DeletePort(ctx context.Context, name string) error {
	p, err := ovsdb.LookupPort(ctx, c.c, name)
	if err != nil || p == nil {
		return err
	}
	br := &ovsdb.Bridge{}
	mut, err := c.c.WhereCache(func(b *ovsdb.Bridge) bool { return slices.Contains(b.Ports, p.UUID) }).
		Mutate(br, model.Mutation{Field: &br.Ports, Mutator: libovsdb.MutateOperationDelete, Value: []string{p.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build removal of OVS port %s: %w", name, err)
	}
	if len(mut) == 0 {
		return nil // on no bridge: already unreferenced
	}
	_, err = ovsdb.Transact(ctx, c.c, fmt.Sprintf("remove OVS port %s", name), mut)
	return err
}

// PortOnBridge reports whether bridge has a port named name.
func (c *Client) PortOnBridge(ctx context.Context, bridge, name string) (bool, error) {
	b, err := c.Bridge(ctx, bridge)
	if err != nil {
		return false, err
	}
	p, err := ovsdb.LookupPort(ctx, c.c, name)
	if err != nil || p == nil {
		return false, err
	}
	return slices.Contains(b.Ports, p.UUID), nil
}

// Ports returns the ports of bridge whose external_ids carry KeyOwner=Owner,
// sorted by name.
func (c *Client) Ports(ctx context.Context, bridge string) ([]ovsdb.Port, error) {
	b, err := c.Bridge(ctx, bridge)
	if err != nil {
		return nil, err
	}
	var ports []ovsdb.Port
	err = c.c.WhereCache(func(p *ovsdb.Port) bool {
		return p.ExternalIDs[KeyOwner] == Owner && slices.Contains(b.Ports, p.UUID)
	}).List(ctx, &ports)
	if err != nil {
		return nil, fmt.Errorf("failed to list ports of OVS bridge %s: %w", bridge, err)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
	return ports, nil
}
