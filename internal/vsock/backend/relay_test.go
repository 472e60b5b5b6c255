package backend

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// Emulated vsock addresses of the relay tests (guest CIDs are >= 3).
const (
	testRelayPort  = 20001
	testTargetCID  = 100
	testTargetPort = 5000
	testSourceCID  = 101
)

// relayBackend is a backend server with a real relay over the UNIX-socket
// emulation of AF_VSOCK, served on a real UNIX socket.
type relayBackend struct {
	srv    *Server
	rl     *relay.Relay
	socket string
	root   string // the emulation's root
	stop   func()
}

// serveRelay starts a relay backend whose control socket is in dir and
// whose emulated vsock lives under root; stop (also run at cleanup) ends
// Serve.
func serveRelay(t *testing.T, dir, root string) *relayBackend {
	t.Helper()
	tr := vsock.NewUnixTransport(root, vsock.HostCID)
	reg := prometheus.NewRegistry()
	rl, err := relay.New(relay.Options{Transport: tr, Registerer: reg, MaxTotalConns: 77, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	srv.Relay, srv.RelayEmulation, srv.Metrics = rl, vsock.EmulationNote(tr), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	path := filepath.Join(dir, ControlSocketName)
	go func() { done <- srv.Serve(ctx, path, 0o660) }()
	NewWithT(t).Eventually(func() error { _, err := os.Stat(path); return err }).WithTimeout(5 * time.Second).Should(Succeed())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(func() { stop(); _ = rl.Close() })
	return &relayBackend{srv: srv, rl: rl, socket: path, root: root, stop: stop}
}

func testRoute() relay.Route {
	return relay.Route{Attachment: types.NamespacedName{Namespace: "ns1", Name: "att"}, Service: "echo", ListenPort: testRelayPort,
		TargetCID: testTargetCID, TargetPort: testTargetPort, AllowedCIDs: []uint32{testSourceCID}, MaxConns: 3}
}

// echoGuest listens as the emulated guest (testTargetCID, testTargetPort)
// and echoes every connection until the test ends.
func echoGuest(t *testing.T, root string) {
	t.Helper()
	ln, err := vsock.NewUnixTransport(root, testTargetCID).Listen(testTargetPort)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = vsock.CloseWrite(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

func TestRelayClientProgramsTheBackendRelay(t *testing.T) {
	g := NewWithT(t)
	dir, root := t.TempDir(), t.TempDir()
	b := serveRelay(t, dir, root)
	note := b.srv.RelayEmulation
	c := NewRelayClient(b.socket, note)
	g.Expect(c.Listeners()).To(BeEmpty(), "no answer yet")
	g.Expect(c.Limits()).To(Equal(relay.Limits{}))

	rt := testRoute()
	g.Expect(c.Update([]relay.Route{rt})).To(Succeed())
	// The route crossed the socket whole (JSON round trip) and the relay
	// serves it: a listener at the emulated host CID's port.
	g.Expect(b.rl.Listeners()).To(Equal([]relay.ListenerStatus{{Port: testRelayPort, Attachment: rt.Attachment, Service: "echo",
		TargetCID: testTargetCID, TargetPort: testTargetPort, AllowedCIDs: []uint32{testSourceCID}}}))
	_, err := os.Stat(vsock.NewUnixTransport(root, vsock.HostCID).SocketPath(vsock.HostCID, testRelayPort))
	g.Expect(err).NotTo(HaveOccurred())
	// Listeners and Limits answer from the last reply, as the relay says.
	g.Expect(c.Listeners()).To(Equal(b.rl.Listeners()))
	g.Expect(c.Limits()).To(Equal(b.rl.Limits()))
	g.Expect(c.Limits().MaxTotalConns).To(Equal(77))
	g.Expect(c.Limits().IdleTimeout).To(Equal(time.Duration(-1)))
	rep, err := c.Report()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.BootID).To(Equal(b.srv.BootID()))
	g.Expect(rep.Emulation).To(ContainSubstring("emulated over UNIX sockets"))

	// A refused route is Update's error (422); the good one is still served
	// and reported.
	bad := rt
	bad.Service, bad.ListenPort, bad.TargetCID = "bad", testRelayPort+1, 1
	err = c.Update([]relay.Route{rt, bad})
	g.Expect(err).To(MatchError(ContainSubstring("refused PUT /v1/relay")))
	g.Expect(err).To(MatchError(ContainSubstring("target CID 1 is not a guest CID")))
	g.Expect(c.Listeners()).To(HaveLen(1))
	g.Expect(c.Listeners()[0].Port).To(BeEquivalentTo(testRelayPort))

	// A body that is not a RelayRequest changes nothing.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", b.socket)
	}}}
	req, _ := http.NewRequest(http.MethodPut, "http://x"+RelayPath, strings.NewReader(`{"routes":[],"extra":1}`))
	resp, err := hc.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
	g.Expect(b.rl.Listeners()).To(HaveLen(1))

	// The relay's metrics are served on the same socket.
	resp, err = hc.Get("http://x" + MetricsPath)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(string(body)).To(ContainSubstring(relay.MetricConnectionsActive + `{attachment="ns1/att",service="echo"} 0`))

	// The agent's transport must be the backend's.
	other := NewRelayClient(b.socket, "")
	err = other.Update([]relay.Route{rt})
	g.Expect(err).To(MatchError(ContainSubstring("runs its relay over \"vsock emulated")))
	g.Expect(err).To(MatchError(ContainSubstring("--vsock-transport is AF_VSOCK")))

	// No routes: the listener goes.
	g.Expect(c.Update(nil)).To(Succeed())
	g.Expect(c.Listeners()).To(BeEmpty())
	g.Expect(b.rl.Listeners()).To(BeEmpty())
}

