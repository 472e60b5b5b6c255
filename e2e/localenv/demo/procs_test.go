package demo

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/gomega"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

func TestListenerPIDs(t *testing.T) {
	g := gomega.NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer ln.Close()
	g.Expect(listenerPIDs(ln.Addr().(*net.TCPAddr).Port)).To(gomega.ContainElement(os.Getpid()))
}

func TestKillRecordedChecksTheExecutable(t *testing.T) {
	g := gomega.NewWithT(t)
	cmd := exec.Command("sleep", "30")
	g.Expect(cmd.Start()).To(gomega.Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	pid := cmd.Process.Pid

	// A recycled PID running something else is left alone.
	rec, ok := runstate.Record("sleep", pid)
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(killRecorded([]runstate.Process{{PID: pid, Exe: "/not/the/same"}})).To(gomega.BeEmpty())
	// So is one running the same executable that started at another time.
	g.Expect(killRecorded([]runstate.Process{{PID: pid, Exe: rec.Exe, Start: rec.Start + 1}})).To(gomega.BeEmpty())
	g.Consistently(done, 200*time.Millisecond).ShouldNot(gomega.BeClosed())

	g.Expect(killRecorded([]runstate.Process{rec})).To(gomega.HaveLen(1))
	g.Eventually(done, 5*time.Second).Should(gomega.BeClosed())
}

func TestRunStateRoundTrip(t *testing.T) {
	g := gomega.NewWithT(t)
	p := filepath.Join(t.TempDir(), "state", "run.json")
	s, err := runstate.Load[runState](p)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "a missing state is empty")
	g.Expect(s.Processes).To(gomega.BeEmpty())
	want := runState{Processes: []runstate.Process{{Name: "agent", PID: 7, Exe: "/bin/x", Start: 12}}, Bridges: []stateBridge{{Name: "fastpath0", Datapath: "LinuxBridge"}}, Dirs: []string{"/tmp/k8s_test_framework_1"}}
	g.Expect(runstate.Save(p, want)).To(gomega.Succeed())
	g.Expect(runstate.Load[runState](p)).To(gomega.Equal(want))
}

func TestSampleBridges(t *testing.T) {
	g := gomega.NewWithT(t)
	got, err := sampleBridges(filepath.Join("..", "..", "..", "config", "samples"))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(got).To(gomega.HaveLen(1))
	g.Expect(got[0].Bridge).To(gomega.Equal("fastpath0"))
	g.Expect(got[0].Datapath).To(gomega.Equal(fastpathv1alpha1.DatapathLinuxBridge))
	g.Expect(*got[0].MTU).To(gomega.BeEquivalentTo(9000))
}

func TestLockWorkDir(t *testing.T) {
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	f, err := lockWorkDir(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = lockWorkDir(dir)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("another run uses " + dir)))
	g.Expect(f.Close()).To(gomega.Succeed())
	f, err = lockWorkDir(dir)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "free again once the holder closed it")
	g.Expect(f.Close()).To(gomega.Succeed())
}
