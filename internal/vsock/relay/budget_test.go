package relay_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// copyPathTransport is the UNIX-socket EMULATION of vsock with its
// connections hidden behind a wrapper that has no SyscallConn, so the relay
// cannot splice and copies through buffers, as it does on real AF_VSOCK.
type copyPathTransport struct{ vsock.Transport }

func (t copyPathTransport) Listen(port uint32) (net.Listener, error) {
	ln, err := t.Transport.Listen(port)
	return copyPathListener{ln}, err
}

func (t copyPathTransport) Dial(ctx context.Context, cid, port uint32) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, cid, port)
	if err != nil {
		return nil, err
	}
	return copyPathConn{c}, nil
}

type copyPathListener struct{ net.Listener }

func (l copyPathListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return copyPathConn{c}, nil
}

// copyPathConn keeps half-close (the relay needs it) but not SyscallConn.
type copyPathConn struct{ net.Conn }

func (c copyPathConn) CloseWrite() error { return vsock.CloseWrite(c.Conn) }

// TestRelayFloodOnTheCopyPathStaysInBudget floods the relay from one
// namespace with connections that each push 1 MiB to a service that stops
// reading (the worst case for buffers: busy directions block in writes
// holding what they borrowed), on the copy path real AF_VSOCK takes, while
// a guest of another namespace keeps being served. The flooding namespace
// gets at most MaxConnsPerNamespace connections and the lent buffers never
// exceed BufferBudget; the same flood against a relay with a budget larger
// than the demand shows the demand exceeds the small budget, so the bound is
// the budget's doing.
func TestRelayFloodOnTheCopyPathStaysInBudget(t *testing.T) {
	const budget = 512 << 10 // 8 buffers of 64 KiB
	g := NewWithT(t)
	unbounded := runCopyPathFlood(t, 64<<20)
	bounded := runCopyPathFlood(t, budget)
	t.Logf("copy-path flood, %d connections admitted of %d: most bytes lent at once %d KiB with a 64 MiB budget, %d KiB with a %d KiB budget; heap in use grew by at most %.1f MiB and %.1f MiB",
		floodAdmitted, floodDials, unbounded.maxLent>>10, bounded.maxLent>>10, budget>>10, float64(unbounded.heapGrew)/(1<<20), float64(bounded.heapGrew)/(1<<20))
	g.Expect(unbounded.maxLent).To(BeNumerically(">", budget), "the flood wants more than the small budget lends")
	g.Expect(bounded.maxLent).To(And(BeNumerically(">", 0), BeNumerically("<=", budget)), "lent buffers stay within the budget")
	g.Expect(bounded.heapGrew).To(BeNumerically("<", unbounded.heapGrew/2),
		"the heap grows by the budget plus small buffers, not by a %d-byte buffer per busy direction", relay.DefaultBufferSize)
	g.Expect(bounded.heapGrew).To(BeNumerically("<", budget+floodAdmitted*relay.ConnMemoryEstimate),
		"ConnMemoryEstimate covers what a connection costs beyond the budget")
}

const (
	floodDials    = 600
	floodAdmitted = 300 // MaxConnsPerNamespace
	floodPush     = 1 << 20
)

type floodResult struct {
	maxLent  int64
	heapGrew int64
}

