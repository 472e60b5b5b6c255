package localbench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// autogroupPath is this process's scheduler autogroup (kernel
// Documentation/scheduler/sched-design-CFS.rst, "autogroup"): with
// kernel.sched_autogroup_enabled=1 CFS first shares the CPUs between
// sessions and applies a thread's niceness only within its session, so a
// benchmark niced against processes of other sessions (builds in other
// terminals) also needs the autogroup's own niceness.
const autogroupPath = "/proc/self/autogroup"

// SetNice runs this process and everything it starts from now on at
// niceness n (-20..19): it sets every thread's niceness (on Linux
// setpriority(PRIO_PROCESS, tid) changes one thread; a child inherits the
// niceness of the thread that forks it, a new thread that of its creator)
// and, where the kernel groups tasks by session (autogroup), the niceness of
// this session's group. restore puts the autogroup's niceness back (it
// outlives the process when the session is a shell's); thread niceness ends
// with the process. Lowering niceness needs CAP_SYS_NICE.
func SetNice(n int) (restore func() error, err error) {
	restore = func() error { return nil }
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return restore, fmt.Errorf("failed to list the threads of this process: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, unix.ESRCH) {
			return restore, fmt.Errorf("failed to set niceness %d of thread %d: %w", n, tid, err)
		}
	}
	old, ok, err := autogroupNice()
	if err != nil || !ok {
		return restore, err
	}
	if err := os.WriteFile(autogroupPath, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return restore, fmt.Errorf("failed to set the niceness of this session's scheduler autogroup to %d: %w", n, err)
	}
	return func() error {
		if err := os.WriteFile(autogroupPath, []byte(strconv.Itoa(old)), 0o644); err != nil {
			return fmt.Errorf("failed to restore the niceness %d of this session's scheduler autogroup: %w", old, err)
		}
		return nil
	}, nil
}

// autogroupNice reads the niceness of this process's autogroup
// ("/autogroup-87 nice 0"); ok is false when the kernel has no autogroups.
func autogroupNice() (nice int, ok bool, err error) {
	raw, err := os.ReadFile(autogroupPath)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("failed to read %s: %w", autogroupPath, err)
	}
	if en, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err == nil && strings.TrimSpace(string(en)) == "0" {
		return 0, false, nil
	}
	f := strings.Fields(string(raw))
	if len(f) != 3 || f[1] != "nice" {
		return 0, false, fmt.Errorf("failed to parse %s: %q", autogroupPath, raw)
	}
	nice, err = strconv.Atoi(f[2])
	if err != nil {
		return 0, false, fmt.Errorf("failed to parse %s: %q", autogroupPath, raw)
	}
	return nice, true, nil
}
