package vsockbench_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/bench/vsockbench"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

const (
	serverCID  uint32 = 5
	clientCID  uint32 = 3
	serverPort uint32 = 6000
)

// startServer runs vsockbench.Serve on the emulated (UNIX-socket) CID 5 and
// returns the client transport of CID 3.
func startServer(t *testing.T) vsock.Transport {
	t.Helper()
	root := t.TempDir()
	ln, err := vsock.NewUnixTransport(root, serverCID).Listen(serverPort)
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vsockbench.Serve(ctx, ln, testr.New(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server failed: %v", err)
		}
	})
	return vsock.NewUnixTransport(root, clientCID)
}

func TestStream(t *testing.T) {
	tr := startServer(t)
	for _, size := range []int{1, 4096, 65536} {
		g := NewWithT(t)
		const d = 150 * time.Millisecond
		res, err := vsockbench.Stream(context.Background(), tr, vsockbench.StreamOptions{
			CID: serverCID, Port: serverPort, MessageSize: size, Duration: d})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.MessageSize).To(Equal(size))
		g.Expect(res.Messages).To(BeNumerically(">", 0))
		g.Expect(res.BytesSent).To(Equal(res.Messages * int64(size)))
		g.Expect(res.BytesReceived).To(Equal(res.BytesSent))
		g.Expect(res.Elapsed).To(BeNumerically(">=", d))
		g.Expect(res.ThroughputMbps).To(BeNumerically(">", 0))
		g.Expect(res.ThroughputMbps).To(BeNumerically("~", float64(res.BytesReceived)*8/res.Elapsed.Seconds()/1e6, 1e-9))
		t.Logf("VSOCK_STREAM (UNIX-socket emulation) m=%d: %.0f Mbps", size, res.ThroughputMbps)
	}
}

func TestRR(t *testing.T) {
	g := NewWithT(t)
	tr := startServer(t)
	const d = 150 * time.Millisecond
	res, err := vsockbench.RR(context.Background(), tr, vsockbench.RROptions{CID: serverCID, Port: serverPort, Duration: d})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Transactions).To(BeNumerically(">", 0))
	g.Expect(res.Elapsed).To(BeNumerically(">=", d))
	g.Expect(res.TransactionsPerSec).To(BeNumerically("~", float64(res.Transactions)/res.Elapsed.Seconds(), 1e-6))
	g.Expect(res.MeanLatencyMicros).To(BeNumerically(">", 0))
	g.Expect(res.P99LatencyMicros).To(BeNumerically(">", 0))
	// Transactions run back to back, so their latencies add up to the run.
	g.Expect(res.MeanLatencyMicros * float64(res.Transactions)).To(BeNumerically("~", float64(res.Elapsed.Microseconds()), 1+float64(res.Transactions)*0.01))
	t.Logf("VSOCK_RR (UNIX-socket emulation): %.0f transactions/s, mean %.1f µs, p99 %.1f µs",
		res.TransactionsPerSec, res.MeanLatencyMicros, res.P99LatencyMicros)
}

func TestInvalidOptionsAndCancel(t *testing.T) {
	g := NewWithT(t)
	tr := startServer(t)
	_, err := vsockbench.Stream(context.Background(), tr, vsockbench.StreamOptions{CID: serverCID, Port: serverPort, Duration: time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("must be positive")))
	_, err = vsockbench.RR(context.Background(), tr, vsockbench.RROptions{CID: serverCID, Port: serverPort})
	g.Expect(err).To(MatchError(ContainSubstring("must be positive")))
	_, err = vsockbench.Stream(context.Background(), tr, vsockbench.StreamOptions{CID: serverCID, Port: serverPort + 1, MessageSize: 1, Duration: time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("failed to run VSOCK_STREAM against 5:6001")))

	// The context's end ends a run an hour long, with the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		_, err := vsockbench.RR(ctx, tr, vsockbench.RROptions{CID: serverCID, Port: serverPort, Duration: time.Hour})
		ran <- err
	}()
	// A hang guard, not a speed target: a run that ignored its context
	// would take the hour.
	g.Eventually(ran, time.Minute).Should(Receive(&err))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
}

func TestServerRejectsBadHeader(t *testing.T) {
	g := NewWithT(t)
	tr := startServer(t)
	c, err := tr.Dial(context.Background(), serverCID, serverPort)
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	_, err = c.Write([]byte("GET / HTTP/1.1\r\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	// The server closes the connection (EOF, or a reset because our bytes
	// were left unread); a timeout would mean it kept waiting.
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) {
		g.Expect(ne.Timeout()).To(BeFalse(), "server must close the connection")
	}
}
