package localbench

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetNice sets the niceness of every thread of this process to n (-20..19).
// On Linux setpriority(PRIO_PROCESS, tid) changes one thread, a child
// inherits the niceness of the thread that forks it and a new thread that of
// its creator, so after SetNice every process this one starts (netperf,
// netserver, ovs-ctl) runs at n. Lowering it needs CAP_SYS_NICE.
func SetNice(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("failed to list the threads of this process: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && err != unix.ESRCH {
			return fmt.Errorf("failed to set niceness %d of thread %d: %w", n, tid, err)
		}
	}
	return nil
}
