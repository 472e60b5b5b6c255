package relay_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// Emulated CIDs used by the tests (UNIX-socket vsock emulation, not AF_VSOCK).
const (
	clientCID  uint32 = 3 // guest A, allowed
	client2CID uint32 = 4 // guest allowed only after a route update
	strangeCID uint32 = 9 // a guest of another attachment, never allowed
	targetCID  uint32 = 5 // guest B offering the service
	target2CID uint32 = 6 // another service VM
	targetPort uint32 = 5432
)

var attachment = types.NamespacedName{Namespace: "apps", Name: "db-link"}

// env is a relay on the emulated host CID 2 under one temporary root.
type env struct {
	t     *testing.T
	root  string
	reg   *prometheus.Registry
	relay *relay.Relay
	logs  *logSink
}

func newEnv(t *testing.T, opts relay.Options) *env {
	t.Helper()
	return newEnvOver(t, opts, func(tr vsock.Transport) vsock.Transport { return tr })
}

// newEnvOver is newEnv with the relay's transport wrapped by wrap, e.g. in
// copyPathTransport to take the copy path real AF_VSOCK takes.
func newEnvOver(t *testing.T, opts relay.Options, wrap func(vsock.Transport) vsock.Transport) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), reg: prometheus.NewRegistry(), logs: &logSink{}}
	opts.Transport = wrap(vsock.NewUnixTransport(e.root, vsock.HostCID))
	opts.Registerer = e.reg
	opts.Logger = e.logs.logger(t)
	r, err := relay.New(opts)
	if err != nil {
		t.Fatalf("failed to create relay: %v", err)
	}
	e.relay = r
	t.Cleanup(func() { _ = r.Close() })
	return e
}

func (e *env) route(service string, listenPort, target uint32, allowed ...uint32) relay.Route {
	return relay.Route{Attachment: attachment, Service: service, ListenPort: listenPort,
		TargetCID: target, TargetPort: targetPort, AllowedCIDs: allowed}
}

// dial connects guest cid to the relay port on the host CID.
func (e *env) dial(cid, port uint32) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := vsock.NewUnixTransport(e.root, cid).Dial(ctx, vsock.HostCID, port)
	if err == nil {
		e.t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// metric returns the value of the counter or gauge name with exactly the
// given labels, 0 when the series does not exist.
func (e *env) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatalf("failed to gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if len(got) != len(labels) {
				continue
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func routeLabels(service string, extra ...string) map[string]string {
	l := map[string]string{"attachment": attachment.String(), "service": service}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// logSink keeps the relay's log lines for assertions and echoes them to t.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger(t *testing.T) logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		s.lines = append(s.lines, args)
		s.mu.Unlock()
		t.Log(prefix, args)
	}, funcr.Options{Verbosity: 1})
}

func (s *logSink) matching(parts ...string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
line:
	for _, l := range s.lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue line
			}
		}
		out = append(out, l)
	}
	return out
}

// server is an emulated guest service behind the relay. Each connection is
// handled by handler; accepted counts connections and peers records the
// peer CIDs it saw.
type server struct {
	accepted atomic.Int64
	mu       sync.Mutex
	peers    []uint32
	conns    map[net.Conn]struct{}
}

func startServer(t *testing.T, root string, cid, port uint32, handler func(net.Conn)) *server {
	t.Helper()
	ln, err := vsock.NewUnixTransport(root, cid).Listen(port)
	if err != nil {
		t.Fatalf("failed to listen: %v", err)
	}
	s := &server{conns: map[net.Conn]struct{}{}}
	var handlers sync.WaitGroup
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			if peer, err := vsock.PeerCID(c); err == nil {
				s.peers = append(s.peers, peer)
			}
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			handlers.Add(1)
			go func() { defer handlers.Done(); defer c.Close(); handler(c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-acceptDone
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		handlers.Wait()
	})
	return s
}

func (s *server) peerCIDs() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint32(nil), s.peers...)
}

// echo copies everything back and half-closes at EOF.
func echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = vsock.CloseWrite(c)
	_, _ = io.Copy(io.Discard, c)
}

// echoLine writes line and reads it back through c.
func echoLine(c net.Conn, line string) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, line); err != nil {
		return fmt.Errorf("failed to write: %w", err)
	}
	got := make([]byte, len(line))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("failed to read: %w", err)
	}
	if string(got) != line {
		return fmt.Errorf("echo mismatch: got %q want %q", got, line)
	}
	return nil
}

// expectClosedByPeer asserts that reading c ends with EOF (or a reset)
// before the deadline, i.e. the relay closed it, not a timeout.
func expectClosedByPeer(g Gomega, c net.Conn, within time.Duration) {
	g.Expect(c.SetReadDeadline(time.Now().Add(within))).To(Succeed())
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) {
		g.Expect(ne.Timeout()).To(BeFalse(), "connection still open after %s", within)
	}
}

// patternChunk is the unit of the test stream: a random block stamped with
// the chunk index, so every chunk differs and any loss, duplication or
// reordering changes the checksum.
const patternChunk = 1 << 20

// sendPattern writes total bytes of the stream of seed to w and returns
// their sha256.
func sendPattern(w io.Writer, seed uint64, total int64) ([32]byte, error) {
	block := make([]byte, patternChunk)
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1}))
	for i := 0; i < len(block); i += 8 {
		binary.LittleEndian.PutUint64(block[i:], rng.Uint64())
	}
	h := sha256.New()
	for idx := uint64(0); total > 0; idx++ {
		binary.LittleEndian.PutUint64(block, idx)
		n := min(int64(len(block)), total)
		h.Write(block[:n])
		if _, err := w.Write(block[:n]); err != nil {
			return [32]byte{}, fmt.Errorf("failed to write chunk %d: %w", idx, err)
		}
		total -= n
	}
	return [32]byte(h.Sum(nil)), nil
}

// receiveHash reads r to EOF with a large buffer and returns the byte count
// and sha256.
func receiveHash(r io.Reader) (int64, [32]byte, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, r, make([]byte, 1<<20))
	return n, [32]byte(h.Sum(nil)), err
}
