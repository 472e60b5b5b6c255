package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/utils"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/internal/platform/recordfile"
)

// lockFile is the name of the flock(2) target inside the state directory.
const lockFile = "lock"

// TempPrefix starts the name of a state file being written. Save names it
// after the attachment (".tmp-<containerID>:<ifname>.json"), so a writer
// killed between create and rename strands at most one per attachment, the
// next Save of that attachment reuses it, Delete removes it and SweepTemp
// removes any that is left (internal/platform/recordfile, which the leases
// share).
const TempPrefix = recordfile.TempPrefix

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
	// PortSecurity is true once ADD may have installed port security rules
	// (cni/pkg/portsec): for HostIfName in the host's bridge table on
	// datapath LinuxBridge, on IfName's egress in Netns on datapath OVS. DEL
	// and GC remove them.
	PortSecurity bool `json:"portSecurity,omitempty"`
	// IPAMType is the IPAM plugin that holds the attachment's addresses.
	IPAMType string `json:"ipamType"`
	// NetConf is the configuration ADD ran with, as the runtime gave it.
	NetConf json.RawMessage `json:"netConf"`
	// IPAMConf is the configuration ADD gave the IPAM plugin (netconf.NetConf
	// IPAMConf: the IPAM keys checked, dataDir set by the plugin); DEL, GC and
	// the reclaim of an unfinished ADD give it to the IPAM plugin's DEL to
	// release the attachment's addresses (see IPAMInput).
	IPAMConf json.RawMessage `json:"ipamConf,omitempty"`
	// Args is the CNI_ARGS of the ADD; with Netns and NetConf it identifies
	// the request, so that a repeated ADD can be told from a different one.
	Args string `json:"args,omitempty"`
	// Complete is false while ADD is still wiring the attachment (or crashed
	// doing so) and true once ADD succeeded (see Store.Complete).
	Complete bool `json:"complete"`
	// Result is the CNI result ADD printed, as a types/100 Result (JSON), set
	// with Complete; a repeated identical ADD prints it again.
	Result json.RawMessage `json:"result,omitempty"`
	// Created is when ADD first recorded the attachment.
	Created time.Time `json:"created"`
}

// IPAMInput returns the configuration that releases a's addresses through
// the IPAM plugin's DEL: IPAMConf, or NetConf for a record written before
// IPAMConf existed (its ADD gave the IPAM plugin the netconf as it was).
func (a *Attachment) IPAMInput() []byte {
	if len(a.IPAMConf) > 0 {
		return a.IPAMConf
	}
	return a.NetConf
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

// Lock is a held lock of the store; Unlock releases it.
type Lock struct {
	f     *os.File
	flock bool
}

// File returns the open lock file that holds the lock. Both kinds of lock
// belong to the open file description, so a child process that inherits
// the file (exec.Cmd.ExtraFiles) keeps the lock held after this process is
// killed, until the child exits too.
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock (for the node lock also when a child still holds
// the file) and closes the file.
func (l *Lock) Unlock() {
	if l.flock {
		_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	}
	l.f.Close() // closing the description drops its OFD locks
}

// Lock takes the node-wide lock: shared for ADD, CHECK and DEL (which only
// touch their own attachment, and each of which the runtime never runs twice
// at once for one attachment), exclusive for GC (which removes attachments it
// did not create and must not race an ADD). It blocks until the lock is held.
func (s *Store) Lock(exclusive bool) (*Lock, error) {
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
	return &Lock{f: f, flock: true}, nil
}

// LockAttachment takes the lock of the attachment containerID/ifName: an
// open-file-description lock (fcntl F_OFD_SETLKW) on one byte of the lock
// file at an offset hashed from the key, independent of Lock's flock. It
// serialises a runtime's retried ADD with one still running, and ADD with
// DEL, of one attachment, without a file per attachment; a hash collision
// only serialises two attachments. The kernel drops it when the last holder
// of the file (see Lock.File) exits. Take it after Lock; it blocks until held.
func (s *Store) LockAttachment(containerID, ifName string) (*Lock, error) {
	path := filepath.Join(s.dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open lock file %s: %w", path, err)
	}
	h := fnv.New64a()
	h.Write([]byte(containerID + "\x00" + ifName))
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(h.Sum64() >> 2), Len: 1}
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &lk)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to lock attachment %s/%s in %s: %w", containerID, ifName, path, err)
	}
	return &Lock{f: f}, nil
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
	return filepath.Join(s.dir, recordfile.Name(containerID, ifName)), nil
}

