package hostlocal

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
	"golang.org/x/sys/unix"
)

// DefaultDataDir is host-local's data directory when the configuration
// names none (backend/disk).
const DefaultDataDir = "/var/lib/cni/networks"

// Store is host-local's disk store (backend/disk.Store: its lock, lookups
// and releases) with a Reserve whose address file appears whole or not at
// all.
type Store struct {
	*disk.Store
	dir string
}

var _ backend.Store = &Store{}

// NewStore opens the store of network under dataDir (DefaultDataDir when
// ""), creating <dataDir>/<network> as host-local does.
func NewStore(network, dataDir string) (*Store, error) {
	s, err := disk.New(network, dataDir)
	if err != nil {
		return nil, fmt.Errorf("failed to open host-local store of network %s: %w", network, err)
	}
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	return &Store{Store: s, dir: filepath.Join(dataDir, network)}, nil
}

// Reserve records ip as allocated to id/ifname, as disk.Store.Reserve does
// (same file name, content, mode and last_reserved_ip.<rangeID>), and
// reports false when ip is taken. The address file is written as an
// unnamed file (O_TMPFILE) and linked to its name only once it holds its
// owner, so a process killed half-way leaves no file, never an empty one
// that host-local's DEL (which matches owners by content) cannot release.
// On a file system without O_TMPFILE it falls back to disk.Store.Reserve.
// The caller holds the store's lock.
func (s *Store) Reserve(id, ifname string, ip net.IP, rangeID string) (bool, error) {
	fd, err := unix.Open(s.dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return s.Store.Reserve(id, ifname, ip, rangeID)
	}
	if err != nil {
		return false, fmt.Errorf("failed to create address file in %s: %w", s.dir, err)
	}
	f := os.NewFile(uintptr(fd), s.dir)
	defer f.Close()
	if _, err := f.WriteString(strings.TrimSpace(id) + disk.LineBreak + ifname); err != nil {
		return false, fmt.Errorf("failed to write address file of %s: %w", ip, err)
	}
	name := disk.GetEscapedPath(s.dir, ip.String())
	// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, which the plugin (root) has;
	// the /proc link is the documented way without it.
	err = unix.Linkat(fd, "", unix.AT_FDCWD, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EPERM) {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW)
	}
	if errors.Is(err, unix.EEXIST) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to link address file %s: %w", name, err)
	}
	if err := os.WriteFile(disk.GetEscapedPath(s.dir, "last_reserved_ip."+rangeID), []byte(ip.String()), 0o600); err != nil {
		return false, err
	}
	return true, nil
}
