package bench_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench"
)

// A child that burns CPU shows up in its own /proc figure while it runs,
// and in getrusage(RUSAGE_CHILDREN) once it has been waited for.
func TestProcessCPUCountsABusyChild(t *testing.T) {
	g := gomega.NewWithT(t)
	before, err := bench.FinishedChildrenCPU()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 0.5")
	g.Expect(cmd.Start()).To(gomega.Succeed())
	var seen time.Duration
	g.Eventually(func() time.Duration {
		seen, _ = bench.ProcessCPU(cmd.Process.Pid)
		return seen
	}, 20*time.Second, 50*time.Millisecond).Should(gomega.BeNumerically(">=", 20*time.Millisecond))
	g.Expect(bench.WaitChildless(cmd.Process.Pid, 5*time.Second)).To(gomega.Succeed(), "sh has only a short-lived sleep child")
	g.Expect(cmd.Wait()).To(gomega.Succeed())
	after, err := bench.FinishedChildrenCPU()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(after - before).To(gomega.BeNumerically(">=", seen))

	_, err = bench.ProcessCPU(cmd.Process.Pid)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to read the CPU time of process")))
}
