package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeBackend writes a shell script standing in for vhost-device-vsock: it
// creates the --vm sockets it is given (as regular files: waitSockets only
// stats them) and runs until signalled. With honourTerm it exits 0 on
// SIGTERM after writing "TERM" to <dir>/term, as our build does once it has
// reset its guests' connections; without, it ignores SIGTERM, as a hung
// one might.
func fakeBackend(t *testing.T, dir string, honourTerm bool) string {
	t.Helper()
	trap := `trap '' TERM`
	if honourTerm {
		trap = `trap 'echo TERM >>"` + filepath.Join(dir, "term") + `"; exit 0' TERM`
	}
	script := "#!/bin/sh\n" + trap + `
for a in "$@"; do
  case "$a" in guest-cid=*) s=${a#*socket=}; : >"${s%%,*}" ;; esac
done
sleep 100 &
wait
`
	p := filepath.Join(dir, "fake-vhost-device-vsock")
	NewWithT(t).Expect(os.WriteFile(p, []byte(script), 0o755)).To(Succeed())
	return p
}

// startFake starts bin in a process group of its own, as Supervisor.spawn does.
func startFake(t *testing.T, bin string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	NewWithT(t).Expect(cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return cmd, exited
}

// TestStopProcessSendsSIGTERMFirst: a backend that exits on SIGTERM is given
// SIGTERM, not SIGKILL, so that it can reset its guests' connections, and
// stopProcess returns as soon as it has exited.
func TestStopProcessSendsSIGTERMFirst(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	cmd, exited := startFake(t, fakeBackend(t, dir, true))
	time.Sleep(200 * time.Millisecond) // the shell has set its trap

	start := time.Now()
	g.Expect(stopProcess(cmd, exited)).To(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically("<", StopGrace))
	g.Expect(os.ReadFile(filepath.Join(dir, "term"))).To(Equal([]byte("TERM\n")))
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(0), "it exited by itself, not by SIGKILL")
}

// TestStopProcessKillsAfterTheGrace: a backend that does not exit on SIGTERM
// has its process group killed once StopGrace has passed.
func TestStopProcessKillsAfterTheGrace(t *testing.T) {
	g := NewWithT(t)
	cmd, exited := startFake(t, fakeBackend(t, t.TempDir(), false))
	time.Sleep(200 * time.Millisecond)

	start := time.Now()
	err := stopProcess(cmd, exited)
	took := time.Since(start)
	g.Expect(err).To(MatchError(ContainSubstring("did not exit within 2s of SIGTERM: killed")))
	g.Expect(took).To(BeNumerically(">=", StopGrace))
	g.Expect(took).To(BeNumerically("<", StopGrace+time.Second))
	g.Expect(cmd.ProcessState.Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGKILL))
}

// TestSupervisorStopStopsTheGroupsAtOnce: Stop gives every group's process
// its grace at the same time, so three that ignore SIGTERM take one
// StopGrace, not three, and none is left running.
func TestSupervisorStopStopsTheGroupsAtOnce(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	s := &Supervisor{Binary: fakeBackend(t, dir, false), MinBackoff: 50 * time.Millisecond}
	defer s.Stop()
	var groups []Group
	for i, key := range []string{"ns1/a", "ns1/b", "ns1/c"} {
		grp := group(filepath.Join(dir, key), uint32(3+i))
		grp.Key = key
		groups = append(groups, grp)
	}
	g.Expect(s.Sync(groups)).To(Succeed())
	var pids []int
	g.Eventually(func() bool {
		pids = pids[:0]
		for _, st := range s.Status() {
			if st.Running {
				pids = append(pids, st.PID)
			}
		}
		return len(pids) == 3
	}, 10*time.Second, 20*time.Millisecond).Should(BeTrue(), "%+v", s.Status())
	time.Sleep(200 * time.Millisecond)

	start := time.Now()
	s.Stop()
	took := time.Since(start)
	g.Expect(took).To(BeNumerically(">=", StopGrace))
	g.Expect(took).To(BeNumerically("<", 2*StopGrace))
	g.Expect(s.Status()).To(BeEmpty())
	for _, pid := range pids {
		g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "pid %d still runs", pid)
	}
}
