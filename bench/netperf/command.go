package netperf

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// DefaultControlPort is netserver's default control port (netperf manual,
// global option -p).
const DefaultControlPort = 12865

// DefaultBinary is the netperf client looked up in PATH.
const DefaultBinary = "netperf"

// CPUSelectors are asked of every run, which netperf runs with -c -C (CPU
// measured on both ends): the local and remote CPU utilisation in percent of
// all CPUs, the local and remote service demand, its units (usec/KB with -f
// m; usec/Tran without -f for RR tests) and how the local CPU was measured
// ("S": /proc/stat, host-wide, on Linux).
var CPUSelectors = []string{"LOCAL_CPU_UTIL", "REMOTE_CPU_UTIL", "LOCAL_SD", "REMOTE_SD", "SD_UNITS", "LOCAL_CPU_METHOD"}

// StreamSelectors are the omni output selectors asked of TCP_STREAM and
// TCP_MAERTS runs, in output order: throughput and its units, the elapsed
// seconds, the final local send and remote receive socket buffer sizes, the
// TCP MSS, then CPUSelectors.
var StreamSelectors = append([]string{"THROUGHPUT", "THROUGHPUT_UNITS", "ELAPSED_TIME", "LSS_SIZE_END", "RSR_SIZE_END", "TRANSPORT_MSS"}, CPUSelectors...)

// RRSelectors are asked of TCP_RR and TCP_CRR runs: StreamSelectors plus the
// transaction rate, the request and response sizes and the mean and 99th
// percentile round-trip latency in microseconds.
var RRSelectors = append(append([]string(nil), StreamSelectors...), "TRANSACTION_RATE", "REQUEST_SIZE", "RESPONSE_SIZE", "MEAN_LATENCY", "P99_LATENCY")

// UDPSelectors are asked of UDP_STREAM runs: StreamSelectors plus the
// datagrams sent and received, from which the loss follows. THROUGHPUT of a
// UDP_STREAM is what the receiver got.
var UDPSelectors = append(append([]string(nil), StreamSelectors...), "LOCAL_SEND_CALLS", "REMOTE_RECV_CALLS")

// Tests are the netperf tests this package runs.
var Tests = []string{results.TCPStream, results.TCPMaerts, results.UDPStream, results.TCPRR, results.TCPCRR}

// Selectors returns the output selectors used for test (a copy), or an error
// for a test this package does not run.
func Selectors(test string) ([]string, error) {
	switch test {
	case results.TCPStream, results.TCPMaerts:
		return append([]string(nil), StreamSelectors...), nil
	case results.TCPRR, results.TCPCRR:
		return append([]string(nil), RRSelectors...), nil
	case results.UDPStream:
		return append([]string(nil), UDPSelectors...), nil
	}
	return nil, fmt.Errorf("failed to select netperf output for test %q: supported are %s: %w", test, strings.Join(Tests, ", "), ErrUnknownTest)
}

// Spec is one netperf client run.
type Spec struct {
	// Binary is the netperf client; empty means DefaultBinary.
	Binary string
	// Host is the netserver's address or name (netperf -H).
	Host string
	// Port is netserver's control port (netperf -p); 0 means DefaultControlPort.
	Port int
	// Test is one of Tests (netperf -t).
	Test string
	// Duration of the test (netperf -l) in whole seconds, at least 1 s.
	Duration time.Duration
	// SocketBytes sets the local and remote socket buffers (-s/-S); 0 leaves
	// the kernel default and autotuning.
	SocketBytes int
	// MessageBytes is the send size of a stream test (-m) or the request and
	// response size of an RR test (-r n,n); at least 1. A UDP_STREAM message
	// must fit the path MTU (1472 bytes at MTU 1500) or IP fragments it.
	MessageBytes int
	// SameHost says the client and the server share one host (network
	// namespaces, pods on one node): netperf's local and remote CPU figures
	// are then one host-wide measurement, reported once (results.CPUScopeHost).
	SameHost bool
	// Timeout bounds the whole run in Run; 0 means Duration + RunGrace.
	Timeout time.Duration
	// CPUs pins the client and the server's test process (netperf -T
	// local,remote: netperf binds itself with sched_setaffinity and asks
	// netserver to bind the process it forks for the test); nil leaves
	// both to the scheduler.
	CPUs *CPUPair
}

// CPUPair is the CPU numbers of netperf -T: Client for netperf, Server for
// netserver's test process.
type CPUPair struct {
	Client, Server int
}

// String renders p as netperf -T takes it, "client,server".
func (p CPUPair) String() string { return fmt.Sprintf("%d,%d", p.Client, p.Server) }

// ParseCPUPair reads "client,server" (e.g. "0,1"); "" is nil (unpinned).
func ParseCPUPair(s string) (*CPUPair, error) {
	if s == "" {
		return nil, nil
	}
	c, r, ok := strings.Cut(s, ",")
	a, errA := strconv.Atoi(strings.TrimSpace(c))
	b, errB := strconv.Atoi(strings.TrimSpace(r))
	if !ok || errA != nil || errB != nil || a < 0 || b < 0 {
		return nil, fmt.Errorf("failed to parse CPU pair %q: want <client CPU>,<server CPU>, e.g. 0,1", s)
	}
	return &CPUPair{Client: a, Server: b}, nil
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
	case s.CPUs != nil && (s.CPUs.Client < 0 || s.CPUs.Server < 0):
		return fmt.Errorf("failed to validate netperf spec for %s: CPUs %s must not be negative", s.Host, s.CPUs)
	}
	return nil
}

// Command returns the argv of the netperf run, e.g.
//
//	netperf -H 10.0.0.2 -t TCP_STREAM -l 60 -f m -P 0 -c -C -- -s 262144 -S 262144 -m 65536 -o THROUGHPUT,...
//	netperf -H 10.0.0.2 -p 12866 -t TCP_RR -l 60 -f m -P 0 -c -C -j -- -r 1,1 -o THROUGHPUT,...,P99_LATENCY
//	netperf -H 10.0.0.2 -T 0,1 -t TCP_STREAM ... (CPUs set)
//
// -f m fixes the units to 10^6 bit/s (and service demand to usec/KB), -P 0
// drops the banner, -c -C measure CPU locally and remotely, -j keeps the
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
	if s.CPUs != nil {
		argv = append(argv, "-T", s.CPUs.String())
	}
	argv = append(argv, "-t", s.Test, "-l", strconv.Itoa(int(s.Duration/time.Second)), "-f", "m", "-P", "0", "-c", "-C")
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
