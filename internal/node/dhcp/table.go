package dhcp

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// settle is how long after the last change of the leases directory the
// Table trusts its modification time: file systems stamp it with a coarse
// clock (a jiffy), so two changes within one tick may leave one stamp.
const settle = time.Second

// Table is the node's leases as the CNI plugin recorded them in a leases
// directory, shared by the node's Responders. It reads the directory again
// when its modification time changed (every lease is written by a rename
// into it and removed by an unlink from it) or was too recent to trust.
type Table struct {
	dir     string
	ipamDir string
	log     logr.Logger

	mu     sync.Mutex
	mtime  time.Time
	loaded time.Time
	byMAC  map[macKey][]*leases.Lease
}

// macKey is a bridge and a MAC.
type macKey struct {
	bridge string
	mac    string
}

// NewTable returns the table of the leases in dir (a CNI state
// directory's leases.Dir), whose allocators are host-local's directories
// in the same state directory's netconf.IPAMDataDir; log gets the leases
// that cannot be read.
func NewTable(dir string, log logr.Logger) *Table {
	return &Table{dir: dir, ipamDir: netconf.IPAMDataDir(filepath.Dir(dir)), log: log}
}

// Reservation returns what l's allocator holds for l's address now (see
// lookupReservation): it is read on every call, not cached, so an address
// released or handed to another attachment is seen at once.
func (t *Table) Reservation(l *leases.Lease) (Reservation, error) {
	return lookupReservation(t.ipamDir, l)
}

// Lookup returns the lease of mac on bridge, nil when there is none. Two
// leases of one MAC on one bridge with different addresses (two pods given
// the same MAC) are an error: neither is answered.
func (t *Table) Lookup(bridge string, mac net.HardwareAddr) (*leases.Lease, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.refresh(); err != nil {
		return nil, err
	}
	ls := t.byMAC[macKey{bridge, strings.ToLower(mac.String())}]
	if len(ls) == 0 {
		return nil, nil
	}
	for _, l := range ls[1:] {
		if l.Address != ls[0].Address {
			return nil, fmt.Errorf("MAC %s has %d leases on bridge %s with different addresses (%s:%s %s, %s:%s %s): answering none",
				mac, len(ls), bridge, ls[0].ContainerID, ls[0].IfName, ls[0].Address, l.ContainerID, l.IfName, l.Address)
		}
	}
	return ls[0], nil
}

// refresh reads the directory again unless the table holds what it held at
// a modification time that has settled. t.mu is held.
func (t *Table) refresh() error {
	now := time.Now()
	st, err := os.Stat(t.dir)
	switch {
	case os.IsNotExist(err):
		t.byMAC, t.mtime, t.loaded = nil, time.Time{}, now
		return nil
	case err != nil:
		return fmt.Errorf("failed to stat lease directory %s: %w", t.dir, err)
	}
	if t.byMAC != nil && st.ModTime().Equal(t.mtime) && t.loaded.Sub(t.mtime) > settle {
		return nil
	}
	ls, err := leases.List(t.dir)
	if err != nil {
		t.log.Error(err, "Skipping unreadable leases", "dir", t.dir)
	}
	byMAC := make(map[macKey][]*leases.Lease, len(ls))
	for _, l := range ls {
		mac, err := l.HardwareAddr()
		if err != nil {
			continue // List returned only valid leases
		}
		k := macKey{l.Bridge, strings.ToLower(mac.String())}
		byMAC[k] = append(byMAC[k], l)
	}
	t.byMAC, t.mtime, t.loaded = byMAC, st.ModTime(), now
	return nil
}
