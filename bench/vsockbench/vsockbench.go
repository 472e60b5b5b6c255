package vsockbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Test names, as in FastPathBenchmark spec.tests.
const (
	TestStream = "VSOCK_STREAM"
	TestRR     = "VSOCK_RR"
)

// Protocol constants (see the package documentation).
const (
	magic          = "FPVB"
	version        = 1
	headerLen      = len(magic) + 2
	kindStream     = 'S'
	kindRR         = 'R'
	rrMessageSize  = 1
	serverReadSize = 256 << 10 // STREAM receive buffer: the 256 KB socket size of the VMCI paper
)

// StreamOptions configure a VSOCK_STREAM run.
type StreamOptions struct {
	// CID and Port address the server (for the relay: vsock.HostCID and the
	// relay port).
	CID, Port uint32
	// MessageSize is the bytes per write, > 0 (netperf -m).
	MessageSize int
	// Duration is how long to send, > 0 (netperf -l).
	Duration time.Duration
}

// StreamResult is the outcome of a VSOCK_STREAM run.
type StreamResult struct {
	// MessageSize is the bytes per write.
	MessageSize int
	// Messages is the number of complete writes.
	Messages int64
	// BytesSent is what the client wrote; BytesReceived what the server
	// counted (equal unless the connection broke).
	BytesSent, BytesReceived int64
	// Elapsed runs from the first write to the arrival of the server's
	// count, so it includes draining the last bytes.
	Elapsed time.Duration
	// ThroughputMbps is BytesReceived*8 / Elapsed in 10^6 bit/s.
	ThroughputMbps float64
}

// RROptions configure a VSOCK_RR run.
type RROptions struct {
	// CID and Port address the server.
	CID, Port uint32
	// Duration is how long to run transactions, > 0.
	Duration time.Duration
}

// RRResult is the outcome of a VSOCK_RR run of 1-byte transactions.
type RRResult struct {
	// Transactions is the number of completed request/response pairs.
	Transactions int64
	// Elapsed is the time from the first request to the last response.
	Elapsed time.Duration
	// TransactionsPerSec is Transactions / Elapsed.
	TransactionsPerSec float64
	// MeanLatencyMicros and P99LatencyMicros are the mean and the 99th
	// percentile (nearest rank) of the per-transaction round trip, in µs.
	MeanLatencyMicros, P99LatencyMicros float64
}

// Stream runs VSOCK_STREAM against the server at (opts.CID, opts.Port). It
// fails on invalid options, a failed dial or connection, or when ctx ends
// (returning ctx's error).
func Stream(ctx context.Context, tr vsock.Transport, opts StreamOptions) (StreamResult, error) {
	if opts.MessageSize <= 0 || opts.Duration <= 0 {
		return StreamResult{}, fmt.Errorf("failed to run %s: message size %d and duration %s must be positive", TestStream, opts.MessageSize, opts.Duration)
	}
	c, stop, err := open(ctx, tr, opts.CID, opts.Port, kindStream)
	if err != nil {
		return StreamResult{}, err
	}
	defer stop()

	res := StreamResult{MessageSize: opts.MessageSize}
	msg := make([]byte, opts.MessageSize)
	for i := range msg {
		msg[i] = byte(i)
	}
	start := time.Now()
	deadline := start.Add(opts.Duration)
	for time.Now().Before(deadline) {
		n, err := c.Write(msg)
		res.BytesSent += int64(n)
		if err != nil {
			return res, runError(ctx, TestStream, "send", err)
		}
		res.Messages++
	}
	if err := vsock.CloseWrite(c); err != nil {
		return res, runError(ctx, TestStream, "half-close", err)
	}
	var count [8]byte
	if _, err := io.ReadFull(c, count[:]); err != nil {
		return res, runError(ctx, TestStream, "read the server's count from", err)
	}
	res.Elapsed = time.Since(start)
	res.BytesReceived = int64(binary.BigEndian.Uint64(count[:]))
	res.ThroughputMbps = float64(res.BytesReceived) * 8 / res.Elapsed.Seconds() / 1e6
	if res.BytesReceived != res.BytesSent {
		return res, fmt.Errorf("failed to run %s: server counted %d bytes, client sent %d", TestStream, res.BytesReceived, res.BytesSent)
	}
	return res, nil
}

