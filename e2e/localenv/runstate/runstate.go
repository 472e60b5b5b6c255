// Package runstate is what the local environments (e2e/localenv/demo,
// e2e/localenv/cluster) record about a run so that a later command can
// stop it or clean up after it when it was killed before its own cleanup:
// a JSON state file and the identity of each process the run started.
//
// A PID alone is not an identity: it is recycled. A Process is trusted only
// while /proc/<pid> still runs the recorded executable and started at the
// recorded time (/proc/<pid>/stat field 22, clock ticks since boot), so a
// recycled PID is never signalled.
package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Load decodes the JSON state file at path into a T. A missing file is the
// zero T and no error; an unreadable or malformed one is an error naming
// path.
func Load[T any](path string) (T, error) {
	var s T
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("failed to read the run state %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("failed to parse the run state %s: %w", path, err)
	}
	return s, nil
}

// Save writes s as indented JSON to path (mode 0600, its directory created
// 0755), replacing the file whole: it is written to a temporary file beside
// path and renamed, so a kill leaves the old or the new state, never half.
func Save[T any](path string, s T) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the run state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("failed to write the run state %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("failed to write the run state %s: %w", path, err)
	}
	return nil
}

// Process identifies a process a run started.
type Process struct {
	// Name is what the run calls it (kube-apiserver, agent, ...).
	Name string `json:"name,omitempty"`
	PID  int    `json:"pid"`
	// Exe is /proc/<pid>/exe when it was recorded, without " (deleted)".
	Exe string `json:"exe"`
	// Start is /proc/<pid>/stat field 22 (clock ticks since boot); 0 in
	// records written before it was kept, which then match on Exe alone.
	Start uint64 `json:"start,omitempty"`
}

// Record returns the Process of the live pid under name; ok is false when
// pid is gone or a zombie.
func Record(name string, pid int) (p Process, ok bool) {
	exe, start, ok := Identity(pid)
	if !ok {
		return Process{}, false
	}
	return Process{Name: name, PID: pid, Exe: exe, Start: start}, true
}

// Identity returns the executable and start time (clock ticks since boot)
// of pid; ok is false when pid is gone or a zombie.
func Identity(pid int) (exe string, start uint64, ok bool) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return "", 0, false
	}
	start, state, ok := stat(pid)
	if !ok || state == "Z" {
		return "", 0, false
	}
	return strings.TrimSuffix(exe, " (deleted)"), start, true
}

// stat returns the start time (field 22) and state (field 3) of pid.
func stat(pid int) (uint64, string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
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

// Alive reports whether the recorded process still runs: the same
// executable and, when recorded, the same start time, and not a zombie.
// PIDs 0 and 1 and records without Exe are never alive.
func (p Process) Alive() bool {
	if p.PID <= 1 || p.Exe == "" {
		return false
	}
	exe, start, ok := Identity(p.PID)
	return ok && exe == p.Exe && (p.Start == 0 || start == p.Start)
}

// Kill SIGKILLs the process if it is Alive and reports whether it sent the
// signal.
func (p Process) Kill() bool {
	return p.Alive() && syscall.Kill(p.PID, syscall.SIGKILL) == nil
}

// Stop sends SIGTERM when the process is Alive, waits up to grace for it to
// end, then SIGKILLs it and waits up to 10 s more. It fails naming the
// process when it still runs after that.
func (p Process) Stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.waitGone(grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.waitGone(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("failed to stop %s (pid %d): still running after SIGKILL", p.Name, p.PID)
}

func (p Process) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !p.Alive()
}

// WithArg returns the PIDs of live processes whose executable's base name
// is exeBase and whose command line holds arg as one argument.
//
// A process in the middle of execve is not seen: the kernel points
// /proc/<pid>/exe at the new executable (and lets a vfork parent run)
// before it writes the new argv, and until then /proc/<pid>/cmdline reads
// empty. Callers that just started the process poll.
func WithArg(exeBase, arg string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _, ok := Identity(pid)
		if !ok || filepath.Base(exe) != exeBase {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
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