// runCopyPathFlood runs the flood of TestRelayFloodOnTheCopyPathStaysInBudget
// against a relay lending at most budget bytes and returns the most bytes
// lent at once and the most the heap in use grew (both sampled every 10 ms
// until the pushes are drained). It
// fails t when tenant-b's guest is not served throughout, when the namespace
// cap does not hold, or when a byte of an admitted push is lost.
func runCopyPathFlood(t *testing.T, budget int64) floodResult {
	g := NewWithT(t)
	root := t.TempDir()
	reg := prometheus.NewRegistry()
	logs := &logSink{}
	r, err := relay.New(relay.Options{
		Transport: copyPathTransport{vsock.NewUnixTransport(root, vsock.HostCID)}, Registerer: reg, Logger: logs.logger(t),
		MaxConnsPerNamespace: floodAdmitted, MaxConnsPerCID: 2 * floodDials, MaxTotalConns: 4 * floodDials, DefaultMaxConns: 4 * floodDials,
		BufferBudget: budget, IdleTimeout: time.Minute,
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = r.Close() }()
	e := &env{t: t, root: root, reg: reg, relay: r, logs: logs}
	g.Expect(r.Limits()).To(And(HaveField("BufferBudget", budget), HaveField("MaxConnsPerNamespace", floodAdmitted)))

	// The flooded service takes connections and reads nothing until
	// released; the other namespace's service echoes.
	release := make(chan struct{})
	startServer(t, root, targetCID, targetPort, func(c net.Conn) { <-release; _, _ = io.Copy(io.Discard, c) })
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseAll()
	startServer(t, root, target2CID, targetPort, echo)
	tenantA := types.NamespacedName{Namespace: "tenant-a", Name: "db-link"}
	tenantB := types.NamespacedName{Namespace: "tenant-b", Name: "db-link"}
	g.Expect(r.Update([]relay.Route{
		{Attachment: tenantA, Service: "db", ListenPort: 4000, TargetCID: targetCID, TargetPort: targetPort, AllowedCIDs: []uint32{clientCID}},
		{Attachment: tenantB, Service: "db", ListenPort: 4001, TargetCID: target2CID, TargetPort: targetPort, AllowedCIDs: []uint32{client2CID}},
	})).To(Succeed())
	labelsA := map[string]string{"attachment": tenantA.String(), "service": "db"}
	lent := func() float64 { return e.metric(relay.MetricBufferBytesLent, nil) }

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// The most bytes lent at once, sampled until the pushes are drained.
	var maxLent, maxHeap atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			if v := int64(lent()); v > maxLent.Load() {
				maxLent.Store(v)
			}
			if runtime.ReadMemStats(&ms); int64(ms.HeapInuse) > maxHeap.Load() {
				maxHeap.Store(int64(ms.HeapInuse))
			}
			select {
			case <-sampling:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	// The other namespace's guest: one long-lived session answered every
	// 50 ms for as long as the flood lasts.
	served := make(chan error, 1)
	stop := make(chan struct{})
	session, err := e.dial(client2CID, 4001)
	g.Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(served)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := echoLine(session, fmt.Sprintf("session %d\n", i)); err != nil {
				served <- fmt.Errorf("request %d of tenant-b's guest: %w", i, err)
				return
			}
		}
	}()

	payload := make([]byte, floodPush) // shared by every writer: the test's own heap stays flat
	var writers sync.WaitGroup
	for range floodDials {
		c, err := e.dial(clientCID, 4000)
		if err != nil {
			continue // the relay may close a denied connection before the dial returns
		}
		writers.Add(1)
		go func() { defer writers.Done(); _, _ = c.Write(payload) }()
	}
	g.Eventually(func() float64 {
		return e.metric(relay.MetricDenials, labelsWith(labelsA, "reason", relay.ReasonNamespaceLimit))
	}, 20*time.Second).Should(BeNumerically(">=", floodDials-floodAdmitted), "connections over the namespace's cap are refused and counted")
	g.Expect(r.Listeners()).To(ContainElement(And(HaveField("Attachment", tenantA), HaveField("ActiveConns", BeNumerically("<=", floodAdmitted)))))
	// Stalled: every admitted push has filled its socket buffers.
	g.Eventually(func() float64 {
		return e.metric(relay.MetricBytes, labelsWith(labelsA, "direction", relay.DirectionToTarget))
	}, 20*time.Second).
		Should(BeNumerically(">=", float64(floodAdmitted*64<<10)), "every admitted connection pushed at least 64 KiB before the service stalled it")

	close(stop)
	g.Eventually(served, 10*time.Second).Should(BeClosed())
	g.Expect(<-served).To(Succeed(), "tenant-b's guest was served throughout the flood")
	g.Expect(e.metric(relay.MetricDenials, map[string]string{"attachment": tenantB.String(), "service": "db", "reason": relay.ReasonNamespaceLimit})).To(BeZero())

	// Released, the service drains every admitted push; the budget comes
	// back once the directions are quiet (lendQuiet).
	releaseAll()
	writers.Wait()
	g.Eventually(func() float64 {
		return e.metric(relay.MetricBytes, labelsWith(labelsA, "direction", relay.DirectionToTarget))
	}, 30*time.Second).
		Should(BeNumerically(">=", float64(floodAdmitted*floodPush)), "the admitted connections' bytes all arrive")
	g.Eventually(lent, 10*time.Second).Should(BeZero(), "quiet connections give their buffers back")
	close(sampling)
	<-sampled
	return floodResult{maxLent: maxLent.Load(), heapGrew: maxHeap.Load() - int64(before.HeapInuse)}
}

