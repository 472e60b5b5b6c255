package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// resolvedPath is path with its parent's symbolic links resolved
// (/var/run is a link to /run on Debian), as /proc/self/mountinfo names it.
func resolvedPath(path string) string {
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return path
	}
	return filepath.Join(parent, filepath.Base(path))
}

// kubevirtMounts makes KubeVirtKubeletRoot and KubeVirtRunDir (preflight
// refused either existing: another kubelet's or KubeVirt's, which this
// cluster must not share), and bind-mounts each on itself as a shared
// mount: virt-handler's Bidirectional mounts of them need a shared peer
// group, and the host's / is private. Each directory and mount is recorded
// in the run state before the next is made, so a killed Up leaves Down
// what to undo.
func (u *upper) kubevirtMounts() error {
	dirs := []string{resolvedPath(KubeVirtKubeletRoot), resolvedPath(KubeVirtRunDir)}
	for _, dir := range dirs { // preflight checked; a directory made since is not ours
		if _, err := os.Lstat(dir); err == nil {
			return fmt.Errorf("%s appeared while the cluster came up: not this cluster's, left alone", dir)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	u.state.KubeVirt = true
	// containerd (1.6) checks a Bidirectional hostPath's propagation on the
	// mount it finds by the path as written, without resolving symbolic
	// links: /var/run/kubevirt is under /var/run, a link to /run, so it
	// looks at / and refuses a private one ("path /var/run/kubevirt is
	// mounted on / but it is not a shared mount"). / is shared on systemd
	// hosts; here it is private, so it is made shared (not recursively:
	// the mounts under it keep their propagation) and Down undoes it.
	if shared, err := rootShared(); err != nil {
		return err
	} else if !shared {
		u.state.RootMadeShared = true
		if err := runstate.Save(u.l.state, u.state); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "", unix.MS_SHARED, ""); err != nil {
			return fmt.Errorf("failed to make / a shared mount: %w", err)
		}
	}
	// The host directories virt-handler's DaemonSet mounts (hostPath
	// DirectoryOrCreate, so the kubelet makes them): Down removes the ones
	// that were not there before this cluster.
	for _, dir := range KubeVirtHostDirs {
		dir = resolvedPath(dir)
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			u.state.KubeVirtDirs = append(u.state.KubeVirtDirs, dir)
		}
	}
	for _, dir := range dirs {
		var made []string
		for d := dir; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
			made = append([]string{d}, made...)
		}
		u.state.KubeVirtDirs = append(u.state.KubeVirtDirs, made...)
		if err := runstate.Save(u.l.state, u.state); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("failed to create %s: %w", dir, err)
		}
		u.state.SharedMounts = append(u.state.SharedMounts, dir)
		if err := runstate.Save(u.l.state, u.state); err != nil {
			return err
		}
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("failed to bind-mount %s on itself: %w", dir, err)
		}
		if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("failed to make %s a shared mount: %w", dir, err)
		}
	}
	return nil
}

// removeKubeVirtDirs removes the directories Up made for KubeVirt, deepest
// first, once nothing is mounted under them (the kubelet's and pods' files
// in KubeVirtKubeletRoot go with it: the kubelet was this cluster's).
func (d *downer) removeKubeVirtDirs() error {
	if left := mountsUnder(d.st.KubeVirtDirs...); len(left) > 0 {
		return fmt.Errorf("not removed: still mounted: %s", strings.Join(left, ", "))
	}
	var errs []error
	for i := len(d.st.KubeVirtDirs) - 1; i >= 0; i-- {
		dir := d.st.KubeVirtDirs[i]
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		d.td.Removed = append(d.td.Removed, "directory "+dir)
	}
	return errors.Join(errs...)
}

// rootShared reports whether the root mount of this mount namespace (the
// last mount on /) is in a peer group (mountinfo's optional field "shared:N").
func rootShared() (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	found, shared := false, false
	for _, line := range strings.Split(string(b), "\n") { // the last mount on / is the one seen
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != "/" {
			continue
		}
		found, shared = true, false
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	if !found {
		return false, errors.New("failed to find the root mount in /proc/self/mountinfo")
	}
	return shared, nil
}