// Save writes a atomically: to the TempPrefix file named after the
// attachment, renamed over the state file, so that a reader (and the next
// invocation after a kill at any point) sees the old record or the new one,
// never part of one. The file holds a as one line. The caller holds
// LockAttachment of a.
//
// Save does not fsync. What a record describes (the veth pair, its network
// namespace, a Linux bridge's port) does not survive a crash of the node
// either, and what does survive is found without the record: DEL derives the
// host veth from CNI_CONTAINERID and CNI_IFNAME and releases the addresses
// with the netconf it is given, GC finds OVS ports by their external_ids (and
// Debian's host-local, which holds the addresses, does not fsync its own
// files). After such a crash a record may be missing or empty: DEL then goes
// by the derived names, GC skips it and says so. The two fsyncs of an ADD
// were the largest part of the plugin's own file work, and concurrent ADDs
// waited on them (the figures: docs/design.md §4.3).
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
	if err := recordfile.Write(path, append(data, '\n')); err != nil {
		return fmt.Errorf("failed to write state %s: %w", path, err)
	}
	return nil
}

// Complete records the completed attachment a (a.Complete true, its Result
// set) after Save recorded it: Update.
func (s *Store) Complete(a *Attachment) error { return s.Update(a) }

// Update records a change of the attachment a after Save recorded it (the
// port security flag on the way, then Complete): it appends a as a line to
// the state file in one write(2), its newline last. A kill can cut a write
// short only between pages, so a line without its newline (or, after a
// crash of the node, one that does not decode) does not count, and the
// record stays the one before: what an ADD killed before it returned must
// leave. Unlike a second Save it creates no file: every new file costs an
// inode allocation and a rename in the state directory, which concurrent
// ADDs take turns on (its CPU cost: docs/design.md §4.3).
// The caller holds LockAttachment of a; the state file must exist.
func (s *Store) Update(a *Attachment) error {
	path, err := s.Path(a.ContainerID, a.IfName)
	if err != nil {
		return err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("failed to encode state %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("failed to update state %s: %w", path, err)
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to update state %s: %w", path, err)
	}
	return nil
}

// Load reads the attachment containerID/ifName: the last whole line of its
// state file (see Update). A missing attachment is an error for which
// errors.Is(err, fs.ErrNotExist) holds.
func (s *Store) Load(containerID, ifName string) (*Attachment, error) {
	path, err := s.Path(containerID, ifName)
	if err != nil {
		return nil, err
	}
	return load(path)
}

// load decodes the state file path: the first line (written whole by Save's
// rename, with or without its newline), replaced by each later line that
// ends in a newline and decodes (Update's).
func load(path string) (*Attachment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read state %s: %w", path, err)
	}
	first, rest, _ := bytes.Cut(data, []byte{'\n'})
	a := &Attachment{}
	if err := json.Unmarshal(first, a); err != nil {
		return nil, fmt.Errorf("failed to decode state %s: %w", path, err)
	}
	for len(rest) > 0 {
		line, more, whole := bytes.Cut(rest, []byte{'\n'})
		if !whole {
			break // an append cut short
		}
		next := &Attachment{}
		if json.Unmarshal(line, next) == nil {
			a = next
		}
		rest = more
	}
	return a, nil
}

// Delete removes the attachment containerID/ifName and a temporary file a
// killed Save of it left; a missing one is not an error.
func (s *Store) Delete(containerID, ifName string) error {
	path, err := s.Path(containerID, ifName)
	if err != nil {
		return err
	}
	if err := recordfile.Remove(path); err != nil {
		return fmt.Errorf("failed to remove state %s: %w", path, err)
	}
	return nil
}

// SweepTemp removes the TempPrefix files in the store whose modification
// time is at least minAge ago, and returns their names. Writers remove
// their own; what is left was stranded by a killed writer (or by a plugin
// version that named them randomly). With minAge 0 the caller must hold
// Lock exclusively, so that no Save is under way.
func (s *Store) SweepTemp(minAge time.Duration) ([]string, error) {
	return recordfile.SweepTemp(s.dir, minAge)
}

// List returns every attachment in the store, sorted by container ID and
// ifname. Files that cannot be read or decoded are skipped and reported in
// the returned error (joined), alongside the attachments that could be read.
func (s *Store) List() ([]*Attachment, error) {
	names, err := recordfile.List(s.dir)
	if err != nil {
		return nil, err
	}
	var out []*Attachment
	var errs []error
	for _, name := range names {
		a, err := load(filepath.Join(s.dir, name))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed by a concurrent DEL
				errs = append(errs, err)
			}
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}
