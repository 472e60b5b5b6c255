package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrUnreachable is wrapped by Connect (and Conn.Client) when ovsdb-server
// cannot be reached.
var ErrUnreachable = errors.New("OVSDB unreachable")

// pollInterval is how often WaitInterface and WaitBridge look at the cache.
// Reading the cache is cheap; a short interval keeps the CNI ADD, which
// waits for ovs-vswitchd to open the new port, quick.
const pollInterval = 2 * time.Millisecond

// Client is a connection to ovsdb-server, with a monitored cache of the
// columns the node agent and the CNI plugin use; both use this one client. Reads come from the cache, which
// ovsdb-server updates asynchronously: a write is visible to reads shortly
// after it commits.
type Client struct {
	c        client.Client
	endpoint string
}

// System is what the Open_vSwitch table says about the switch.
type System struct {
	// Version is ovs_version ("" when the start-up scripts did not set it).
	Version string
	// DatapathTypes are the datapath types ovs-vswitchd supports, sorted
	// (empty until ovs-vswitchd has started).
	DatapathTypes []string
}

// BridgeSpec is a bridge to create.
type BridgeSpec struct {
	// Name of the bridge, its internal port and its internal interface.
	Name string
	// DatapathType is DatapathSystem or DatapathNetdev.
	DatapathType string
	// MTU in bytes, set as mtu_request of the internal interface; 0 leaves
	// it unset.
	MTU int
	// ExternalIDs of the Bridge row (the agent marks its bridges here).
	ExternalIDs map[string]string
}

// Connect dials endpoint (unix:<path>, tcp:<host>:<port>, ssl:<host>:<port>)
// and monitors the columns of the model that the node agent and the CNI
// plugin use; ctx bounds the dial and the initial monitor. libovsdb's own
// log lines go to log (named "libovsdb"). Errors read "failed to connect to
// OVSDB at <endpoint>: OVSDB unreachable: …" (or "failed to monitor …"),
// wrapping ErrUnreachable. Close the client when done.
func Connect(ctx context.Context, endpoint string, log logr.Logger) (*Client, error) {
	o, b, p, i := &OpenvSwitch{}, &Bridge{}, &Port{}, &Interface{}
	c, err := dial(ctx, endpoint, dialOptions{
		Log:         log.WithName("libovsdb"),
		Unreachable: ErrUnreachable,
		Tables: []client.MonitorOption{
			client.WithTable(o, &o.Bridges, &o.OtherConfig, &o.OVSVersion, &o.DatapathTypes),
			client.WithTable(b, &b.Name, &b.Ports, &b.DatapathType, &b.ExternalIDs),
			client.WithTable(p, &p.Name, &p.Interfaces, &p.ExternalIDs),
			client.WithTable(i, &i.Name, &i.Type, &i.MTU, &i.MTURequest, &i.Ofport, &i.Error, &i.MACInUse, &i.ExternalIDs),
		},
	})
	if err != nil {
		return nil, err
	}
	return &Client{c: c, endpoint: endpoint}, nil
}

// Close disconnects.
func (c *Client) Close() { c.c.Close() }

// Connected reports whether the connection is still up.
func (c *Client) Connected() bool { return c.c.Connected() }

// Endpoint returns the OVSDB endpoint.
func (c *Client) Endpoint() string { return c.endpoint }

// Echo checks that ovsdb-server answers (RFC 7047 "echo").
func (c *Client) Echo(ctx context.Context) error {
	if err := c.c.Echo(ctx); err != nil {
		return fmt.Errorf("failed to reach OVSDB at %s: %w", c.endpoint, err)
	}
	return nil
}

func (c *Client) root(ctx context.Context) (*OpenvSwitch, error) {
	var rows []OpenvSwitch
	if err := c.c.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("failed to read the Open_vSwitch table at %s: %w", c.endpoint, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("failed to read the Open_vSwitch table at %s: it has no row (database not initialised)", c.endpoint)
	}
	return &rows[0], nil
}

