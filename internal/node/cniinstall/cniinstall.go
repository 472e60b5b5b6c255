package cniinstall

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Defaults.
const (
	// DefaultBinDir is the conventional CNI binary directory.
	DefaultBinDir = "/opt/cni/bin"
	// DefaultName is the plugin's binary name: the netconf "type".
	DefaultName = wellknown.PluginType
	// Mode of the installed binary.
	Mode os.FileMode = 0o755
)

// Result describes the installed binary.
type Result struct {
	// Path of the installed binary.
	Path string
	// SHA256 of its content, lower-case hex.
	SHA256 string
	// Installed is true when this call wrote it.
	Installed bool
}

// String returns "<path> sha256:<hex>", the FastPathNode status.cniBinary form.
func (r Result) String() string { return r.Path + " sha256:" + r.SHA256 }

// Installer copies Source to DestDir/Name. Its methods are safe for
// concurrent use.
type Installer struct {
	// Source is the binary shipped with the agent.
	Source string
	// DestDir is the CNI binary directory; empty means DefaultBinDir.
	DestDir string
	// Name of the installed file; empty means DefaultName.
	Name string
	// Companions are the names of files that ship beside Source and are
	// installed beside the plugin, each before the plugin itself: the
	// fastpath plugin hands OVS invocations over to
	// netconf.OVSPluginBinary in its own directory, so a new plugin must
	// never be in place before its companion.
	Companions []string
	// NodeConfigPath, when set, is where Ensure keeps NodeConfig: the
	// node configuration the plugin takes host paths and addresses from
	// (netconf.NodeConfig), root-owned, in the CNI configuration directory.
	NodeConfigPath string
	// NodeConfig is the node configuration written to NodeConfigPath.
	NodeConfig netconf.NodeConfig
	// Log receives a line for every install.
	// VerifyOnly checks instead of writing: Ensure fails, naming the file,
	// when an installed binary or the node configuration is missing or
	// differs from what it would install. The chart's install-cni init
	// container installs them and the long-running agent, which mounts the
	// CNI directories read-only, verifies them.
	VerifyOnly bool
	Log        logr.Logger

	mu sync.Mutex
	// known maps a file identity to its sha256, so that unchanged files
	// are not hashed again on every reconcile.
	known map[fileID]string
}

// fileID identifies file content well enough to skip rehashing: a rewrite
// in place changes size or mtime, a replacement changes the inode.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

// maxKnown bounds the hash cache; two entries (source and destination) per
// installed file are live at a time.
const maxKnown = 16

func idOf(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
	}
	return id
}

// Path returns the destination path.
func (i *Installer) Path() string {
	dir, name := i.DestDir, i.Name
	if dir == "" {
		dir = DefaultBinDir
	}
	if name == "" {
		name = DefaultName
	}
	return filepath.Join(dir, name)
}

// Ensure installs every companion and then Source, each unless its
// destination already has the same sha256, and returns what it did with
// Source. It fails when a source cannot be read, the directory cannot be
// created or written, or a source changed while it was copied; a failed
// install leaves the old binary in place and no temporary file behind, and
// a failed companion leaves the plugin as it was.
func (i *Installer) Ensure() (Result, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.known == nil {
		i.known = map[fileID]string{}
	}
	dest := i.Path()
	for _, name := range i.Companions {
		if _, err := i.ensureFile(filepath.Join(filepath.Dir(i.Source), name), filepath.Join(filepath.Dir(dest), name)); err != nil {
			return Result{Path: dest}, err
		}
	}
	res, err := i.ensureFile(i.Source, dest)
	if err != nil {
		return res, err
	}
	return res, i.ensureNodeConfig()
}

// ensureFile installs src as dest unless dest already has its sha256.
func (i *Installer) ensureFile(src, dest string) (Result, error) {
	res := Result{Path: dest}
	srcSum, err := i.sum(src)
	if err != nil {
		return res, fmt.Errorf("failed to read the CNI binary to install %s: %w", src, err)
	}
	res.SHA256 = srcSum
	destSum, err := i.sum(dest)
	if err == nil && destSum == srcSum {
		return res, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("failed to read the installed CNI binary %s: %w", dest, err)
	}
	if i.VerifyOnly {
		what := "is missing"
		if err == nil {
			what = "is sha256:" + destSum
		}
		return res, fmt.Errorf("the installed CNI binary %s %s, not this agent's sha256:%s: its install-cni init container installs it; restart the agent pod", dest, what, srcSum)
	}
	if err := i.install(src, dest, srcSum); err != nil {
		return res, err
	}
	res.Installed = true
	i.Log.Info("Installed CNI binary", "path", dest, "sha256", srcSum, "source", src)
	return res, nil
}

// ensureNodeConfig writes NodeConfig to NodeConfigPath unless the file
// already holds it in a form the plugin accepts (root-owned, not writable
// by others).
func (i *Installer) ensureNodeConfig() error {
	if i.NodeConfigPath == "" {
		return nil
	}
	if got, err := netconf.LoadNodeConfig(i.NodeConfigPath); err == nil {
		want := i.NodeConfig
		if err := want.Validate(); err != nil {
			return fmt.Errorf("failed to write the node configuration %s: %w", i.NodeConfigPath, err)
		}
		if got == want {
			if _, serr := os.Stat(i.NodeConfigPath); serr == nil {
				return nil
			}
		}
	}
	if i.VerifyOnly {
		return fmt.Errorf("the CNI node configuration %s is missing or differs from this agent's (state directory %s, OVSDB %s): its install-cni init container writes it; restart the agent pod",
			i.NodeConfigPath, i.NodeConfig.StateDir, i.NodeConfig.OVS.Socket)
	}
	if err := netconf.WriteNodeConfig(i.NodeConfigPath, i.NodeConfig); err != nil {
		return err
	}
	i.Log.Info("Wrote the CNI node configuration", "path", i.NodeConfigPath, "stateDir", i.NodeConfig.StateDir, "ovsSocket", i.NodeConfig.OVS.Socket)
	return nil
}

// sum returns the sha256 of path, from the cache when the file is unchanged.
func (i *Installer) sum(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	id := idOf(fi)
	if s, ok := i.known[id]; ok {
		return s, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	s := hex.EncodeToString(h.Sum(nil))
	if len(i.known) >= maxKnown {
		clear(i.known)
	}
	i.known[id] = s
	return s, nil
}

// tempPattern names the temporary files of dest: hidden, in the destination
// directory (rename(2) is atomic only within one file system).
func tempPattern(dest string) string { return "." + filepath.Base(dest) + ".tmp-*" }

func (i *Installer) install(source, dest, wantSum string) (err error) {
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create CNI binary directory %s: %w", dir, err)
	}
	// Temporary files of an agent killed mid-copy.
	if stale, _ := filepath.Glob(filepath.Join(dir, tempPattern(dest))); len(stale) > 0 {
		for _, s := range stale {
			_ = os.Remove(s)
		}
	}
	src, err := os.Open(source)
	if err != nil {
		return fmt.Errorf("failed to open the CNI binary to install %s: %w", source, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, tempPattern(dest))
	if err != nil {
		return fmt.Errorf("failed to create a temporary file in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		return fmt.Errorf("failed to copy %s to %s: %w", source, tmp.Name(), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSum {
		return fmt.Errorf("failed to copy %s: it changed while being copied (sha256 %s, then %s)", source, wantSum, got)
	}
	if err := tmp.Chmod(Mode); err != nil {
		return fmt.Errorf("failed to set mode of %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("failed to rename %s to %s: %w", tmp.Name(), dest, err)
	}
	// Make the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
