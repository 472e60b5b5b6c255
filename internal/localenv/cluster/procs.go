package cluster

import (
	"encoding/json"
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

// runState is what Up records for Down (and for a later Up to refuse or
// report a running cluster): the daemons it started and the kernel settings
// it found before the kubelet changed them.
type runState struct {
	// Processes in start order; Down stops them in reverse.
	Processes []procRecord `json:"processes"`
	// Sysctls are the values of the kernel settings (path under /proc/sys)
	// before the kubelet set its own; Down restores them.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// NodeName is the node's name (Down reads its FastPathNode).
	NodeName string `json:"nodeName"`
	// NFTables are the nftables tables ("family name") that existed before
	// the kubelet started: Down deletes only the iptables tables it made.
	NFTables []string `json:"nftTables"`
	// IPAMBefore are the host-local directories (/var/lib/cni/networks/*)
	// that existed before the cluster: Down may remove the idle ones made
	// since for fastpath networks (fp-*), whose NADs may be gone by then.
	IPAMBefore []string `json:"ipamBefore"`
	// DevicePluginDirs are the directories of DevicePluginDir (itself and
	// its parents up to /var/lib) that did not exist before the kubelet
	// started, deepest first: Down removes them.
	DevicePluginDirs []string `json:"devicePluginDirs,omitempty"`
}

// procRecord identifies a daemon: a PID is only trusted while the process
// still runs the recorded executable and started at the recorded time
// (a recycled PID is left alone).
type procRecord struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Exe   string `json:"exe"`
	Start uint64 `json:"start"` // clock ticks since boot, /proc/<pid>/stat field 22
}

func readState(path string) (runState, error) {
	var s runState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("failed to read the cluster state %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("failed to parse the cluster state %s: %w", path, err)
	}
	return s, nil
}

func writeState(path string, s runState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the cluster state: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("failed to write the cluster state %s: %w", path, err)
	}
	return nil
}

// daemon is a process started by Up that outlives it.
type daemon struct {
	rec  procRecord
	done chan struct{}
	err  error
	log  string
}

// startDaemon starts argv in a session of its own (it outlives `make
// cluster` and no terminal signal reaches it) with stdout and stderr in
// <logs>/<name>.log (truncated) and env added to ours.
func startDaemon(name string, argv, env []string, logs string) (*daemon, error) {
	logPath := filepath.Join(logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the log %s: %w", logPath, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("failed to start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	d := &daemon{done: make(chan struct{}), log: logPath}
	d.rec = procRecord{Name: name, PID: cmd.Process.Pid, Exe: argv[0]}
	if exe, start, ok := procIdentity(cmd.Process.Pid); ok {
		d.rec.Exe, d.rec.Start = exe, start
	}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

// exited returns a non-nil error naming the log when the daemon has ended.
func (d *daemon) exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("%s exited (%v): see %s", d.rec.Name, d.err, d.log)
	default:
		return nil
	}
}

// procIdentity returns the executable and start time of pid.
func procIdentity(pid int) (string, uint64, bool) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "", 0, false
	}
	start, state, ok := procStat(pid)
	if !ok || state == "Z" {
		return "", 0, false
	}
	return strings.TrimSuffix(exe, " (deleted)"), start, true
}

// procStat returns the start time (field 22) and state (field 3) of pid.
func procStat(pid int) (uint64, string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return 0, "", false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return start, f[0], true
}

// alive reports whether the recorded process still runs (same executable,
// same start time, not a zombie).
func (r procRecord) alive() bool {
	exe, start, ok := procIdentity(r.PID)
	return ok && exe == r.Exe && start == r.Start
}

// stop sends SIGTERM, waits up to grace for the process to end, then SIGKILLs
// it and waits up to 10 s more.
func (r procRecord) stop(grace time.Duration) error {
	if !r.alive() {
		return nil
	}
	_ = syscall.Kill(r.PID, syscall.SIGTERM)
	if waitGone(r, grace) {
		return nil
	}
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	if waitGone(r, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("failed to stop %s (pid %d): still running after SIGKILL", r.Name, r.PID)
}

func waitGone(r procRecord, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !r.alive() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !r.alive()
}

// processesWithArg returns the PIDs of live processes whose executable is
// exe (base name) and whose command line holds arg: how Down finds the
// containerd shims of this cluster's containerd (their -address flag).
func processesWithArg(exeBase, arg string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _, ok := procIdentity(pid)
		if !ok || filepath.Base(exe) != exeBase {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
