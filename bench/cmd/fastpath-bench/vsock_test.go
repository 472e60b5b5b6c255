package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
)

// startVSockServer runs `vsock-server` on emulated CID 7, port 5000 under
// a temporary root and stops it at cleanup.
func startVSockServer(t *testing.T) (root string) {
	t.Helper()
	root = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"vsock-server", "--transport", "unix:" + root, "--cid", "7", "--port", "5000", "--quiet"}, &bytes.Buffer{}, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("vsock-server exited %d: %s", code, stderr.String())
		}
	})
	// The server announces nothing when it listens, so the real condition is
	// polled: its socket accepts a connection (one that sends no preamble is
	// dropped silently). The socket's file existing is not enough: it appears
	// at bind, before listen, and a client dialling then is refused (seen
	// once in 113 runs). 30 s is a hang guard, not a speed target.
	sock := filepath.Join(root, "7", "5000.sock")
	gomega.NewWithT(t).Eventually(func() error {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err
	}).
		WithTimeout(30*time.Second).WithPolling(10*time.Millisecond).
		Should(gomega.Succeed(), func() string { return fmt.Sprintf("vsock-server did not listen at %s: %s", sock, stderr.String()) })
	return root
}

func TestVSockClientAgainstServer(t *testing.T) {
	root := startVSockServer(t)
	for _, test := range []string{results.VSockStream, results.VSockRR} {
		t.Run(test, func(t *testing.T) {
			g := gomega.NewWithT(t)
			code, stdout, stderr := run("vsock-client", "--transport", "unix:"+root, "--cid", "3", "--server", "7:5000", "--test", test,
				"--message-size", "16K", "--duration", "300ms")
			g.Expect(code).To(gomega.Equal(0), stderr)
			var out bench.VSockClientOutput
			g.Expect(json.Unmarshal([]byte(stdout), &out)).To(gomega.Succeed())
			g.Expect(out.Test).To(gomega.Equal(test))
			g.Expect(out.Emulated).To(gomega.ContainSubstring("vsock emulated over UNIX sockets under " + root + " (this end is CID 3)"))
			g.Expect(out.Session.Endpoint).To(gomega.Equal("7:5000"))
			g.Expect(out.Session.ThroughputMbps).To(gomega.BeNumerically(">", 0))
			if test == results.VSockRR {
				g.Expect(out.MessageBytes).To(gomega.Equal(1))
				g.Expect(out.Session.MeanLatencyUs).To(gomega.BeNumerically(">", 0))
			} else {
				g.Expect(out.MessageBytes).To(gomega.Equal(16384))
			}
		})
	}
}

// `run --tests VSOCK_STREAM,VSOCK_RR` with a vsock endpoint: the same JSON
// document as the netperf tests.
func TestRunVSockTests(t *testing.T) {
	g := gomega.NewWithT(t)
	root := startVSockServer(t)
	code, stdout, stderr := run("run", "--tests", "VSOCK_STREAM,VSOCK_RR", "--message-sizes", "64K", "--sessions", "1", "--duration", "1s",
		"--repetitions", "1", "--path", "vsock=7:5000", "--transport", "unix:"+root, "--cid", "3", "--quiet")
	g.Expect(code).To(gomega.Equal(0), stderr)
	doc, err := results.Decode(strings.NewReader(stdout))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(doc.Machine.Emulated).To(gomega.ContainSubstring("vsock emulated over UNIX sockets"))
	g.Expect(doc.Runs).To(gomega.HaveLen(2), "one point per test: socket sizes do not apply to vsock")
	g.Expect(doc.Runs[0].Test).To(gomega.Equal(results.VSockStream))
	g.Expect(doc.Runs[0].SocketBytes).To(gomega.BeZero())
	g.Expect(doc.Runs[1].Test).To(gomega.Equal(results.VSockRR))
	g.Expect(doc.Runs[1].MeanLatencyUs).To(gomega.BeNumerically(">", 0))
}

func TestVSockCommandsRejectBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vsock-server", "--transport", "unix:/tmp/x", "--cid", "3"}, "--port 0 must be"},
		{[]string{"vsock-server", "--transport", "unix:", "--cid", "3", "--port", "1"}, "unix: needs a directory"},
		{[]string{"vsock-client", "--transport", "unix:/tmp/x", "--cid", "3", "--server", "x:1"}, "want cid:port"},
		{[]string{"vsock-client", "--transport", "unix:/tmp/x", "--cid", "3", "--server", "7:0"}, "port of 1-"},
		{[]string{"vsock-client", "--transport", "unix:/tmp/x", "--cid", "3", "--server", "7:1", "--test", "TCP_RR"}, "want VSOCK_STREAM or VSOCK_RR"},
		{[]string{"vsock-client", "--transport", "unix:/tmp/x", "--server", "7:1"}, "needs --cid"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := gomega.NewWithT(t)
			code, _, stderr := run(tc.args...)
			g.Expect(code).To(gomega.Equal(2))
			g.Expect(stderr).To(gomega.ContainSubstring(tc.want))
		})
	}
}
