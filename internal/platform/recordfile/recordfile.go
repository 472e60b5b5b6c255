package recordfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// TempPrefix starts the name of a record file being written: Write names it
// after the record (TempPath), so a writer killed between create and rename
// strands at most one per record, the next Write of that record reuses it,
// Remove removes it and SweepTemp removes any that is left.
const TempPrefix = ".tmp-"

// Suffix ends the name of every record file.
const Suffix = ".json"

// Name returns the file name of the record of the attachment
// containerID/ifName: "<containerID>:<ifName>.json". Neither a CNI container
// ID nor an interface name may contain ':', so the name is unambiguous; the
// caller validates both.
func Name(containerID, ifName string) string {
	return containerID + ":" + ifName + Suffix
}

// TempPath returns the temporary file Write writes path through: TempPrefix
// and path's base name, in path's directory.
func TempPath(path string) string {
	return filepath.Join(filepath.Dir(path), TempPrefix+filepath.Base(path))
}

// Write writes data to path atomically: to TempPath(path) (mode 0600,
// truncated), renamed over path, so that a reader, and the next writer after
// a kill at any point, sees the old file or the new one, never part of one.
// On failure it removes the temporary file. Concurrent Writes of one path
// must be serialised by the caller.
//
// Write does not fsync: both callers' records describe what does not
// survive a crash of the node either (cni/pkg/state.Store.Save says why, and
// docs/design.md §4.3 what the fsyncs cost). The errors are the os
// package's, which name the file; the caller says what the record is.
func Write(path string, data []byte) error {
	tmp := TempPath(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// Remove removes path and the temporary file a killed Write of it left; a
// missing one is not an error. The error is the os package's.
func Remove(path string) error {
	for _, p := range []string{TempPath(path), path} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SweepTemp removes the TempPrefix files in dir whose modification time is
// at least minAge ago and returns their names. Writers remove their own;
// what is left was stranded by a killed writer. With minAge 0 the caller
// must make sure that no Write in dir is under way. Files it cannot remove
// are reported in the returned error (joined), alongside the names it removed.
func SweepTemp(dir string, minAge time.Duration) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to list directory %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), TempPrefix) || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < minAge {
			continue // gone meanwhile, or young
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("failed to remove stale temporary file %s: %w", p, err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// List returns the names of the record files in dir, sorted by container ID
// and then ifname (which is not the order of the names: '.', '-' and the
// digits sort before ':'): the regular files named "<containerID>:<ifname>.json"
// that are not TempPrefix files. A missing directory holds none.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to list directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(n, TempPrefix) || !strings.HasSuffix(n, Suffix) || !strings.Contains(n, ":") {
			continue
		}
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ci, ii, _ := strings.Cut(strings.TrimSuffix(names[i], Suffix), ":")
		cj, ij, _ := strings.Cut(strings.TrimSuffix(names[j], Suffix), ":")
		if ci != cj {
			return ci < cj
		}
		return ii < ij
	})
	return names, nil
}
