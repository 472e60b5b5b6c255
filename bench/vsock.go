package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/vsockbench"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// VSock is the Tool for VSOCK_STREAM and VSOCK_RR (bench/vsockbench),
// which netperf cannot run. An Endpoint names the server by context ID and
// port: Host is the CID in decimal and Port the vsock port, e.g. "2" and the
// relay port to go through the node's sibling relay, or a guest CID and its
// port to reach a `fastpath-bench vsock-server` directly. The client runs in
// this process over Transport (Endpoint.Executor is not used).
//
// VSOCK_STREAM sends MessageBytes per write; VSOCK_RR runs 1-byte
// transactions only (vsockbench's protocol), so an RR point with another
// size is an error. Socket buffer sizes are not set (Matrix.Points gives
// vsock tests the single socket size 0).
type VSock struct {
	// Transport dials the servers: vsock.AFVSockTransport on a node or in a
	// guest, a *vsock.UnixTransport for the emulation.
	Transport vsock.Transport
}

// RunSession implements Tool with one vsockbench.Stream or vsockbench.RR
// run. Errors name the test and the endpoint "cid:port".
func (v VSock) RunSession(ctx context.Context, ep Endpoint, pt results.Point, duration time.Duration) (results.Session, error) {
	cid, err := strconv.ParseUint(ep.Host, 10, 32)
	if err != nil {
		return results.Session{}, fmt.Errorf("failed to run %s against %q: the host of a vsock endpoint must be a context ID (a decimal uint32): %w", pt.Test, ep.Host, err)
	}
	if ep.Port < 1 {
		return results.Session{}, fmt.Errorf("failed to run %s against CID %d: the endpoint needs a vsock port (cid:port)", pt.Test, cid)
	}
	if v.Transport == nil {
		return results.Session{}, fmt.Errorf("failed to run %s against %d:%d: no vsock transport", pt.Test, cid, ep.Port)
	}
	s := results.Session{Endpoint: fmt.Sprintf("%d:%d", cid, ep.Port)}
	switch pt.Test {
	case results.VSockStream:
		res, err := vsockbench.Stream(ctx, v.Transport, vsockbench.StreamOptions{CID: uint32(cid), Port: uint32(ep.Port), MessageSize: pt.MessageBytes, Duration: duration})
		if err != nil {
			return results.Session{}, fmt.Errorf("failed to run %s against %s: %w", pt.Test, s.Endpoint, err)
		}
		s.ThroughputMbps, s.ElapsedSec = res.ThroughputMbps, res.Elapsed.Seconds()
	case results.VSockRR:
		if pt.MessageBytes != 1 {
			return results.Session{}, fmt.Errorf("failed to run %s against %s: request/response size %d: vsockbench runs 1-byte transactions only (--rr-sizes 1)", pt.Test, s.Endpoint, pt.MessageBytes)
		}
		res, err := vsockbench.RR(ctx, v.Transport, vsockbench.RROptions{CID: uint32(cid), Port: uint32(ep.Port), Duration: duration})
		if err != nil {
			return results.Session{}, fmt.Errorf("failed to run %s against %s: %w", pt.Test, s.Endpoint, err)
		}
		if res.Transactions == 0 {
			return results.Session{}, fmt.Errorf("failed to run %s against %s: no transaction completed in %s", pt.Test, s.Endpoint, duration)
		}
		s.TransactionsPerSec, s.MeanLatencyUs, s.P99LatencyUs = res.TransactionsPerSec, res.MeanLatencyMicros, res.P99LatencyMicros
		// As netperf reports TCP_RR: the payload rate of both directions.
		s.ThroughputMbps = res.TransactionsPerSec * 2 * float64(pt.MessageBytes) * 8 / 1e6
		s.ElapsedSec = res.Elapsed.Seconds()
	default:
		return results.Session{}, fmt.Errorf("failed to run %s: the vsock tool runs %s and %s only", pt.Test, results.VSockStream, results.VSockRR)
	}
	return s, nil
}

// VSockClientOutput is the JSON document `fastpath-bench vsock-client`
// prints: the test, the bytes per write (1 for VSOCK_RR), what was emulated
// ("" on real AF_VSOCK) and the measured session.
type VSockClientOutput struct {
	Test         string          `json:"test"`
	MessageBytes int             `json:"messageBytes"`
	Emulated     string          `json:"emulated,omitempty"`
	Session      results.Session `json:"session"`
}

// GuestVSock is the Tool for VSOCK_STREAM and VSOCK_RR when the client runs
// somewhere else, as in a client VM reached over SSH (FastPathBenchmark VM
// mode): it runs `<Binary> vsock-client` through the Endpoint's Executor
// and reads the session from its JSON output (VSockClientOutput). The
// endpoint is "cid" and a vsock port, as for VSock; the client picks its
// transport itself (AF_VSOCK in a guest).
type GuestVSock struct {
	// Binary is the fastpath-bench executable on the far side.
	Binary string
}

// Argv is the vsock-client command line for one session of pt against ep.
func (g GuestVSock) Argv(ep Endpoint, pt results.Point, duration time.Duration) []string {
	argv := []string{g.Binary, "vsock-client", "--server", fmt.Sprintf("%s:%d", ep.Host, ep.Port), "--test", pt.Test, "--duration", duration.String()}
	if pt.Test == results.VSockStream {
		argv = append(argv, "--message-size", strconv.Itoa(pt.MessageBytes))
	}
	return argv
}

// RunSession implements Tool. Errors name the executor, the endpoint and
// the client's stderr; output that is not a session with a result is an
// error, never a zero.
func (g GuestVSock) RunSession(ctx context.Context, ep Endpoint, pt results.Point, duration time.Duration) (results.Session, error) {
	if pt.Test == results.VSockRR && pt.MessageBytes != 1 {
		return results.Session{}, fmt.Errorf("failed to run %s against %s:%d: request/response size %d: vsockbench runs 1-byte transactions only (--rr-sizes 1)", pt.Test, ep.Host, ep.Port, pt.MessageBytes)
	}
	argv := g.Argv(ep, pt, duration)
	exe := ep.executor()
	stdout, stderr, err := exe.Run(ctx, argv)
	if err != nil {
		return results.Session{}, fmt.Errorf("failed to run %s against %s:%d via %s: %w: %s", pt.Test, ep.Host, ep.Port, exe, err, strings.TrimSpace(string(stderr)))
	}
	var out VSockClientOutput
	if err := json.Unmarshal(stdout, &out); err != nil {
		return results.Session{}, fmt.Errorf("failed to parse the output of %q via %s: %w: %q", strings.Join(argv, " "), exe, err, stdout)
	}
	s := out.Session
	if out.Test != pt.Test || !(s.ThroughputMbps > 0 || s.TransactionsPerSec > 0) {
		return results.Session{}, fmt.Errorf("failed to run %s against %s:%d via %s: the client reported test %q with no result: %q", pt.Test, ep.Host, ep.Port, exe, out.Test, stdout)
	}
	return s, nil
}