// System reads the Open_vSwitch row.
func (c *Client) System(ctx context.Context) (System, error) {
	o, err := c.root(ctx)
	if err != nil {
		return System{}, err
	}
	s := System{DatapathTypes: slices.Sorted(slices.Values(o.DatapathTypes))}
	if o.OVSVersion != nil {
		s.Version = *o.OVSVersion
	}
	return s, nil
}

// Bridge returns the bridge row name, or nil when there is none.
func (c *Client) Bridge(ctx context.Context, name string) (*Bridge, error) {
	return lookupBridge(ctx, c.c, name)
}

// RequireBridge returns the bridge row name; the error wraps
// ErrBridgeNotFound when there is none.
func (c *Client) RequireBridge(ctx context.Context, name string) (*Bridge, error) {
	b, err := c.Bridge(ctx, name)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("failed to find OVS bridge %s: %w", name, ErrBridgeNotFound)
	}
	return b, nil
}

// Bridges returns every bridge for which keep returns true, sorted by name.
func (c *Client) Bridges(ctx context.Context, keep func(*Bridge) bool) ([]Bridge, error) {
	var out []Bridge
	if err := c.c.WhereCache(keep).List(ctx, &out); err != nil {
		return nil, fmt.Errorf("failed to list OVS bridges: %w", err)
	}
	slices.SortFunc(out, func(a, b Bridge) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Interface returns the interface row name, or nil when there is none.
func (c *Client) Interface(ctx context.Context, name string) (*Interface, error) {
	return lookupInterface(ctx, c.c, name)
}

// PortNames returns the names of b's ports other than its internal port (the
// one named like the bridge), sorted: the ports that carry traffic.
func (c *Client) PortNames(ctx context.Context, b *Bridge) ([]string, error) {
	var names []string
	for _, uuid := range b.Ports {
		p := &Port{UUID: uuid}
		if err := c.c.Get(ctx, p); err != nil {
			if errors.Is(err, client.ErrNotFound) {
				continue // removed since b was read
			}
			return nil, fmt.Errorf("failed to look up port %s of OVS bridge %s: %w", uuid, b.Name, err)
		}
		if p.Name != b.Name {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// CreateBridge inserts the bridge, its internal port and internal interface
// (with mtu_request) and adds the bridge to the Open_vSwitch row, in one
// transaction: either all of it exists afterwards or none. The unique name
// indexes of the schema make a second creation of the same name fail instead
// of duplicating it. ovs-vswitchd then creates the datapath and the
// interface asynchronously (see WaitInterface).
func (c *Client) CreateBridge(ctx context.Context, spec BridgeSpec) error {
	o, err := c.root(ctx)
	if err != nil {
		return err
	}
	iface := &Interface{UUID: "fpiface", Name: spec.Name, Type: InterfaceTypeInternal}
	if spec.MTU > 0 {
		iface.MTURequest = &spec.MTU
	}
	port := &Port{UUID: "fpport", Name: spec.Name, Interfaces: []string{iface.UUID}}
	br := &Bridge{UUID: "fpbridge", Name: spec.Name, Ports: []string{port.UUID}, DatapathType: spec.DatapathType, ExternalIDs: spec.ExternalIDs}
	ops, err := c.c.Create(iface, port, br)
	if err != nil {
		return fmt.Errorf("failed to build insert of OVS bridge %s: %w", spec.Name, err)
	}
	root := &OpenvSwitch{UUID: o.UUID}
	mut, err := c.c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{br.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build mutation of the Open_vSwitch row for bridge %s: %w", spec.Name, err)
	}
	return c.run(ctx, "create OVS bridge "+spec.Name, append(ops, mut...))
}

// DeleteBridge removes bridge name from the Open_vSwitch row (OVSDB then
// drops the unreferenced Bridge, Port and Interface rows, which are not root
// rows, as for DeletePort; ovs-vswitchd then its datapath and interfaces). A
// missing bridge is not an error.
func (c *Client) DeleteBridge(ctx context.Context, name string) error {
	b, err := lookupBridge(ctx, c.c, name)
	if err != nil || b == nil {
		return err
	}
	o, err := c.root(ctx)
	if err != nil {
		return err
	}
	root := &OpenvSwitch{UUID: o.UUID}
	mut, err := c.c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{b.UUID}})
	if err != nil {
		return fmt.Errorf("failed to build mutation of the Open_vSwitch row for bridge %s: %w", name, err)
	}
	return c.run(ctx, "delete OVS bridge "+name, mut)
}

// SetDatapathType sets the datapath_type of bridge name.
func (c *Client) SetDatapathType(ctx context.Context, name, datapathType string) error {
	b := &Bridge{Name: name, DatapathType: datapathType}
	ops, err := c.c.Where(b).Update(b, &b.DatapathType)
	if err != nil {
		return fmt.Errorf("failed to build update of OVS bridge %s: %w", name, err)
	}
	return c.run(ctx, fmt.Sprintf("set datapath_type %s on OVS bridge %s", datapathType, name), ops)
}

// SetMTURequest sets mtu_request (bytes) of interface name.
func (c *Client) SetMTURequest(ctx context.Context, name string, mtu int) error {
	i := &Interface{Name: name, MTURequest: &mtu}
	ops, err := c.c.Where(i).Update(i, &i.MTURequest)
	if err != nil {
		return fmt.Errorf("failed to build update of OVS interface %s: %w", name, err)
	}
	return c.run(ctx, fmt.Sprintf("set mtu_request %d on OVS interface %s", mtu, name), ops)
}

// WaitInterface polls the cache every pollInterval until interface name
// exists and done(it) is true, or ctx ends. It returns the last row seen (nil
// when none) and, when ctx ended first, ctx's error; a failed read ends the
// wait with that error and no row.
func (c *Client) WaitInterface(ctx context.Context, name string, done func(*Interface) bool) (*Interface, error) {
	var (
		last    *Interface
		readErr error
	)
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		last, readErr = c.Interface(ctx, name)
		if readErr != nil {
			return false, readErr
		}
		return last != nil && done(last), nil
	})
	if readErr != nil {
		return nil, readErr
	}
	return last, err
}

// WaitBridge polls the cache every pollInterval until bridge name exists or
// ctx ends (a bridge just created becomes visible when ovsdb-server's update
// arrives). Errors read "failed to see OVS bridge <name> in the OVSDB cache:
// <ctx error>" or are the failed read's.
func (c *Client) WaitBridge(ctx context.Context, name string) (*Bridge, error) {
	var (
		b       *Bridge
		readErr error
	)
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		b, readErr = c.Bridge(ctx, name)
		return b != nil, readErr
	})
	switch {
	case readErr != nil:
		return nil, readErr
	case err != nil:
		return nil, fmt.Errorf("failed to see OVS bridge %s in the OVSDB cache: %w", name, err)
	}
	return b, nil
}

