package soak

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// process is a program the soak starts, SIGKILLs and starts again; its
// output is appended to logPath.
type process struct {
	path    string
	args    []string
	env     []string
	logPath string
	// cred, when set, runs the program as that user (the vsock backend
	// refuses to run as root).
	cred   *syscall.Credential
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited and been reaped
}

// start starts the program (again).
func (p *process) start() error {
	logFile, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open log %s: %w", p.logPath, err)
	}
	defer logFile.Close()
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that a SIGINT to the soak does not reach it
	// before the soak's own cleanup does; killed with the soak.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	// Pdeathsig fires when the THREAD that forked the program exits, not the
	// soak: the fork happens on a thread locked for the program's lifetime.
	// Otherwise a goroutine that locks a thread and ends without unlocking
	// it (testutils.NewNS, ns.Do after a failed switch back) may end the
	// very thread that forked the agent, which the kernel then kills.
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("failed to start %s: %w", p.path, err)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether the program started last is still running.
func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill SIGKILLs the program and waits until it is reaped; a no-op when it
// was never started.
func (p *process) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}