// RR runs VSOCK_RR against the server at (opts.CID, opts.Port). It keeps
// every latency sample (8 bytes per transaction) to compute the percentile.
// It fails on invalid options, a failed dial or connection, or when ctx ends.
func RR(ctx context.Context, tr vsock.Transport, opts RROptions) (RRResult, error) {
	if opts.Duration <= 0 {
		return RRResult{}, fmt.Errorf("failed to run %s: duration %s must be positive", TestRR, opts.Duration)
	}
	c, stop, err := open(ctx, tr, opts.CID, opts.Port, kindRR)
	if err != nil {
		return RRResult{}, err
	}
	defer stop()

	var samples []time.Duration
	var req, resp [rrMessageSize]byte
	start := time.Now()
	deadline := start.Add(opts.Duration)
	last := start
	for last.Before(deadline) {
		if _, err := c.Write(req[:]); err != nil {
			return RRResult{}, runError(ctx, TestRR, "send request to", err)
		}
		if _, err := io.ReadFull(c, resp[:]); err != nil {
			return RRResult{}, runError(ctx, TestRR, "read response from", err)
		}
		if resp != req {
			return RRResult{}, fmt.Errorf("failed to run %s: response %x does not echo request %x", TestRR, resp, req)
		}
		now := time.Now()
		samples = append(samples, now.Sub(last))
		last = now
		req[0]++
	}
	return summarizeRR(samples, last.Sub(start)), nil
}

// summarizeRR turns per-transaction latencies into an RRResult.
func summarizeRR(samples []time.Duration, elapsed time.Duration) RRResult {
	res := RRResult{Transactions: int64(len(samples)), Elapsed: elapsed}
	if len(samples) == 0 || elapsed <= 0 {
		return res
	}
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	slices.Sort(samples)
	rank := int(math.Ceil(0.99*float64(len(samples)))) - 1
	res.TransactionsPerSec = float64(len(samples)) / elapsed.Seconds()
	res.MeanLatencyMicros = float64(sum) / float64(len(samples)) / float64(time.Microsecond)
	res.P99LatencyMicros = float64(samples[rank]) / float64(time.Microsecond)
	return res
}

// open dials the server, sends the header and arranges for ctx to abort
// blocked I/O. stop closes the connection.
func open(ctx context.Context, tr vsock.Transport, cid, port uint32, kind byte) (net.Conn, func(), error) {
	test := map[byte]string{kindStream: TestStream, kindRR: TestRR}[kind]
	c, err := tr.Dial(ctx, cid, port)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to run %s against %d:%d: %w", test, cid, port, err)
	}
	unhook := context.AfterFunc(ctx, func() { _ = c.Close() })
	stop := func() { unhook(); _ = c.Close() }
	hdr := append([]byte(magic), version, kind)
	if _, err := c.Write(hdr); err != nil {
		stop()
		return nil, nil, runError(ctx, test, "send the header to", err)
	}
	return c, stop, nil
}

func runError(ctx context.Context, test, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("failed to run %s: %w", test, ctx.Err())
	}
	return fmt.Errorf("failed to %s the %s server: %w", what, test, err)
}

// Serve answers STREAM and RR clients on ln until ctx ends or ln is closed;
// it then closes ln and open connections, waits for them and returns nil.
// Accept errors other than the close are returned. Connections with a bad
// header are logged and closed.
func Serve(ctx context.Context, ln net.Listener, log logr.Logger) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stopped := make(chan struct{})
	unhook := context.AfterFunc(ctx, func() { _ = ln.Close(); close(stopped) })
	defer func() {
		if unhook() {
			_ = ln.Close()
		}
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-stopped:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("failed to accept benchmark connection on %s: %w", ln.Addr(), err)
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); _ = c.Close() }()
			if err := serveConn(c); err != nil {
				log.Error(err, "Benchmark connection failed", "peer", c.RemoteAddr().String())
			}
		}()
	}
}

func serveConn(c net.Conn) error {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return fmt.Errorf("failed to read benchmark header: %w", err)
	}
	if string(hdr[:len(magic)]) != magic || hdr[len(magic)] != version {
		return fmt.Errorf("failed to parse benchmark header %q: want %q version %d", hdr, magic, version)
	}
	switch hdr[len(magic)+1] {
	case kindStream:
		n, err := discard(c, serverReadSize)
		if err != nil {
			return fmt.Errorf("failed to receive %s payload: %w", TestStream, err)
		}
		var count [8]byte
		binary.BigEndian.PutUint64(count[:], uint64(n))
		if _, err := c.Write(count[:]); err != nil {
			return fmt.Errorf("failed to send %s count: %w", TestStream, err)
		}
		return nil
	case kindRR:
		var b [rrMessageSize]byte
		for {
			if _, err := io.ReadFull(c, b[:]); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return fmt.Errorf("failed to read %s request: %w", TestRR, err)
			}
			if _, err := c.Write(b[:]); err != nil {
				return fmt.Errorf("failed to send %s response: %w", TestRR, err)
			}
		}
	default:
		return fmt.Errorf("failed to parse benchmark header %q: unknown test %q", hdr, hdr[len(magic)+1])
	}
}

// discard reads r to EOF with a buffer of size bytes and returns the count.
// (io.Copy to io.Discard would read with an 8 KiB buffer.)
func discard(r io.Reader, size int) (int64, error) {
	buf := make([]byte, size)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
