package cleanup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/go-logr/logr"
	"github.com/google/nftables"

	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
)

// Options say what to remove besides the marked links.
type Options struct {
	// Bridges removes the links and OVS bridges with its marker (set its
	// OVS to remove OVS bridges too; nil means Linux links only).
	Bridges *bridge.Manager
	// Table deletes the port security table (needs CAP_NET_ADMIN).
	Table bool
	// Paths are files and directories removed with everything below them:
	// the plugin binaries and its node configuration. A missing path is not
	// an error.
	Paths []string
	// EmptyDirs are directories whose entries are removed, the directories
	// kept (a mount point cannot be removed): the plugin's state directory.
	EmptyDirs []string
	// Log receives a line per thing removed.
	Log logr.Logger
}

// Report is what Run removed.
type Report struct {
	// Removed are the links and OVS bridges deleted.
	Removed bridge.Removed
	// Table is true when the port security table was deleted.
	Table bool
	// Paths are the paths that existed and were removed.
	Paths []string
}

// Run removes what Fastpath made on the node, in the network namespace of
// the calling thread: marked links and OVS bridges, the port security table,
// then opts.Paths and what opts.EmptyDirs hold. It goes on after a failure and returns the errors joined,
// with what it removed.
func Run(ctx context.Context, opts Options) (Report, error) {
	var rep Report
	var errs []error
	if opts.Bridges != nil {
		removed, err := opts.Bridges.RemoveManaged(ctx)
		rep.Removed = removed
		if err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Table {
		deleted, err := deletePortSecurityTable()
		rep.Table = deleted
		if err != nil {
			errs = append(errs, err)
		} else if deleted {
			opts.Log.Info("Deleted nftables table", "family", "bridge", "table", wellknown.PortSecurityTable)
		}
	}
	paths := slices.Clone(opts.Paths)
	for _, dir := range opts.EmptyDirs {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to list %s: %w", dir, err))
		}
		for _, e := range entries {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", p, err))
			continue
		}
		opts.Log.Info("Removed", "path", p)
		rep.Paths = append(rep.Paths, p)
	}
	return rep, errors.Join(errs...)
}

// deletePortSecurityTable deletes the table bridge wellknown.PortSecurityTable
// when it exists, and reports whether it did.
func deletePortSecurityTable() (bool, error) {
	c, err := nftables.New()
	if err != nil {
		return false, fmt.Errorf("failed to open nftables: %w", err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyBridge)
	if err != nil {
		return false, fmt.Errorf("failed to list nftables tables of family bridge: %w", err)
	}
	for _, t := range tables {
		if t.Name != wellknown.PortSecurityTable {
			continue
		}
		c.DelTable(t)
		if err := c.Flush(); err != nil {
			return false, fmt.Errorf("failed to delete nftables table bridge %s: %w", t.Name, err)
		}
		return true, nil
	}
	return false, nil
}
