package guests

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestChecksumStreamCommandsOnTheHost runs the shell of ServeChecksumSink,
// SinkProgress's file layout and StreamChecksum with the guest image's
// tools (busybox applets and socat, hack/guest-image.sh) on this host, over
// TCP on loopback: 3 MiB in 64 KiB writes arrive with the sender's sha256,
// twice through one sink, and a sink that is gone is a stall, not a result.
func TestChecksumStreamCommandsOnTheHost(t *testing.T) {
	g := NewWithT(t)
	for _, bin := range []string{"/usr/bin/busybox", "/usr/bin/socat"} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("%s is missing (the guest image's tools): %v", bin, err)
		}
	}
	applets := t.TempDir()
	if out, err := exec.Command("/usr/bin/busybox", "--install", "-s", applets).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install -s %s: %v: %s", applets, err, out)
	}
	sh := func(cmd string) *exec.Cmd {
		c := exec.Command("/usr/bin/busybox", "sh", "-c", cmd)
		c.Env = []string{"PATH=" + applets}
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())

	name := testutil.UniqueName("fpsumtest")
	t.Cleanup(func() {
		files, _ := filepath.Glob("/tmp/fpsum." + name + "*")
		for _, f := range files {
			_ = os.Remove(f)
		}
	})
	sink := sh(checksumSinkCommand(name, fmt.Sprintf("TCP-LISTEN:%d,bind=127.0.0.1", port)))
	out, err := sink.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	// The backgrounded socat stays in the command's process group.
	t.Cleanup(func() { _ = syscall.Kill(-sink.Process.Pid, syscall.SIGKILL) })

	const total, write = 3 << 20, 64 << 10
	target := fmt.Sprintf("TCP:127.0.0.1:%d", port)
	var sums []string
	for i := range 2 {
		var s ChecksumSample
		// The sink's socat listens once the shell above has started it.
		g.Eventually(func() error {
			out, err := sh(checksumStreamCommand(target, total, write, 20, 10)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			s, err = parseChecksumStream(string(out), "host", target, total, write, 20)
			return err
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed(), "transfer %d through the sink", i)
		g.Expect(s.Match()).To(BeTrue(), "%+v", s)
		g.Expect(s.SentSHA256).To(MatchRegexp("^[0-9a-f]{64}$"))
		sums = append(sums, s.SentSHA256)
	}
	g.Expect(sums[0]).NotTo(Equal(sums[1]), "each transfer sends fresh random bytes")
	b, err := os.ReadFile("/tmp/fpsum." + name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(string(b))).To(Equal([]string{sums[0], fmt.Sprint(total), sums[1], fmt.Sprint(total)}))

	g.Expect(syscall.Kill(-sink.Process.Pid, syscall.SIGKILL)).To(Succeed())
	out, err = sh(checksumStreamCommand(target, total, write, 2, 0)).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	_, err = parseChecksumStream(string(out), "host", target, total, write, 2)
	g.Expect(err).To(MatchError(ErrStreamStalled))
	g.Expect(err.Error()).To(ContainSubstring("Connection refused"))

	// A peer that accepts and never reads: with an idle bound the stream
	// ends when nothing has moved for that long, long before the bound on
	// the whole transfer kills it, and says so.
	stuck := sh(fmt.Sprintf("/usr/bin/socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr SYSTEM:'sleep 60' >/dev/null 2>&1 &", port))
	g.Expect(stuck.Run()).To(Succeed())
	t.Cleanup(func() { _ = syscall.Kill(-stuck.Process.Pid, syscall.SIGKILL) })
	const big = 64 << 20 // more than loopback TCP buffers hold
	var nae *NoAnswerError
	g.Eventually(func() error {
		start := time.Now()
		out, err := sh(checksumStreamCommand(target, big, write, 30, 2)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		_, err = parseChecksumStream(string(out), "host", target, big, write, 30)
		if !errors.As(err, &nae) {
			return fmt.Errorf("want a NoAnswerError, got %v", err)
		}
		if took := time.Since(start); nae.Ending() != EndIdle || took > 15*time.Second {
			return fmt.Errorf("ended after %s: %w", took, err)
		}
		return nil
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	t.Logf("a peer that reads nothing: %v", nae)
}
