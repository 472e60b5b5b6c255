package ovsdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// dialOptions says how dial logs and what it monitors.
type dialOptions struct {
	// Log receives libovsdb's own log lines.
	Log logr.Logger
	// Tables are the monitored tables and columns: client.WithTable over rows
	// of this package's model, e.g.
	// client.WithTable(b, &b.Name, &b.Ports) for b := &Bridge{}. Only
	// monitored columns are filled in the cache that reads use.
	Tables []client.MonitorOption
	// Unreachable, when not nil, is wrapped by the errors of the connect and
	// monitor steps, between the endpoint and libovsdb's error (Connect
	// passes ErrUnreachable).
	Unreachable error
}

// dial builds the model of ClientDBModel, connects to endpoint (unix:<path>,
// tcp:<host>:<port>, ssl:<host>:<port>) and monitors opts.Tables; ctx bounds
// the dial and the initial monitor. Errors read "failed to build OVSDB
// model: …", "failed to create OVSDB client for <endpoint>: …", "failed to
// connect to OVSDB at <endpoint>: …" or "failed to monitor OVSDB at
// <endpoint>: …". Close the returned client when done.
func dial(ctx context.Context, endpoint string, opts dialOptions) (client.Client, error) {
	dbModel, err := ClientDBModel()
	if err != nil {
		return nil, fmt.Errorf("failed to build OVSDB model: %w", err)
	}
	log := opts.Log
	c, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint), client.WithLogger(&log))
	if err != nil {
		return nil, fmt.Errorf("failed to create OVSDB client for %s: %w", endpoint, err)
	}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("failed to connect to OVSDB at %s: %w", endpoint, opts.wrap(err))
	}
	if _, err := c.Monitor(ctx, c.NewMonitor(opts.Tables...)); err != nil {
		c.Close()
		return nil, fmt.Errorf("failed to monitor OVSDB at %s: %w", endpoint, opts.wrap(err))
	}
	return c, nil
}

func (o dialOptions) wrap(err error) error {
	if o.Unreachable == nil {
		return err
	}
	return fmt.Errorf("%w: %w", o.Unreachable, err)
}

// lookupBridge returns the Bridge row name from c's cache, or nil when there
// is none.
func lookupBridge(ctx context.Context, c client.Client, name string) (*Bridge, error) {
	return lookup(ctx, c, "bridge", &Bridge{Name: name}, name)
}

// lookupPort returns the Port row name from c's cache, or nil when there is
// none.
func lookupPort(ctx context.Context, c client.Client, name string) (*Port, error) {
	return lookup(ctx, c, "port", &Port{Name: name}, name)
}

// lookupInterface returns the Interface row name from c's cache, or nil when
// there is none.
func lookupInterface(ctx context.Context, c client.Client, name string) (*Interface, error) {
	return lookup(ctx, c, "interface", &Interface{Name: name}, name)
}

// lookup reads row (its name index set) from the cache: nil when there is no
// such row; errors read "failed to look up OVS <kind> <name>: …".
func lookup[T any](ctx context.Context, c client.Client, kind string, row *T, name string) (*T, error) {
	if err := c.Get(ctx, row); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to look up OVS %s %s: %w", kind, name, err)
	}
	return row, nil
}

// transact runs ops in one transaction and checks each operation's result.
// It returns the results (one per operation, in order); errors read "failed
// to <what>: …".
func transact(ctx context.Context, c client.Client, what string, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	res, err := c.Transact(ctx, ops...)
	if err != nil {
		return nil, fmt.Errorf("failed to %s: %w", what, err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return nil, fmt.Errorf("failed to %s: %w", what, err)
	}
	return res, nil
}
