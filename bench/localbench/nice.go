package localbench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// autogroupPath is the scheduler autogroup of process pid (kernel
// Documentation/scheduler/sched-design-CFS.rst, "autogroup"): with
// kernel.sched_autogroup_enabled=1 CFS first shares the CPUs between
// sessions and applies a thread's niceness only within its session, so a
// benchmark niced against processes of other sessions (builds in other
// terminals) also needs the autogroup's own niceness.
func autogroupPath(pid int) string { return fmt.Sprintf("/proc/%d/autogroup", pid) }

// SetNice runs this process and everything it starts from now on at
// niceness n (-20..19): it sets every thread's niceness (on Linux
// setpriority(PRIO_PROCESS, tid) changes one thread; a child inherits the
// niceness of the thread that forks it, a new thread that of its creator)
// and, where the kernel groups tasks by session (autogroup), the niceness of
// this session's group. restore puts the autogroup's niceness back (it
// outlives the process when the session is a shell's); thread niceness ends
// with the process. Lowering niceness needs CAP_SYS_NICE.
func SetNice(n int) (restore func() error, err error) {
	return setNice(os.Getpid(), n, false)
}

// setNice sets the niceness of every thread of process pid and of its
// autogroup to n. restore puts the autogroup back, and with threads also
// the threads' old niceness (for a process this one does not own).
func setNice(pid, n int, threads bool) (restore func() error, err error) {
	var undo []func() error
	restore = func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return restore, fmt.Errorf("failed to list the threads of process %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// getpriority returns 20 - nice (the raw syscall avoids negative returns).
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			return restore, fmt.Errorf("failed to read the niceness of thread %d of process %d: %w", tid, pid, err)
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, unix.ESRCH) {
			return restore, fmt.Errorf("failed to set niceness %d of thread %d of process %d: %w", n, tid, pid, err)
		}
		if threads {
			old := 20 - prio
			undo = append(undo, func() error {
				if err := unix.Setpriority(unix.PRIO_PROCESS, tid, old); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("failed to restore niceness %d of thread %d of process %d: %w", old, tid, pid, err)
				}
				return nil
			})
		}
	}
	old, ok, err := autogroupNice(pid)
	if err != nil || !ok {
		return restore, err
	}
	path := autogroupPath(pid)
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return restore, fmt.Errorf("failed to set the niceness of the scheduler autogroup of process %d to %d: %w", pid, n, err)
	}
	undo = append(undo, func() error {
		err := os.WriteFile(path, []byte(strconv.Itoa(old)), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("failed to restore the niceness %d of the scheduler autogroup of process %d: %w", old, pid, err)
		}
		return nil
	})
	return restore, nil
}

// autogroupNice reads the niceness of process pid's autogroup
// ("/autogroup-87 nice 0"); ok is false when the kernel has no autogroups
// or the process is not in one.
func autogroupNice(pid int) (nice int, ok bool, err error) {
	raw, err := os.ReadFile(autogroupPath(pid))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("failed to read %s: %w", autogroupPath(pid), err)
	}
	if en, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err == nil && strings.TrimSpace(string(en)) == "0" {
		return 0, false, nil
	}
	nice, ok, err = parseAutogroup(string(raw))
	if err != nil {
		return 0, false, fmt.Errorf("failed to parse %s: %w", autogroupPath(pid), err)
	}
	return nice, ok, nil
}

// parseAutogroup parses the text of /proc/<pid>/autogroup. The kernel
// (kernel/sched/autogroup.c, proc_sched_autogroup_show_task) prints
// "/autogroup-<id> nice <n>" for a task in an autogroup and nothing at all
// for a task whose task group is not an autogroup, as for every task in a
// container whose cgroup has the cpu controller; empty text is therefore
// ok=false, not an error.
func parseAutogroup(raw string) (nice int, ok bool, err error) {
	if strings.TrimSpace(raw) == "" {
		return 0, false, nil
	}
	f := strings.Fields(raw)
	if len(f) != 3 || !strings.HasPrefix(f[0], "/autogroup-") || f[1] != "nice" {
		return 0, false, fmt.Errorf("want \"/autogroup-<id> nice <n>\", got %q", raw)
	}
	nice, err = strconv.Atoi(f[2])
	if err != nil {
		return 0, false, fmt.Errorf("want \"/autogroup-<id> nice <n>\", got %q", raw)
	}
	return nice, true, nil
}
