package guests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Libvirtd is one libvirtd (with its virtlogd) serving one launcher network
// namespace, as the virtqemud inside a real virt-launcher pod does: it runs
// under `ip netns exec <launcher>` in a private mount namespace whose
// /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/cache/libvirt and
// /var/log/libvirt are directories under Dir, so several daemons never share
// a socket, a pid file or a domain. QEMU, started by it, opens the taps of
// the launcher namespace.
type Libvirtd struct {
	// NetNS is the launcher network namespace name.
	NetNS string
	// Dir holds etc/, run/, lib/, cache/, log/ and daemon.log.
	Dir string

	cmd  *exec.Cmd
	done chan error
}

// libvirtDirs are the paths bind-mounted from Dir (same order as their subdirectories).
var libvirtDirs = [][2]string{
	{"etc", "/etc/libvirt"},
	{"run", "/run/libvirt"},
	{"lib", "/var/lib/libvirt"},
	{"cache", "/var/cache/libvirt"},
	{"log", "/var/log/libvirt"},
}

// libvirtdConf lets root clients of the private socket in without polkit.
const libvirtdConf = `# Fastpath local environment: one libvirtd per emulated virt-launcher.
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
`

// qemuConf runs QEMU as root without cgroups, namespaces or a security
// driver: the local environment has no systemd and no SELinux/AppArmor, and
// the launcher's network namespace is the isolation that matters here.
const qemuConf = `# Fastpath local environment.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = [ ]
cgroup_controllers = [ ]
`

// StartLibvirtd starts libvirtd and virtlogd for the launcher namespace
// netns with state under dir and waits (up to 30 s) until its socket
// answers. The daemons run in their own process group; Stop ends them.
func StartLibvirtd(ctx context.Context, netns, dir string) (*Libvirtd, error) {
	for _, bin := range []string{"libvirtd", "virtlogd", "virsh", "ip", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("failed to start libvirtd for %s: %s is missing (run hack/setup.sh): %w", netns, bin, err)
		}
	}
	d := &Libvirtd{NetNS: netns, Dir: dir}
	for _, p := range libvirtDirs {
		if err := os.MkdirAll(filepath.Join(dir, p[0]), 0o700); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", filepath.Join(dir, p[0]), err)
		}
	}
	for name, body := range map[string]string{"libvirtd.conf": libvirtdConf, "qemu.conf": qemuConf, "virtlogd.conf": ""} {
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(body), 0o600); err != nil {
			return nil, fmt.Errorf("failed to write %s: %w", name, err)
		}
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, p := range libvirtDirs {
		fmt.Fprintf(&script, "mkdir -p %s && mount --bind %s %s\n", p[1], shellQuote(filepath.Join(dir, p[0])), p[1])
	}
	// No -d: both stay in this process group, so Stop reaches them.
	fmt.Fprintf(&script, "virtlogd --pid-file %s &\n", shellQuote(filepath.Join(dir, "virtlogd.pid")))
	fmt.Fprintf(&script, "exec libvirtd --pid-file %s\n", shellQuote(filepath.Join(dir, "libvirtd.pid")))
	logf, err := os.OpenFile(filepath.Join(dir, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open the libvirtd log: %w", err)
	}
	defer logf.Close()
	d.cmd = exec.Command("ip", "netns", "exec", netns, "unshare", "--mount", "--propagation", "private", "sh", "-c", script.String())
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start libvirtd in %s: %w", netns, err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := d.Virsh(ctx, "version"); err == nil {
			return d, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			_ = d.Stop()
			return nil, fmt.Errorf("failed to reach libvirtd in %s within 30s: %w (see %s)", netns, errors.Join(ctx.Err(), err), filepath.Join(dir, "daemon.log"))
		}
		select {
		case err := <-d.done:
			d.done <- err
			_ = d.Stop()
			return nil, fmt.Errorf("libvirtd in %s exited: %v: %s", netns, err, tail(filepath.Join(dir, "daemon.log"), 800))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URI is the libvirt connection URI of this daemon's private socket.
func (d *Libvirtd) URI() string {
	return "qemu:///system?socket=" + filepath.Join(d.Dir, "run", "libvirt-sock")
}

// Virsh runs virsh against this daemon and returns its stdout; the error
// carries stderr.
func (d *Libvirtd) Virsh(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", d.URI()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Stop destroys every domain of the daemon (QEMU ends), then kills
// libvirtd and virtlogd (their state directory goes with the guest, so no
// graceful shutdown is needed) and any QEMU a pid file still names. It is
// safe to call more than once.
func (d *Libvirtd) Stop() error {
	if d == nil || d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := d.Virsh(ctx, "list", "--name"); err == nil {
		for _, name := range strings.Fields(out) {
			if _, err := d.Virsh(ctx, "destroy", name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		errs = append(errs, fmt.Errorf("libvirtd in %s did not exit after SIGKILL", d.NetNS))
	}
	// QEMU daemonizes into its own session: kill what a pid file still names.
	pids, _ := filepath.Glob(filepath.Join(d.Dir, "run", "qemu", "*.pid"))
	for _, f := range pids {
		if err := killPidFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	d.cmd.Process = nil
	return errors.Join(errs...)
}

// killPidFile kills the process a pid file names when it still runs, and
// waits up to 5 s for it to go.
func killPidFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return nil
	}
	if syscall.Kill(pid, 0) != nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 50 {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("failed to kill process %d (%s)", pid, path)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
