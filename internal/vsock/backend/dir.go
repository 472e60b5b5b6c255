package backend

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// SocketDirMode is the mode of the backend's socket directory: its user
// (the backend's) creates the sockets, its group (the agent's
// supplementary group) may reach them, nobody else may.
const SocketDirMode os.FileMode = 0o750

// SocketUmask is the backend's umask: the sockets vhost-device-vsock binds
// get mode 0666, because QEMU (KubeVirt's user 107, in no group of ours)
// connects to a VM's vhost-user socket through the hard link the agent's
// device plugin puts into its launcher's directory; the directory's mode
// (SocketDirMode), not the socket's, keeps everyone else out.
const SocketUmask = 0o111

// PrepareSocketDir makes dir exist and belong to uid:gid with
// SocketDirMode, changing only what differs: run once as root with only
// CAP_CHOWN (the backend DaemonSet's init container) before the backend
// runs as uid:gid. A directory root owns gets its mode before it is given
// away (root then needs no CAP_FOWNER); one the backend already owns keeps
// its mode, which the backend itself sets (EnsureSocketDir). Errors: dir
// is not a directory, or the chmod or chown fails.
func PrepareSocketDir(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, SocketDirMode); err != nil {
		return fmt.Errorf("failed to create the socket directory %s: %w", dir, err)
	}
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
	if int(sys.Uid) == uid && int(sys.Gid) == gid {
		return nil
	}
	if int(sys.Uid) == os.Geteuid() {
		if err := os.Chmod(dir, SocketDirMode); err != nil {
			return fmt.Errorf("failed to set mode %v on the socket directory %s: %w", SocketDirMode, dir, err)
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("failed to give the socket directory %s to %d:%d (needs CAP_CHOWN): %w", dir, uid, gid, err)
	}
	return nil
}

// EnsureSocketDir checks that dir is a directory this process owns and
// gives it SocketDirMode. Errors name the directory and, when another user
// owns it, the init container that should have given it to this one.
func EnsureSocketDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("failed to stat the socket directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("the socket directory %s is not a directory (mode %s)", dir, st.Mode())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("the socket directory %s belongs to user %d, not to this process's %d (fastpath-vsock-backend --prepare-socket-dir gives it)", dir, sys.Uid, os.Geteuid())
	}
	if st.Mode().Perm() != SocketDirMode {
		if err := os.Chmod(dir, SocketDirMode); err != nil {
			return fmt.Errorf("failed to set mode %v on the socket directory %s: %w", SocketDirMode, dir, err)
		}
	}
	return nil
}
