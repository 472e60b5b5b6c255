package backend

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// VM is one slot of a group: one vhost-user-vsock device.
type VM struct {
	// Name identifies the VM in status ("<vm>"); not passed to the backend.
	Name string `json:"name"`
	// CID is the guest's context ID in the group: 3-4294967294.
	CID uint32 `json:"cid"`
	// Socket is the vhost-user socket QEMU connects to (an absolute path
	// shorter than 108 bytes, the sun_path limit).
	Socket string `json:"socket"`
	// UDSPath is the hybrid-vsock socket of the VM's host side (same limits).
	UDSPath string `json:"udsPath"`
}

// Group is the VMs one process serves; they can all reach each other.
type Group struct {
	// Key identifies the group (the attachment's "<namespace>/<name>").
	Key string `json:"key"`
	// VMs in any order; CIDs and sockets unique in the group.
	VMs []VM `json:"vms"`
}

// Name is the vhost-device-vsock group name of g: Key with "/" replaced by
// "." (namespaces cannot contain "."; neither part can contain "," "=" or
// "+", the separators of --vm).
func (g Group) Name() string { return strings.ReplaceAll(g.Key, "/", ".") }

// Validate reports the first field of g that vhost-device-vsock would reject
// or that would make two slots collide, naming it.
func (g Group) Validate() error {
	if g.Key == "" || strings.ContainsAny(g.Key, ",=+ ") {
		return fmt.Errorf("group key %q must be non-empty without ',', '=', '+' or spaces", g.Key)
	}
	if len(g.VMs) == 0 {
		return fmt.Errorf("group %s: vms must not be empty", g.Key)
	}
	cids, paths := map[uint32]bool{}, map[string]bool{}
	for i, vm := range g.VMs {
		if vm.CID < 3 || vm.CID == 0xFFFFFFFF {
			return fmt.Errorf("group %s: vms[%d].cid %d must be 3-4294967294", g.Key, i, vm.CID)
		}
		if cids[vm.CID] {
			return fmt.Errorf("group %s: vms[%d].cid %d is used twice", g.Key, i, vm.CID)
		}
		cids[vm.CID] = true
		for field, p := range map[string]string{"socket": vm.Socket, "udsPath": vm.UDSPath} {
			if !filepath.IsAbs(p) || len(p) >= 108 || strings.ContainsAny(p, ",=+ ") {
				return fmt.Errorf("group %s: vms[%d].%s %q must be an absolute path under 108 bytes without ',', '=', '+' or spaces", g.Key, i, field, p)
			}
			if paths[p] {
				return fmt.Errorf("group %s: vms[%d].%s %q is used twice", g.Key, i, field, p)
			}
			paths[p] = true
		}
	}
	return nil
}

// Args returns the vhost-device-vsock command line of g: one
// "--vm guest-cid=<cid>,socket=<socket>,uds-path=<uds>,groups=<name>" per VM,
// in CID order, and nothing else (never --forward-cid or --forward-listen).
func Args(g Group) []string {
	vms := slices.Clone(g.VMs)
	slices.SortFunc(vms, func(a, b VM) int { return int(a.CID) - int(b.CID) })
	args := make([]string, 0, 2*len(vms))
	for _, vm := range vms {
		args = append(args, "--vm", fmt.Sprintf("guest-cid=%d,socket=%s,uds-path=%s,groups=%s", vm.CID, vm.Socket, vm.UDSPath, g.Name()))
	}
	return args
}

// Version runs "<binary> --version" and returns the version it prints
// ("vhost-device-vsock 0.3.0" gives "0.3.0"). Errors: the binary does not
// run within 5 s or prints something else.
func Version(ctx context.Context, binary string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("failed to run %s --version: %w", binary, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != "vhost-device-vsock" {
		return "", fmt.Errorf("failed to parse the version of %s: %q", binary, strings.TrimSpace(string(out)))
	}
	return f[1], nil
}

// connectedSockets returns how many of paths have a connected peer: a UNIX
// socket bound to a path that is listed more than once in /proc/net/unix
// (Linux lists accepted sockets under their listener's path), i.e. a QEMU
// holds the vhost-user connection.
func connectedSockets(procNetUnix string, paths []string) (int, error) {
	f, err := os.Open(procNetUnix)
	if err != nil {
		return 0, fmt.Errorf("failed to open %s: %w", procNetUnix, err)
	}
	defer f.Close()
	want := map[string]int{}
	for _, p := range paths {
		want[p] = 0
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		if n, ok := want[fields[7]]; ok {
			want[fields[7]] = n + 1
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", procNetUnix, err)
	}
	connected := 0
	for _, n := range want {
		if n > 1 {
			connected++
		}
	}
	return connected, nil
}

// acceptedSockets returns how many vhost-user sockets of g are missing
// while its process runs, i.e. have a QEMU connected: vhost-device-vsock
// 0.3.0 serves each socket with vhost-user-backend 0.20's
// VhostUserDaemon::serve, whose Listener (vhost 0.14) is dropped once it
// accepts a connection, and dropping it unlinks the path; main.rs
// start_backend_server binds it again after that QEMU disconnects. This
// works in any network namespace, unlike /proc/net/unix (connectedSockets),
// where the accepted socket is listed only in the connecting QEMU's
// namespace (the launcher pod's) and the listener is gone. A socket being
// bound again after a disconnect counts for a moment too: the restart then
// waits for the next Sync.
func acceptedSockets(g Group) int {
	n := 0
	for _, vm := range g.VMs {
		if _, err := os.Lstat(vm.Socket); errors.Is(err, os.ErrNotExist) {
			n++
		}
	}
	return n
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// StopGrace is how long a vhost-device-vsock has after SIGTERM before its
// process group is killed. On SIGTERM our build (patch 0004,
// docs/vsock-sibling.md) sends each guest an RST for each of its
// established connections and exits, within 1 s (its RESET_TIMEOUT);
// QEMU does not reconnect a vhost-user vsock device, so without that the
// guests' connections would hang until the VM restarts instead of ending
// (a Linux guest's read returns end-of-file, its write fails with EPIPE).
// 2 s leaves it that second and as much again for a busy node.
const StopGrace = 2 * time.Second

// killWait is how long a killed process group has to be reaped.
const killWait = 5 * time.Second

// StopTimeout bounds how long stopping one vhost-device-vsock takes
// (stopProcess), and so Supervisor.Stop, which stops every group's at once.
const StopTimeout = StopGrace + killWait

// stopProcess stops the process group of cmd: SIGTERM, then SIGKILL once
// StopGrace has passed without it exiting, and waits for it to exit, up to
// killWait after the SIGKILL. exited is closed once cmd has been waited for.
func stopProcess(cmd *exec.Cmd, exited chan struct{}) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(StopGrace):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
		return fmt.Errorf("vhost-device-vsock pid %d did not exit within %v of SIGTERM: killed", cmd.Process.Pid, StopGrace)
	case <-time.After(killWait):
		return fmt.Errorf("vhost-device-vsock pid %d did not exit within %v of SIGKILL", cmd.Process.Pid, killWait)
	}
}