func TestRelayClientSaysWhatIsWrong(t *testing.T) {
	g := NewWithT(t)
	// No server: the socket is named, nothing is reported.
	socket := filepath.Join(t.TempDir(), ControlSocketName)
	c := NewRelayClient(socket, "")
	err := c.Update([]relay.Route{testRoute()})
	g.Expect(err).To(MatchError(ContainSubstring("the vsock backend at " + socket + " is unreachable")))
	g.Expect(c.Listeners()).To(BeEmpty())
	g.Expect(c.Limits()).To(Equal(relay.Limits{}))

	// A backend without a relay (Sibling only) says so.
	dir := t.TempDir()
	serve(t, dir, &fakeSupervisor{})
	c = NewRelayClient(filepath.Join(dir, ControlSocketName), "")
	g.Expect(c.Update([]relay.Route{testRoute()})).To(MatchError(ContainSubstring("runs no relay")))
}

// A backend process that restarts comes back with a new boot ID and no
// routes: the client's poll sends it the last routes again at once.
func TestRelayClientResendsRoutesToARestartedBackend(t *testing.T) {
	g := NewWithT(t)
	dir, root := t.TempDir(), t.TempDir()
	b1 := serveRelay(t, dir, root)
	c := NewRelayClient(b1.socket, b1.srv.RelayEmulation)
	c.PollInterval = 20 * time.Millisecond
	var changes atomic.Int32
	c.OnChange = func() { changes.Add(1) }
	g.Expect(c.Update([]relay.Route{testRoute()})).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() { cancel(); g.Expect(<-ran).To(Succeed()) }()

	b1.stop()
	g.Eventually(func() error { _, err := c.Report(); return err }).Should(MatchError(ContainSubstring("unreachable")))
	g.Expect(c.Listeners()).To(BeEmpty(), "a backend that does not answer serves nothing the agent knows of")
	seen := changes.Load()
	g.Expect(seen).To(BeNumerically(">=", 1), "losing the backend is a change")

	b2 := serveRelay(t, dir, root)
	g.Expect(b2.srv.BootID()).NotTo(Equal(b1.srv.BootID()))
	g.Eventually(b2.rl.Listeners).WithTimeout(5 * time.Second).Should(HaveLen(1))
	g.Eventually(c.Listeners).Should(HaveLen(1))
	g.Expect(changes.Load()).To(BeNumerically(">", seen), "the backend's return is a change")
}

