package runstate_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

type state struct {
	Processes []runstate.Process `json:"processes"`
	Note      string             `json:"note"`
}

func TestLoadSave(t *testing.T) {
	g := NewWithT(t)
	p := filepath.Join(t.TempDir(), "dir", "run.json")
	s, err := runstate.Load[state](p)
	g.Expect(err).NotTo(HaveOccurred(), "a missing file is the zero state")
	g.Expect(s).To(Equal(state{}))

	want := state{Processes: []runstate.Process{{Name: "x", PID: 7, Exe: "/bin/x", Start: 3}}, Note: "n"}
	g.Expect(runstate.Save(p, want)).To(Succeed())
	g.Expect(runstate.Load[state](p)).To(Equal(want))
	g.Expect(filepath.Glob(filepath.Join(filepath.Dir(p), "*.tmp"))).To(BeEmpty(), "no temporary file is left")

	// A record written before start times were kept still loads.
	g.Expect(os.WriteFile(p, []byte(`{"processes":[{"pid":9,"exe":"/bin/y"}]}`), 0o600)).To(Succeed())
	g.Expect(runstate.Load[state](p)).To(Equal(state{Processes: []runstate.Process{{PID: 9, Exe: "/bin/y"}}}))

	g.Expect(os.WriteFile(p, []byte(`{`), 0o600)).To(Succeed())
	_, err = runstate.Load[state](p)
	g.Expect(err).To(MatchError(ContainSubstring(p)))
}

func TestProcessIdentity(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("sleep", "30.00417")
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	pid := cmd.Process.Pid

	rec, ok := runstate.Record("sleep", pid)
	g.Expect(ok).To(BeTrue())
	g.Expect(rec.Alive()).To(BeTrue())
	g.Expect(filepath.Base(rec.Exe)).To(Equal("sleep"))
	// cmd.Start returns once execve has closed the parent's CLOEXEC pipe,
	// which is before the kernel has laid out the new argv: /proc/<pid>/exe
	// already names sleep while /proc/<pid>/cmdline may still be empty, so
	// the command line is polled, not read once.
	g.Eventually(func() []int { return runstate.WithArg("sleep", "30.00417") }, 5*time.Second, 10*time.Millisecond).
		Should(ConsistOf(pid))

	// A recycled PID (another executable, or another start time) is not
	// the recorded process and is never signalled.
	other := rec
	other.Exe = "/not/the/same"
	g.Expect(other.Alive()).To(BeFalse())
	g.Expect(other.Kill()).To(BeFalse())
	other = rec
	other.Start++
	g.Expect(other.Kill()).To(BeFalse())
	g.Expect(other.Stop(time.Second)).To(Succeed(), "nothing to stop")
	g.Consistently(done, 200*time.Millisecond).ShouldNot(BeClosed())
	g.Expect(runstate.Process{PID: 1, Exe: "/sbin/init"}.Alive()).To(BeFalse(), "PID 1 is never ours")

	g.Expect(rec.Stop(5 * time.Second)).To(Succeed())
	g.Eventually(done, 5*time.Second).Should(BeClosed())
	g.Expect(rec.Alive()).To(BeFalse())
	_, ok = runstate.Record("sleep", pid)
	g.Expect(ok).To(BeFalse())
}

func TestRunDirIsShortStableAndPerWorkDir(t *testing.T) {
	g := NewWithT(t)
	long := "/home/alice/src/github.com/fastpath-io/a-clone-at-a-path-as-long-as-a-users-home/_out/e2e"
	a, err := runstate.RunDir("e2e", long)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(HavePrefix(runstate.RunRoot + "/e2e-"))
	g.Expect(len(a)).To(Equal(len(runstate.RunRoot) + len("/e2e-") + 8))
	again, _ := runstate.RunDir("e2e", long)
	g.Expect(again).To(Equal(a), "the same work directory gets the same run directory")
	other, _ := runstate.RunDir("e2e", long+"2")
	g.Expect(other).NotTo(Equal(a), "another clone gets another run directory")
	g.Expect(runstate.CheckSocketPath(filepath.Join(a, "emulation/vms/fastpath-e2e-12345/outsider/guest/libvirt/run/libvirt-sock"))).To(Succeed())
	err = runstate.CheckSocketPath(filepath.Join(long, "state/emulation/vms/fastpath-e2e-12345/outsider/guest/libvirt/run/libvirt-sock"))
	g.Expect(err).To(MatchError(ContainSubstring("over the 107 that sun_path holds")))
}