// run runs ops in one transaction (see transact) and drops the results.
func (c *Client) run(ctx context.Context, what string, ops []ovsdb.Operation) error {
	_, err := transact(ctx, c.c, what, ops)
	return err
}

// Conn connects lazily and reconnects after a lost connection, so that a
// long-running agent survives ovsdb-server restarts and nodes without OVS. It
// is safe for concurrent use.
type Conn struct {
	endpoint string
	log      logr.Logger

	mu sync.Mutex
	c  *Client
}

// NewConn returns a Conn for endpoint; nothing is dialed until Client.
func NewConn(endpoint string, log logr.Logger) *Conn {
	return &Conn{endpoint: endpoint, log: log}
}

// Endpoint returns the OVSDB endpoint.
func (l *Conn) Endpoint() string { return l.endpoint }

// Client returns a connected client, dialing when there is none or the last
// one lost its connection; ctx bounds the dial. Errors wrap ErrUnreachable
// when ovsdb-server does not answer.
func (l *Conn) Client(ctx context.Context) (*Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil && l.c.Connected() {
		return l.c, nil
	}
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
	c, err := Connect(ctx, l.endpoint, l.log)
	if err != nil {
		return nil, err
	}
	l.c = c
	return c, nil
}

// Close closes the current connection, if any.
func (l *Conn) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
}