func labelsWith(l map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestRelayDenialLinesAreRateLimited: a guest dialling a refused route in a
// loop gets every denial counted but only a burst of log lines, and the
// next line says how many were held back.
func TestRelayDenialLinesAreRateLimited(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, relay.Options{})
	startServer(t, e.root, targetCID, targetPort, echo)
	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID)})).To(Succeed())
	const tries = 100
	for range tries {
		c, err := e.dial(strangeCID, 4000)
		if err == nil {
			expectClosedByPeer(g, c, 5*time.Second)
		}
	}
	g.Eventually(func() float64 {
		return e.metric(relay.MetricDenials, routeLabels("db", "reason", relay.ReasonCIDNotAllowed))
	}, 10*time.Second).Should(Equal(float64(tries)), "every denial is counted")
	lines := e.logs.matching(`"msg"="Denied vsock relay connection"`)
	g.Expect(len(lines)).To(And(BeNumerically(">=", 10), BeNumerically("<", tries/2)), "a burst of lines, not one per denial")
}

func TestBudgetsForMemory(t *testing.T) {
	g := NewWithT(t)
	// The chart's 128 MiB agent: 32 MiB of buffers, 1024 connections
	// (64 MiB at 64 KiB each), 256 per namespace.
	g.Expect(relay.BudgetsForMemory(128 << 20)).To(Equal(relay.Budgets{BufferBudget: 32 << 20, MaxTotalConns: 1024, MaxConnsPerNamespace: 256}))
	// Unknown: the defaults.
	g.Expect(relay.BudgetsForMemory(0)).To(Equal(relay.Budgets{BufferBudget: relay.DefaultBufferBudget,
		MaxTotalConns: relay.DefaultMaxTotalConns, MaxConnsPerNamespace: relay.DefaultMaxConnsPerNamespace}))
	// A node-sized limit (the downward API's answer without a limit) is
	// capped by the connection defaults and their buffers.
	g.Expect(relay.BudgetsForMemory(64 << 30)).To(Equal(relay.Budgets{BufferBudget: 2 * relay.DefaultMaxTotalConns * relay.DefaultBufferSize,
		MaxTotalConns: relay.DefaultMaxTotalConns, MaxConnsPerNamespace: relay.DefaultMaxTotalConns / 4}))
	// A tiny limit still admits some connections.
	g.Expect(relay.BudgetsForMemory(1 << 20)).To(HaveField("MaxTotalConns", 64))
	for _, limit := range []int64{16 << 20, 128 << 20, 256 << 20, 1 << 30} {
		b := relay.BudgetsForMemory(limit)
		g.Expect(b.BufferBudget+int64(b.MaxTotalConns)*relay.ConnMemoryEstimate).To(BeNumerically("<=", limit*3/4), "limit %d: buffers and connections leave a quarter", limit)
	}
}
