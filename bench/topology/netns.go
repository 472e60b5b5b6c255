package topology

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetNSDir is where named network namespaces are bind-mounted, the directory
// `ip netns` uses (iproute2 NETNS_RUN_DIR).
const NetNSDir = "/run/netns"

// NetNS is a named network namespace, bind-mounted at Path so that it
// outlives the thread that created it and `ip netns exec <Name>` reaches it.
type NetNS struct {
	// Name is the file name under NetNSDir.
	Name string
	// Path is NetNSDir/Name, the value a CNI runtime passes as CNI_NETNS.
	Path string
}

// NewNetNS creates the network namespace name (at most 255 bytes, no '/')
// with its loopback up. It fails when a namespace of that name exists; use
// DeleteNetNS first to replace a leftover. Needs CAP_SYS_ADMIN.
func NewNetNS(name string) (*NetNS, error) {
	if name == "" || strings.ContainsRune(name, '/') || len(name) > 255 {
		return nil, fmt.Errorf("failed to create network namespace %q: the name must be 1-255 bytes without '/'", name)
	}
	if err := os.MkdirAll(NetNSDir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", NetNSDir, err)
	}
	path := filepath.Join(NetNSDir, name)
	if err := createNamed(name); err != nil {
		return nil, fmt.Errorf("failed to create network namespace %s: %w", name, err)
	}
	n := &NetNS{Name: name, Path: path}
	if err := n.withHandle(func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		return h.LinkSetUp(lo)
	}); err != nil {
		_ = DeleteNetNS(name)
		return nil, fmt.Errorf("failed to bring up lo in network namespace %s: %w", name, err)
	}
	return n, nil
}

// createNamed creates the named namespace with vishvananda/netns.NewNamed
// (unshare, then bind-mount at NetNSDir/<name>; it fails when the file
// exists) on a locked OS thread, and switches the thread back. A thread that
// cannot be switched back stays locked, so the Go runtime retires it with the
// goroutine instead of reusing it in the wrong namespace.
//
// containernetworking/plugins' testutils.NewNS does not fit: it picks a
// random "cnitest-…" name (the benchmark and the emulation name namespaces
// after their run ID, find leftovers by that prefix and print
// `ip netns exec <name>` lines), uses XDG_RUNTIME_DIR/netns for some users,
// and lives in a test helper package; its ns package opens namespaces but
// does not create them.
func createNamed(name string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		origin, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("failed to open the current network namespace: %w", err)
			return
		}
		defer origin.Close()
		created, newErr := netns.NewNamed(name)
		if newErr == nil {
			created.Close()
		}
		// NewNamed may have unshared before it failed: always switch back.
		if err := netns.Set(origin); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(newErr, fmt.Errorf("failed to switch back to the original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- newErr
	}()
	if err := <-errc; err != nil {
		if !errors.Is(err, os.ErrExist) {
			// NewNamed leaves its mount point behind when the bind mount fails.
			_ = os.Remove(filepath.Join(NetNSDir, name))
		}
		return err
	}
	return nil
}

// DeleteNetNS unmounts and removes the namespace name. A namespace that does
// not exist is success. The kernel destroys the namespace, and the links
// inside it, once no process and no open handle uses it any more; veth peers
// in other namespaces disappear asynchronously then.
func DeleteNetNS(name string) error {
	path := filepath.Join(NetNSDir, name)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("failed to unmount network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove network namespace %s: %w", path, err)
	}
	return nil
}

// KillProcessesIn SIGKILLs every process, except this one, whose network
// namespace is the one bind-mounted at nsPath (its /proc/<pid>/ns/net has
// the same device and inode), and returns how many it signalled. A namespace
// that is gone has no processes. Errors read "failed to stat network
// namespace <path>: …", "failed to list /proc: …" or "failed to kill
// process <pid> in network namespace <path>: …" (a process that exits first
// is not an error).
func KillProcessesIn(nsPath string) (int, error) {
	var want unix.Stat_t
	if err := unix.Stat(nsPath, &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, nil
		}
		return 0, fmt.Errorf("failed to stat network namespace %s: %w", nsPath, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("failed to list /proc: %w", err)
	}
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st); err != nil {
			continue
		}
		if st.Dev != want.Dev || st.Ino != want.Ino {
			continue
		}
		switch err := unix.Kill(pid, unix.SIGKILL); {
		case err == nil:
			killed++
		case !errors.Is(err, unix.ESRCH):
			return killed, fmt.Errorf("failed to kill process %d in network namespace %s: %w", pid, nsPath, err)
		}
	}
	return killed, nil
}

// Delete removes the namespace (see DeleteNetNS).
func (n *NetNS) Delete() error { return DeleteNetNS(n.Name) }

// ListNetNS returns the names of the namespaces under NetNSDir that start
// with prefix, sorted (for cleaning up leftovers of an earlier run).
func ListNetNS(prefix string) ([]string, error) {
	entries, err := os.ReadDir(NetNSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", NetNSDir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Do runs fn on an OS thread switched into the namespace (containernetworking's
// ns.Do). Processes started from fn inherit the namespace.
func (n *NetNS) Do(fn func() error) error {
	h, err := ns.GetNS(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", n.Path, err)
	}
	defer h.Close()
	return h.Do(func(ns.NetNS) error { return fn() })
}

// withHandle runs fn with a netlink handle bound to the namespace.
func (n *NetNS) withHandle(fn func(h *netlink.Handle) error) error {
	nsh, err := netns.GetFromPath(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", n.Path, err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("failed to open netlink in network namespace %s: %w", n.Path, err)
	}
	defer h.Close()
	return fn(h)
}

// Link returns the link ifName inside the namespace.
func (n *NetNS) Link(ifName string) (netlink.Link, error) {
	var link netlink.Link
	err := n.withHandle(func(h *netlink.Handle) error {
		var err error
		link, err = h.LinkByName(ifName)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to find link %s in network namespace %s: %w", ifName, n.Name, err)
	}
	return link, nil
}

// Addrs returns the IPv4 and IPv6 addresses of ifName inside the namespace.
func (n *NetNS) Addrs(ifName string) ([]netlink.Addr, error) {
	var addrs []netlink.Addr
	err := n.withHandle(func(h *netlink.Handle) error {
		link, err := h.LinkByName(ifName)
		if err != nil {
			return err
		}
		addrs, err = h.AddrList(link, netlink.FAMILY_ALL)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list addresses of %s in network namespace %s: %w", ifName, n.Name, err)
	}
	return addrs, nil
}

// Exec runs argv inside the namespace and returns its combined output. The
// error names the command and includes the output.
func (n *NetNS) Exec(argv ...string) ([]byte, error) { return n.ExecInput(nil, argv...) }

// ExecInput is Exec with stdin (nil for none).
func (n *NetNS) ExecInput(stdin []byte, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("failed to run a command in network namespace %s: empty argv", n.Name)
	}
	var out []byte
	err := n.Do(func() error {
		var err error
		cmd := exec.Command(argv[0], argv[1:]...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		return out, fmt.Errorf("failed to run %q in network namespace %s: %w: %s", strings.Join(argv, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return out, nil
}