// An agent restart is a new client: it sends the same routes, and the
// backend's relay keeps the listener and the relayed connection, which
// carries every byte in order across it.
func TestRelayedConnectionOutlivesAnAgentRestart(t *testing.T) {
	g := NewWithT(t)
	dir, root := t.TempDir(), t.TempDir()
	b := serveRelay(t, dir, root)
	echoGuest(t, root)
	agent1 := NewRelayClient(b.socket, b.srv.RelayEmulation)
	g.Expect(agent1.Update([]relay.Route{testRoute()})).To(Succeed())

	conn, err := vsock.NewUnixTransport(root, testSourceCID).Dial(context.Background(), vsock.HostCID, testRelayPort)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	const chunk, chunks = 64 << 10, 64
	half := make(chan struct{})
	resume := make(chan struct{})
	sent := sha256.New()
	wrote := make(chan error, 1)
	go func() {
		buf := make([]byte, chunk)
		for i := range chunks {
			if i == chunks/2 {
				close(half)
				<-resume // the agent restarts here, with half the stream in flight or delivered
			}
			for j := 0; j < chunk; j += 8 {
				binary.LittleEndian.PutUint64(buf[j:], uint64(i)<<32|uint64(j))
			}
			sent.Write(buf)
			if _, err := conn.Write(buf); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- vsock.CloseWrite(conn)
	}()
	type result struct {
		n   int64
		sum []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		h := sha256.New()
		n, err := io.Copy(h, conn)
		got <- result{n, h.Sum(nil), err}
	}()

	<-half
	// The agent process goes: its client and its HTTP connections with it.
	agent1.http.CloseIdleConnections()
	agent2 := NewRelayClient(b.socket, b.srv.RelayEmulation)
	g.Expect(agent2.Update([]relay.Route{testRoute()})).To(Succeed())
	ls := agent2.Listeners()
	g.Expect(ls).To(HaveLen(1))
	g.Expect(ls[0].ActiveConns).To(Equal(1), "the relayed connection is still open after the new agent's update")
	close(resume)

	g.Expect(<-wrote).To(Succeed())
	var r result
	g.Eventually(got).WithTimeout(30 * time.Second).Should(Receive(&r))
	g.Expect(r.err).NotTo(HaveOccurred())
	g.Expect(r.n).To(BeEquivalentTo(chunk * chunks))
	g.Expect(r.sum).To(Equal(sent.Sum(nil)), "every byte echoed, in order")
}

// A backend that stops (its pod deleted for an upgrade) ends every relayed
// connection at once: the guest reads EOF or a reset, it does not hang.
func TestBackendStopEndsRelayedConnectionsPromptly(t *testing.T) {
	g := NewWithT(t)
	dir, root := t.TempDir(), t.TempDir()
	b := serveRelay(t, dir, root)
	echoGuest(t, root)
	c := NewRelayClient(b.socket, b.srv.RelayEmulation)
	g.Expect(c.Update([]relay.Route{testRoute()})).To(Succeed())
	conn, err := vsock.NewUnixTransport(root, testSourceCID).Dial(context.Background(), vsock.HostCID, testRelayPort)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	// The connection is relayed end to end before the stop.
	g.Expect(conn.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
	_, err = conn.Write([]byte("ping\n"))
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 5)
	_, err = io.ReadFull(conn, buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf)).To(Equal("ping\n"))

	b.stop()
	g.Expect(conn.SetReadDeadline(time.Now().Add(2 * time.Second))).To(Succeed())
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) {
		g.Expect(ne.Timeout()).To(BeFalse(), "the relayed connection is still open 2 s after the backend stopped")
	}
	_, err = vsock.NewUnixTransport(root, testSourceCID).Dial(context.Background(), vsock.HostCID, testRelayPort)
	g.Expect(err).To(HaveOccurred(), "the relay's listener is gone")
}
