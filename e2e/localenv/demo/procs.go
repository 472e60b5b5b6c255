package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// process is a child process (operator, agent) with its log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// startProcess starts argv with stdout and stderr appended to logPath. The
// child gets its own process group (a Ctrl-C in the terminal reaches only
// us, and we stop children in order) and SIGTERM when we die.
func startProcess(name string, argv []string, env []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open log %s: %w", logPath, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("failed to start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	p := &process{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs.
func (p *process) stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	if done, _ := p.exited(); done {
		return nil
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("failed to stop %s (pid %d): still running after SIGKILL", p.name, pgid)
	}
}

// runState is what a run records so that a later run can clean up after it
// when it was killed before its own cleanup (SIGKILL, power loss).
type runState struct {
	// Processes are the children started, with the executable each must be.
	Processes []runstate.Process `json:"processes"`
	// Bridges are the node bridges the run's attachments make the agent create.
	Bridges []stateBridge `json:"bridges"`
	// Dirs are temporary directories of the processes (envtest's certificate
	// and etcd data directories), removed after the processes are killed.
	Dirs []string `json:"dirs,omitempty"`
}

type stateBridge struct {
	Name     string `json:"name"`
	Datapath string `json:"datapath"`
}

// isExe reports whether pid runs an executable whose base name is base.
func isExe(pid int, base string) bool {
	exe, _, ok := runstate.Identity(pid)
	return ok && filepath.Base(exe) == base
}

// killRecorded SIGKILLs the recorded processes that are still alive (the
// recorded executable and start time: a recycled PID running something else
// is left alone) and returns the ones it killed.
func killRecorded(ps []runstate.Process) []runstate.Process {
	var killed []runstate.Process
	for _, p := range ps {
		if p.Kill() {
			killed = append(killed, p)
		}
	}
	return killed
}

// listenerPIDs returns the PIDs of processes with a TCP listening socket on
// port (from /proc/net/tcp{,6} and the processes' socket inodes): how the
// run finds the kube-apiserver and etcd that envtest started.
func listenerPIDs(port int) []int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				inodes[fields[9]] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, pe := range procs {
		pid, err := strconv.Atoi(pe.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", pe.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join("/proc", pe.Name(), "fd", fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// siblingBackendPIDs returns the PIDs of the vhost-device-vsock processes
// serving a vhost-user socket in dir (an argument containing
// "socket=<dir>/"): the node agent's supervisor starts them in process
// groups of their own, so an agent killed with SIGKILL leaves them running.
func siblingBackendPIDs(dir string) []int {
	if dir == "" {
		return nil
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 1 || !isExe(pid, "vhost-device-vsock") {
			continue
		}
		for _, arg := range cmdlineOf(pid) {
			if strings.Contains(arg, "socket="+dir+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
