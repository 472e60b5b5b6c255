package relay_test

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// Over the UNIX-socket EMULATION of vsock (no AF_VSOCK on this host).

// TestRelayFloodFromOneCIDDoesNotStarveAnother floods one route from one
// guest with thousands of connections, half of them idle and half
// half-open, while a second allowed guest keeps being served: the flooder
// gets at most MaxConnsPerCID, the rest is refused and counted, half-open
// connections are closed after HalfCloseTimeout, and the heap stays bounded.
func TestRelayFloodFromOneCIDDoesNotStarveAnother(t *testing.T) {
	const (
		flood     = 3000
		perCID    = 200
		halfClose = 500 * time.Millisecond
	)
	g := NewWithT(t)
	e := newEnv(t, relay.Options{MaxConnsPerCID: perCID, HalfCloseTimeout: halfClose, IdleTimeout: time.Minute})
	// The service echoes and, at the guest's EOF, keeps its own side open
	// (as a stuck server would): only the half-close timeout ends those.
	hold := make(chan struct{})
	startServer(t, e.root, targetCID, targetPort, func(c net.Conn) { _, _ = io.Copy(c, c); <-hold })
	t.Cleanup(func() { close(hold) }) // runs before the server's cleanup
	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID, client2CID)})).To(Succeed())

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// The other guest: one long-lived session plus a new connection every
	// 50 ms, each answered, for as long as the flood lasts.
	served := make(chan error, 1)
	stop := make(chan struct{})
	session, err := e.dial(client2CID, 4000)
	g.Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(served)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			err := echoLine(session, fmt.Sprintf("session %d\n", i))
			if err == nil {
				var c net.Conn
				if c, err = e.dial(client2CID, 4000); err == nil {
					err = echoLine(c, fmt.Sprintf("request %d\n", i))
					_ = c.Close()
				}
			}
			if err != nil {
				served <- fmt.Errorf("request %d of the other guest: %w", i, err)
				return
			}
		}
	}()

	var held []net.Conn
	for i := range flood {
		c, err := e.dial(clientCID, 4000)
		if err != nil {
			continue // the relay may close a denied connection before the dial returns
		}
		held = append(held, c)
		if i%2 == 1 {
			_ = vsock.CloseWrite(c) // half-open: the guest's side is done, the service's is not
		}
	}
	g.Eventually(func() float64 {
		return e.metric(relay.MetricDenials, routeLabels("db", "reason", relay.ReasonCIDLimit))
	}, 10*time.Second).Should(BeNumerically(">=", flood-2*perCID), "connections over the per-CID cap are refused and counted")
	g.Expect(e.relay.Listeners()[0].ActiveConns).To(BeNumerically("<=", perCID+12), "the flooder holds at most its per-CID share")

	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("flood of %d connections from CID %d: %d dialled, heap in use grew by %.1f MiB (goroutines %d)",
		flood, clientCID, len(held), float64(grew)/(1<<20), runtime.NumGoroutine())
	g.Expect(grew).To(BeNumerically("<", 48<<20), "bounded: idle connections hold %d-byte buffers, not %d", relay.SmallBufferSize, relay.DefaultBufferSize)

	// An admitted half-open connection is closed by the half-close timeout.
	expectClosedByPeer(g, held[1], 5*time.Second)
	g.Expect(e.logs.matching(`"msg"="Closed half-closed vsock relay connection"`, `"sourceCID"=3`)).NotTo(BeEmpty())

	close(stop)
	g.Eventually(served, 10*time.Second).Should(BeClosed())
	g.Expect(<-served).To(Succeed(), "the other guest was served throughout the flood")
	for _, c := range append(held, session) {
		_ = c.Close()
	}
	g.Eventually(func() int { return e.relay.Listeners()[0].ActiveConns }, 10*time.Second).Should(BeZero())
}

// TestRelayGlobalCap: MaxTotalConns bounds the connections over all routes.
func TestRelayGlobalCap(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, relay.Options{MaxTotalConns: 2})
	startServer(t, e.root, targetCID, targetPort, echo)
	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID), e.route("cache", 4001, targetCID, client2CID)})).To(Succeed())
	a, err := e.dial(clientCID, 4000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(echoLine(a, "a\n")).To(Succeed())
	b, err := e.dial(client2CID, 4001)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(echoLine(b, "b\n")).To(Succeed())
	over, err := e.dial(client2CID, 4001)
	g.Expect(err).NotTo(HaveOccurred())
	expectClosedByPeer(g, over, 2*time.Second)
	g.Expect(e.metric(relay.MetricDenials, routeLabels("cache", "reason", relay.ReasonGlobalLimit))).To(Equal(1.0))
	g.Expect(e.relay.Limits()).To(And(HaveField("MaxTotalConns", 2), HaveField("MaxConnsPerCID", relay.DefaultMaxConnsPerCID),
		HaveField("IdleTimeout", relay.DefaultIdleTimeout), HaveField("HalfCloseTimeout", relay.DefaultHalfCloseTimeout)))
}

// TestRelayRevokesWhenTheAllowListShrinks: connections of a CID the new
// allow-list drops are closed and counted; the others stay.
func TestRelayRevokesWhenTheAllowListShrinks(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, relay.Options{})
	startServer(t, e.root, targetCID, targetPort, echo)
	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID, client2CID)})).To(Succeed())
	keep, err := e.dial(clientCID, 4000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(echoLine(keep, "keep\n")).To(Succeed())
	drop, err := e.dial(client2CID, 4000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(echoLine(drop, "drop\n")).To(Succeed())

	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID)})).To(Succeed())
	expectClosedByPeer(g, drop, 2*time.Second)
	g.Expect(e.metric(relay.MetricDenials, routeLabels("db", "reason", relay.ReasonRevoked))).To(Equal(1.0))
	g.Expect(echoLine(keep, "still allowed\n")).To(Succeed())
}

// TestRelayHalfCloseTimeout: a connection whose guest half-closed and whose
// target never finishes is closed after HalfCloseTimeout.
func TestRelayHalfCloseTimeout(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, relay.Options{HalfCloseTimeout: 300 * time.Millisecond})
	hold := make(chan struct{})
	startServer(t, e.root, targetCID, targetPort, func(net.Conn) { <-hold }) // never answers, never closes
	t.Cleanup(func() { close(hold) })                                        // runs before the server's cleanup
	g.Expect(e.relay.Update([]relay.Route{e.route("db", 4000, targetCID, clientCID)})).To(Succeed())
	c, err := e.dial(clientCID, 4000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vsock.CloseWrite(c)).To(Succeed())
	start := time.Now()
	expectClosedByPeer(g, c, 5*time.Second)
	g.Expect(time.Since(start)).To(BeNumerically(">=", 250*time.Millisecond))
}
