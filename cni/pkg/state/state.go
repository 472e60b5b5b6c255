package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/utils"
	"golang.org/x/sys/unix"
)

// lockFile is the name of the flock(2) target inside the state directory.
const lockFile = "lock"

// Attachment is what ADD records about one attachment and DEL, CHECK and GC
// read back. Created is set by Save when zero.
type Attachment struct {
	// ContainerID and IfName are the CNI_CONTAINERID and CNI_IFNAME of the ADD: the key.
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	// Netns is the CNI_NETNS path of the ADD.
	Netns string `json:"netns"`
	// Network is the netconf "name"; GC only touches attachments of its own network.
	Network string `json:"network"`
	// Datapath, Bridge and OVSSocket say where the host end was attached.
	Datapath  string `json:"datapath"`
	Bridge    string `json:"bridge"`
	OVSSocket string `json:"ovsSocket,omitempty"`
	// HostIfName is the host end of the veth pair.
	HostIfName string `json:"hostIfName"`
	// MAC is the container interface MAC address.
	MAC string `json:"mac,omitempty"`
	// IPAMType is the IPAM plugin that holds the attachment's addresses.
	IPAMType string `json:"ipamType"`
	// NetConf is the configuration ADD ran with; GC hands it to the IPAM
	// plugin's DEL to release the addresses of a stale attachment.
	NetConf json.RawMessage `json:"netConf"`
	// Complete is false while ADD is still wiring the attachment (or crashed
	// doing so) and true once ADD succeeded.
	Complete bool `json:"complete"`
	// Created is when ADD first recorded the attachment.
	Created time.Time `json:"created"`
}

// Store is a state directory. The zero value is not usable; call New.
type Store struct {
	dir string
}

// New returns the store in dir, creating dir (mode 0700) when missing.
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create state directory %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// Lock takes the node-wide lock: shared for ADD, CHECK and DEL (which only
// touch their own attachment, and each of which the runtime never runs twice
// at once for one attachment), exclusive for GC (which removes attachments it
// did not create and must not race an ADD). It blocks until the lock is held
// and returns the function that releases it.
func (s *Store) Lock(exclusive bool) (unlock func(), err error) {
	path := filepath.Join(s.dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open lock file %s: %w", path, err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to lock %s: %w", path, err)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// Path returns the file that holds the attachment containerID/ifName, or an
// error when either is not a valid CNI container ID or interface name (which
// also keeps both out of other directories).
func (s *Store) Path(containerID, ifName string) (string, error) {
	if err := utils.ValidateContainerID(containerID); err != nil {
		return "", fmt.Errorf("failed to name state file for container %q: %s", containerID, err.Msg)
	}
	if err := utils.ValidateInterfaceName(ifName); err != nil {
		return "", fmt.Errorf("failed to name state file for interface %q: %s", ifName, err.Msg)
	}
	return filepath.Join(s.dir, containerID+":"+ifName+".json"), nil
}

// Save writes a atomically (temporary file, fsync while a is not Complete,
// rename).
func (s *Store) Save(a *Attachment) error {
	path, err := s.Path(a.ContainerID, a.IfName)
	if err != nil {
		return err
	}
	if a.Created.IsZero() {
		a.Created = time.Now().UTC()
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("failed to encode state %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("failed to create temporary state file in %s: %w", s.dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write state %s: %w", tmp.Name(), err)
	}
	// Only the first, incomplete record is fsynced: after a crash it is
	// what DEL and GC find. The completing save renames over it unsynced
	// (issue 13: the second fsync was the largest wall-clock cost of ADD
	// left beyond the reference bridge plugin's, measured A/B): a killed
	// plugin loses nothing (page cache), and a power loss loses at most the
	// Complete flag, whose veth does not survive the reboot either.
	if !a.Complete {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("failed to sync state %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to close state %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to rename state file to %s: %w", path, err)
	}
	return nil
}

// Load reads the attachment containerID/ifName. A missing attachment is an
// error for which errors.Is(err, fs.ErrNotExist) holds.
func (s *Store) Load(containerID, ifName string) (*Attachment, error) {
	path, err := s.Path(containerID, ifName)
	if err != nil {
		return nil, err
	}
	return load(path)
}

func load(path string) (*Attachment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read state %s: %w", path, err)
	}
	a := &Attachment{}
	if err := json.Unmarshal(data, a); err != nil {
		return nil, fmt.Errorf("failed to decode state %s: %w", path, err)
	}
	return a, nil
}

// Delete removes the attachment containerID/ifName; a missing one is not an error.
func (s *Store) Delete(containerID, ifName string) error {
	path, err := s.Path(containerID, ifName)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove state %s: %w", path, err)
	}
	return nil
}

// List returns every attachment in the store, sorted by container ID and
// ifname. Files that cannot be read or decoded are skipped and reported in
// the returned error (joined), alongside the attachments that could be read.
func (s *Store) List() ([]*Attachment, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to list state directory %s: %w", s.dir, err)
	}
	var out []*Attachment
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || !strings.Contains(name, ":") {
			continue
		}
		a, err := load(filepath.Join(s.dir, name))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed by a concurrent DEL
				errs = append(errs, err)
			}
			continue
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerID != out[j].ContainerID {
			return out[i].ContainerID < out[j].ContainerID
		}
		return out[i].IfName < out[j].IfName
	})
	return out, errors.Join(errs...)
}
