package guests

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// VsockBackend is one vhost-device-vsock process (rust-vmm, v0.3.0, built
// into bin/ by hack/setup.sh) serving the vhost-user-vsock device of one
// guest. Its host side is hybrid vsock over UNIX sockets: the host dials
// UDSPath and writes "CONNECT <port>\n" (answered "OK <port>\n") to reach a
// guest listener; a guest dialling CID 2 port P reaches a host listener at
// "<UDSPath>_<P>". One process per guest keeps guests apart: only the relay
// joins them. It is never given --forward-cid or --forward-listen, which
// would open AF_VSOCK on this host.
type VsockBackend struct {
	// CID is the guest's context ID.
	CID uint32
	// Socket is the vhost-user socket QEMU connects to.
	Socket string
	// UDSPath is the hybrid-vsock socket of the host side.
	UDSPath string

	cmd  *exec.Cmd
	done chan struct{}
}

// VsockBackendArgs returns the command line of vhost-device-vsock for one
// guest: --guest-cid, --socket and --uds-path, nothing else.
func VsockBackendArgs(cid uint32, socket, udsPath string) []string {
	return []string{"--guest-cid", strconv.FormatUint(uint64(cid), 10), "--socket", socket, "--uds-path", udsPath}
}

// StartVsockBackend starts bin (vhost-device-vsock) for one guest, logging
// to logPath, and waits up to 10 s for its vhost-user socket. It runs in the
// launcher network namespace netns ("" for the caller's) like the rest of
// the guest, so a cleanup of a killed run that kills the launcher's
// processes ends it too. Errors: a CID below 3, a missing binary, a process
// that exits or never listens.
func StartVsockBackend(bin, netns string, cid uint32, socket, udsPath, logPath string) (*VsockBackend, error) {
	if cid < 3 || cid == 0xFFFFFFFF {
		return nil, fmt.Errorf("failed to start vhost-device-vsock: guest CID %d must be 3-4294967294", cid)
	}
	for _, p := range []string{socket, udsPath} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("failed to remove stale socket %s: %w", p, err)
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open %s: %w", logPath, err)
	}
	defer logf.Close()
	b := &VsockBackend{CID: cid, Socket: socket, UDSPath: udsPath, done: make(chan struct{})}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("failed to find %s (run hack/setup.sh): %w", bin, err)
	}
	if netns != "" {
		// ip execs the backend after setns: the PID stays the backend's.
		b.cmd = exec.Command("ip", append([]string{"netns", "exec", netns, bin}, VsockBackendArgs(cid, socket, udsPath)...)...)
	} else {
		b.cmd = exec.Command(bin, VsockBackendArgs(cid, socket, udsPath)...)
	}
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s (run hack/setup.sh): %w", bin, err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(socket); err == nil {
			return b, nil
		}
		select {
		case <-b.done:
			return nil, fmt.Errorf("vhost-device-vsock for CID %d exited: %s", cid, tail(logPath, 600))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = b.Stop()
			return nil, fmt.Errorf("vhost-device-vsock for CID %d did not create %s within 10s", cid, socket)
		}
	}
}

// Stop kills the backend, waits for it and removes its sockets.
func (b *VsockBackend) Stop() error {
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("vhost-device-vsock for CID %d did not exit", b.CID)
	}
	_ = os.Remove(b.Socket)
	_ = os.Remove(b.UDSPath)
	return nil
}
