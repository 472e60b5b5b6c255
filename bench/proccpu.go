package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// FinishedChildrenCPU returns the user plus system CPU time of this
// process's children that have exited and been waited for
// (getrusage(RUSAGE_CHILDREN)): the netperf clients of a local benchmark.
func FinishedChildrenCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0, fmt.Errorf("failed to read the CPU time of finished children: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// ProcessCPU returns the user plus system CPU time of process pid, all its
// threads, and its children that it has waited for (utime + stime + cutime
// + cstime of /proc/<pid>/stat, in USER_HZ ticks). With the kernel's
// tick-based accounting, softirq work a task runs on its way out of a system
// call (a veth's receive path) is charged to it as system time; work
// deferred to ksoftirqd is not.
func ProcessCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("failed to read the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it follow ")".
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, fmt.Errorf("failed to parse /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse /proc/%d/stat: CPU time %q", pid, v)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// WaitChildless waits until process pid has no children left (its
// /proc/<pid>/task/<pid>/children is empty), so that their CPU time is in
// its cutime and cstime, for at most timeout.
func WaitChildless(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	path := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	for {
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("failed to list the children of process %d: %w", pid, err)
		}
		if strings.TrimSpace(string(raw)) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still has children %s after %s", pid, strings.TrimSpace(string(raw)), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
