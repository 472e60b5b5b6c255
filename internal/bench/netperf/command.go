package netperf

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/internal/bench/results"
)

// DefaultControlPort is netserver's default control port (netperf manual,
// global option -p).
const DefaultControlPort = 12865

// DefaultBinary is the netperf client looked up in PATH.
const DefaultBinary = "netperf"

// StreamSelectors are the omni output selectors asked of TCP_STREAM runs, in
// output order: throughput and its units, the elapsed seconds, the final
// local send and remote receive socket buffer sizes and the TCP MSS.
var StreamSelectors = []string{"THROUGHPUT", "THROUGHPUT_UNITS", "ELAPSED_TIME", "LSS_SIZE_END", "RSR_SIZE_END", "TRANSPORT_MSS"}

// RRSelectors are asked of TCP_RR runs: StreamSelectors plus the transaction
// rate, the request and response sizes and the mean and 99th percentile
// round-trip latency in microseconds.
var RRSelectors = append(append([]string(nil), StreamSelectors...), "TRANSACTION_RATE", "REQUEST_SIZE", "RESPONSE_SIZE", "MEAN_LATENCY", "P99_LATENCY")

// Selectors returns the output selectors used for test (a copy), or an error
// for a test this package does not run.
func Selectors(test string) ([]string, error) {
	switch test {
	case results.TCPStream:
		return append([]string(nil), StreamSelectors...), nil
	case results.TCPRR:
		return append([]string(nil), RRSelectors...), nil
	}
	return nil, fmt.Errorf("failed to select netperf output for test %q: only %s and %s are supported: %w", test, results.TCPStream, results.TCPRR, ErrUnknownTest)
}

// Spec is one netperf client run.
type Spec struct {
	// Binary is the netperf client; empty means DefaultBinary.
	Binary string
	// Host is the netserver's address or name (netperf -H).
	Host string
	// Port is netserver's control port (netperf -p); 0 means DefaultControlPort.
	Port int
	// Test is results.TCPStream or results.TCPRR (netperf -t).
	Test string
	// Duration of the test (netperf -l) in whole seconds, at least 1 s.
	Duration time.Duration
	// SocketBytes sets the local and remote socket buffers (-s/-S); 0 leaves
	// the kernel default and autotuning.
	SocketBytes int
	// MessageBytes is the send size of a stream test (-m) or the request and
	// response size of an RR test (-r n,n); at least 1.
	MessageBytes int
	// Timeout bounds the whole run in Run; 0 means Duration + RunGrace.
	Timeout time.Duration
}

// Endpoint returns "host:port" of the netserver, e.g. "10.0.0.2:12865".
func (s Spec) Endpoint() string {
	port := s.Port
	if port == 0 {
		port = DefaultControlPort
	}
	return net.JoinHostPort(s.Host, strconv.Itoa(port))
}

// Validate checks the fields Command needs.
func (s Spec) Validate() error {
	if _, err := Selectors(s.Test); err != nil {
		return err
	}
	switch {
	case s.Host == "" || strings.HasPrefix(s.Host, "-"):
		return fmt.Errorf("failed to validate netperf spec: host %q must be a name or address", s.Host)
	case s.Port < 0 || s.Port > 65535:
		return fmt.Errorf("failed to validate netperf spec for %s: port %d out of range 0-65535", s.Host, s.Port)
	case s.Duration < time.Second || s.Duration%time.Second != 0:
		return fmt.Errorf("failed to validate netperf spec for %s: duration %s must be whole seconds, at least 1s", s.Host, s.Duration)
	case s.SocketBytes < 0:
		return fmt.Errorf("failed to validate netperf spec for %s: socket size %d must not be negative", s.Host, s.SocketBytes)
	case s.MessageBytes < 1:
		return fmt.Errorf("failed to validate netperf spec for %s: message size %d must be at least 1", s.Host, s.MessageBytes)
	}
	return nil
}

// Command returns the argv of the netperf run, e.g.
//
//	netperf -H 10.0.0.2 -t TCP_STREAM -l 60 -f m -P 0 -- -s 262144 -S 262144 -m 65536 -o THROUGHPUT,...
//	netperf -H 10.0.0.2 -p 12866 -t TCP_RR -l 60 -f m -P 0 -j -- -r 1,1 -o THROUGHPUT,...,P99_LATENCY
//
// -f m fixes the units to 10^6 bit/s, -P 0 drops the banner, -j keeps the
// latency statistics RR tests report.
func (s Spec) Command() ([]string, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	sel, _ := Selectors(s.Test)
	bin := s.Binary
	if bin == "" {
		bin = DefaultBinary
	}
	argv := []string{bin, "-H", s.Host}
	if s.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(s.Port))
	}
	argv = append(argv, "-t", s.Test, "-l", strconv.Itoa(int(s.Duration/time.Second)), "-f", "m", "-P", "0")
	rr := results.IsRR(s.Test)
	if rr {
		argv = append(argv, "-j")
	}
	argv = append(argv, "--")
	if s.SocketBytes > 0 {
		argv = append(argv, "-s", strconv.Itoa(s.SocketBytes), "-S", strconv.Itoa(s.SocketBytes))
	}
	if rr {
		argv = append(argv, "-r", fmt.Sprintf("%d,%d", s.MessageBytes, s.MessageBytes))
	} else {
		argv = append(argv, "-m", strconv.Itoa(s.MessageBytes))
	}
	return append(argv, "-o", strings.Join(sel, ",")), nil
}
