package backend

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultGID is the backend's group by default (the chart's
// agent.sibling.backend.gid, distroless's nonroot), and its user's ID.
const DefaultGID = 65532

// SocketDirMode is the mode of the backend's socket directory as the node
// agent makes it (PrepareSocketDir): owned by root and in the backend's
// group, the backend's user's primary group and the agent's supplementary
// one, so that both may create and reach entries and nobody else may. The
// backend, not its owner, cannot open it to others.
const SocketDirMode os.FileMode = 0o770

// OwnSocketDirMode is the mode of a socket directory the backend's user
// owns, as the init container of releases before PrepareSocketDir left it
// (EnsureSocketDir keeps accepting it): its user creates the sockets, its
// group (the agent's supplementary group) may reach them.
const OwnSocketDirMode os.FileMode = 0o750

// SocketUmask is the backend's umask: the sockets vhost-device-vsock binds
// get mode 0666, because QEMU (KubeVirt's user 107, in no group of ours)
// connects to a VM's vhost-user socket through the hard link the agent's
// device plugin puts into its launcher's directory; the directory's mode
// (SocketDirMode), not the socket's, keeps everyone else out.
const SocketUmask = 0o111

// PrepareSocketDir makes the backend's socket directory dir for the node
// agent: root's (this process's user), in group gid (the backend's), with
// SocketDirMode. It needs no capability: the owner of a file may give it
// any group it is a member of (chown(2)), and the agent has gid as a
// supplementary group. A new directory is made aside, in dir's parent, and
// renamed into place once complete, so the backend never sees it
// half-made. An existing one of this user gets its group and mode; one
// of another user is left as it is (an earlier release's init container
// gave it to the backend's user, and EnsureSocketDir accepts that).
// Errors: dir is not a directory, or a step fails (naming gid when the
// chown does: not a group of this process).
func PrepareSocketDir(dir string, gid int) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
		if err != nil {
			return fmt.Errorf("failed to create the socket directory %s: %w", dir, err)
		}
		err = setSocketDir(tmp, gid)
		if err == nil {
			err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE)
		}
		if err == nil {
			return nil
		}
		_ = os.Remove(tmp)
		if !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("failed to create the socket directory %s: %w", dir, err)
		}
		// Made meanwhile (kubelet, an earlier agent): fixed up below.
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("failed to stat the socket directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("the socket directory %s is not a directory (mode %s)", dir, st.Mode())
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("failed to read the owner of " + dir)
	}
	if int(sys.Uid) != os.Geteuid() {
		return nil // the backend's own (OwnSocketDirMode), from an earlier release
	}
	if int(sys.Gid) == gid && st.Mode().Perm() == SocketDirMode {
		return nil
	}
	return setSocketDir(dir, gid)
}

// setSocketDir gives dir, which this process's user owns, group gid and
// SocketDirMode.
func setSocketDir(dir string, gid int) error {
	if err := os.Chown(dir, -1, gid); err != nil {
		return fmt.Errorf("failed to give the socket directory %s to group %d (the agent needs it as a supplementary group): %w", dir, gid, err)
	}
	if err := os.Chmod(dir, SocketDirMode); err != nil {
		return fmt.Errorf("failed to set mode %v on the socket directory %s: %w", SocketDirMode, dir, err)
	}
	return nil
}

// EnsureSocketDir checks, for the backend, that dir is a directory this
// process may create its sockets in and nobody else but the agent may
// enter: root's, in this process's group, with SocketDirMode (the agent's
// PrepareSocketDir), or this process's own, which gets OwnSocketDirMode.
// Errors name the directory, what it is and the agent that makes it.
func EnsureSocketDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("failed to stat the socket directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("the socket directory %s is not a directory (mode %s)", dir, st.Mode())
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("failed to read the owner of " + dir)
	}
	switch {
	case int(sys.Uid) == os.Geteuid():
		if st.Mode().Perm() != OwnSocketDirMode {
			if err := os.Chmod(dir, OwnSocketDirMode); err != nil {
				return fmt.Errorf("failed to set mode %v on the socket directory %s: %w", OwnSocketDirMode, dir, err)
			}
		}
		return nil
	case sys.Uid == 0 && int(sys.Gid) == os.Getegid() && st.Mode().Perm() == SocketDirMode:
		return nil
	}
	return fmt.Errorf("the socket directory %s is %d:%d with mode %v: it must be root's, in this process's group %d, with mode %v (the node agent fastpath-agent makes it so)",
		dir, sys.Uid, sys.Gid, st.Mode().Perm(), os.Getegid(), SocketDirMode)
}
