package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// NodeInitSpec is what a node's init process (NodeInit) sets up in the
// namespaces it was started in: its host name, the per-node directories
// bound over the paths a node owns, and fresh /run, /proc and /sys.
type NodeInitSpec struct {
	// Name is the node's name, set as its host name (UTS namespace).
	Name string
	// Binds are "source:target" pairs: each source directory (under the
	// node's directory) is bind-mounted over target (which must exist) in the
	// node's mount namespace only.
	Binds []string
}

// NodeInitArg is the hidden subcommand of fastpath-dev that runs NodeInit.
const NodeInitArg = "node-init"

// NodeInit is PID 1 of a node: started in new mount, network, UTS and PID
// namespaces (startNodeInit), it makes every mount private (nothing it
// mounts reaches the host, nothing of the host's later mounts reaches it),
// binds spec.Binds, mounts a tmpfs on /run (containerd's state, the shims'
// sockets, /var/run/kubevirt and the pods' network namespaces are the
// node's own), a proc of its PID namespace on /proc and a sysfs of its
// network namespace on /sys (the host's cgroup hierarchies moved under it),
// makes / and the binds shared mounts (KubeVirt's Bidirectional hostPaths;
// new peer groups, not the host's), sets the host name, enables IPv4
// forwarding and brings lo up; then it writes "ready" to stdout and reaps
// orphans until SIGTERM, when it exits and the kernel kills every process
// of the node's PID namespace. An error is written to stdout and returned.
func NodeInit(spec NodeInitSpec) error {
	if err := nodeInitSetup(spec); err != nil {
		fmt.Fprintf(os.Stdout, "error: %v\n", err)
		return err
	}
	fmt.Fprintln(os.Stdout, "ready")
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT)
	child := make(chan os.Signal, 8)
	signal.Notify(child, unix.SIGCHLD)
	for {
		select {
		case <-term:
			return nil
		case <-child:
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

func nodeInitSetup(spec NodeInitSpec) error {
	if os.Getpid() != 1 {
		return errors.New("node-init must be PID 1 of a new PID namespace")
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("failed to make every mount private: %w", err)
	}
	var targets []string
	for _, b := range spec.Binds {
		src, dst, ok := strings.Cut(b, ":")
		if !ok || !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
			return fmt.Errorf("bind %q: want absolute source:target", b)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("failed to bind-mount %s on %s: %w", src, dst, err)
		}
		targets = append(targets, dst)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=1g"); err != nil {
		return fmt.Errorf("failed to mount a tmpfs on /run: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("failed to mount /proc: %w", err)
	}
	// A sysfs shows the network devices of the namespace that mounts it:
	// the host's cgroup hierarchies are moved aside, sysfs mounted, and
	// the hierarchies moved back under it.
	aside := "/run/.cgroup"
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("/sys/fs/cgroup", aside, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("failed to bind the cgroup hierarchies aside: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("failed to mount /sys: %w", err)
	}
	if err := unix.Mount(aside, "/sys/fs/cgroup", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("failed to move the cgroup hierarchies under /sys: %w", err)
	}
	_ = os.Remove(aside)
	// Shared, in peer groups of this namespace: containerd refuses a
	// Bidirectional hostPath whose mount is private (see kubevirtMounts).
	for _, mp := range append([]string{"/", "/run"}, targets...) {
		if err := unix.Mount("", mp, "", unix.MS_SHARED, ""); err != nil {
			return fmt.Errorf("failed to make %s a shared mount: %w", mp, err)
		}
	}
	if err := unix.Sethostname([]byte(spec.Name)); err != nil {
		return fmt.Errorf("failed to set the host name %s: %w", spec.Name, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("failed to enable IPv4 forwarding: %w", err)
	}
	lo, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(lo)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(lo, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("failed to read lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(lo, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("failed to bring lo up: %w", err)
	}
	return nil
}
