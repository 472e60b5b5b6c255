package localbench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/bench/topology"
)

// LockDir holds one lock file per live run, <prefix><id>.lock, flocked by
// the run for its whole life.
const LockDir = "/run/fastpath-bench-local"

// idLen is the number of hex digits of a run ID.
const idLen = 6

// runLock is the lock file of a live run.
type runLock struct {
	path string
	f    *os.File
}

// newRunID returns a fresh "<prefix><6 hex digits>" and takes its lock. The
// lock file is created and locked under a temporary name and then renamed
// into place, so CleanLeftovers never sees it unlocked.
func newRunID(prefix string) (string, *runLock, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return "", nil, fmt.Errorf("failed to create %s: %w", LockDir, err)
	}
	b := make([]byte, idLen/2)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("failed to make a run ID: %w", err)
	}
	id := prefix + hex.EncodeToString(b)
	tmp, err := os.CreateTemp(LockDir, ".new-")
	if err != nil {
		return "", nil, fmt.Errorf("failed to create a lock file in %s: %w", LockDir, err)
	}
	if err := unix.Flock(int(tmp.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", nil, fmt.Errorf("failed to lock %s: %w", tmp.Name(), err)
	}
	fmt.Fprintf(tmp, "pid %d\n", os.Getpid())
	path := filepath.Join(LockDir, id+".lock")
	if err := os.Rename(tmp.Name(), path); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", nil, fmt.Errorf("failed to move lock file to %s: %w", path, err)
	}
	return id, &runLock{path: path, f: tmp}, nil
}

// release removes and unlocks the lock file.
func (l *runLock) release() error {
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, l.f.Close())
}

// liveRuns returns the IDs with prefix whose lock is held by a live
// process, and removes the lock files of dead runs.
func liveRuns(prefix string) (map[string]bool, error) {
	live := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(LockDir, prefix+"*.lock"))
	if err != nil {
		return nil, fmt.Errorf("failed to list lock files: %w", err)
	}
	for _, p := range files {
		id := strings.TrimSuffix(filepath.Base(p), ".lock")
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			live[id] = true
		} else if err == nil {
			os.Remove(p)
		}
		f.Close()
	}
	return live, nil
}

// runIDOf returns the run ID a name starts with ("<prefix><6 hex>"), or ""
// when it does not look like one of ours.
func runIDOf(prefix, name string) string {
	if !strings.HasPrefix(name, prefix) || len(name) < len(prefix)+idLen {
		return ""
	}
	id := name[:len(prefix)+idLen]
	if _, err := hex.DecodeString(id[len(prefix):]); err != nil {
		return ""
	}
	return id
}

// Leftovers lists what runs with prefix that are no longer alive left
// behind: network namespaces, host links and bridges, Open vSwitch bridges
// and temporary directories. With only set, it lists the objects of that
// one run ID, alive or not.
type Leftovers struct {
	NetNS, Links, OVSBridges, TempDirs []string
}

// Empty reports whether nothing is left.
func (l Leftovers) Empty() bool {
	return len(l.NetNS)+len(l.Links)+len(l.OVSBridges)+len(l.TempDirs) == 0
}

func (l Leftovers) String() string {
	var parts []string
	for _, g := range []struct {
		what  string
		names []string
	}{{"netns", l.NetNS}, {"links", l.Links}, {"OVS bridges", l.OVSBridges}, {"temp dirs", l.TempDirs}} {
		if len(g.names) > 0 {
			parts = append(parts, g.what+" "+strings.Join(g.names, ","))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// FindLeftovers lists the objects whose names carry a run ID starting with
// prefix for which keep returns false.
func FindLeftovers(prefix string, keep func(id string) bool) (Leftovers, error) {
	var l Leftovers
	match := func(name string) bool {
		id := runIDOf(prefix, name)
		return id != "" && !keep(id)
	}
	nss, err := topology.ListNetNS(prefix)
	if err != nil {
		return l, err
	}
	for _, n := range nss {
		if match(n) {
			l.NetNS = append(l.NetNS, n)
		}
	}
	links, err := topology.ListHostLinks(prefix)
	if err != nil {
		return l, err
	}
	for _, n := range links {
		if match(n) {
			l.Links = append(l.Links, n)
		}
	}
	brs, _ := listOVSBridges() // no OVS running: no OVS bridges to clean
	for _, n := range brs {
		if match(n) {
			l.OVSBridges = append(l.OVSBridges, n)
		}
	}
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if err != nil {
		return l, fmt.Errorf("failed to list temporary directories: %w", err)
	}
	for _, d := range dirs {
		if match(filepath.Base(d)) {
			l.TempDirs = append(l.TempDirs, d)
		}
	}
	return l, nil
}

// CleanLeftovers removes what earlier runs with prefix left behind when
// they were killed (their lock is no longer held): processes inside their
// namespaces (netservers), the namespaces, host links and bridges, Open
// vSwitch bridges and temporary directories. Live runs are not touched. It
// returns what it removed.
func CleanLeftovers(prefix string, log logr.Logger) (Leftovers, error) {
	live, err := liveRuns(prefix)
	if err != nil {
		return Leftovers{}, err
	}
	l, err := FindLeftovers(prefix, func(id string) bool { return live[id] })
	if err != nil {
		return l, err
	}
	if l.Empty() {
		return l, nil
	}
	log.Info("Removing leftovers of killed runs", "leftovers", l.String())
	return l, removeAll(l)
}

// removeAll removes the objects of l; missing ones are not errors.
func removeAll(l Leftovers) error {
	var errs []error
	for _, b := range l.OVSBridges {
		if err := deleteOVSBridge(b); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range l.NetNS {
		if _, err := topology.KillProcessesIn(filepath.Join(topology.NetNSDir, n)); err != nil {
			errs = append(errs, err)
		}
		if err := topology.DeleteNetNS(n); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range l.Links {
		if err := topology.DeleteHostLink(n); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range l.TempDirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
