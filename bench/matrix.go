package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// Matrix is the set of points a benchmark measures (docs/design.md §3.1
// FastPathBenchmark spec, §5.1).
type Matrix struct {
	// Tests are test names: results.TCPStream, results.TCPRR, and whatever
	// other Tools the Runner has (VSOCK_STREAM, VSOCK_RR).
	Tests []string
	// SocketSizes are socket buffer sizes in bytes; 0 means the kernel default.
	SocketSizes []int
	// MessageSizes are the send sizes of stream tests in bytes.
	MessageSizes []int
	// RRSizes are the request (= response) sizes of RR tests (TCP_RR,
	// TCP_CRR, VSOCK_RR) in bytes.
	RRSizes []int
	// UDPSizes are the datagram sizes of UDP_STREAM in bytes; empty means
	// DefaultUDPMessageBytes. They must fit the smallest path MTU (MTU - 28)
	// or IP fragments them.
	UDPSizes []int
	// Sessions are the numbers of concurrent sessions per pair.
	Sessions []int
	// Pairs are the numbers of client/server pairs at once; a Path needs at
	// least max(Pairs) endpoints.
	Pairs []int
	// Duration of each test, whole seconds.
	Duration time.Duration
	// Repetitions of each point on each path; the median is reported.
	Repetitions int
}

// DefaultUDPMessageBytes is the UDP_STREAM datagram size when
// Matrix.UDPSizes is empty: 1500 - 20 (IPv4 header) - 8 (UDP header), the
// largest that fits the baseline's 1500-byte MTU unfragmented.
const DefaultUDPMessageBytes = 1472

// MaxUDPMessageBytes is the largest UDP payload over IPv4.
const MaxUDPMessageBytes = 65507

// DefaultMatrix is the papers' matrix (docs/design.md §1 and §5.1, from the VMCI
// and multi-VM papers): TCP_STREAM × socket {64 KiB, 256 KiB} × message
// {512 B, 4 KiB, 16 KiB, 64 KiB} × sessions {1, 5}, plus TCP_RR with 1-byte
// messages, 60 s runs, 3 repetitions, one pair.
func DefaultMatrix() Matrix {
	return Matrix{
		Tests:        []string{results.TCPStream, results.TCPRR},
		SocketSizes:  []int{64 << 10, 256 << 10},
		MessageSizes: []int{512, 4 << 10, 16 << 10, 64 << 10},
		RRSizes:      []int{1},
		Sessions:     []int{1, 5},
		Pairs:        []int{1},
		Duration:     60 * time.Second,
		Repetitions:  3,
	}
}

// Validate checks that every list is non-empty and its values are in range.
func (m Matrix) Validate() error {
	positive := func(name string, xs []int, min int) error {
		if len(xs) == 0 {
			return fmt.Errorf("failed to validate matrix: no %s", name)
		}
		for _, x := range xs {
			if x < min {
				return fmt.Errorf("failed to validate matrix: %s %d must be at least %d", name, x, min)
			}
		}
		return nil
	}
	if len(m.Tests) == 0 {
		return fmt.Errorf("failed to validate matrix: no tests")
	}
	hasStream, hasRR := false, false
	for _, t := range m.Tests {
		if results.IsRR(t) {
			hasRR = true
		} else {
			hasStream = true
		}
	}
	for _, u := range m.UDPSizes {
		if u < 1 || u > MaxUDPMessageBytes {
			return fmt.Errorf("failed to validate matrix: UDP message size %d must be 1-%d", u, MaxUDPMessageBytes)
		}
	}
	checks := []struct {
		name string
		xs   []int
		min  int
		need bool
	}{
		{"socket sizes", m.SocketSizes, 0, true},
		{"message sizes", m.MessageSizes, 1, hasStream},
		{"RR sizes", m.RRSizes, 1, hasRR},
		{"session counts", m.Sessions, 1, true},
		{"pair counts", m.Pairs, 1, true},
	}
	for _, c := range checks {
		if !c.need {
			continue
		}
		if err := positive(c.name, c.xs, c.min); err != nil {
			return err
		}
	}
	if m.Duration < time.Second || m.Duration%time.Second != 0 {
		return fmt.Errorf("failed to validate matrix: duration %s must be whole seconds, at least 1s", m.Duration)
	}
	if m.Repetitions < 1 {
		return fmt.Errorf("failed to validate matrix: repetitions %d must be at least 1", m.Repetitions)
	}
	return nil
}

// Points lists the matrix in run order: by test, then socket size, message
// size, sessions and pairs, each in the order given. VSOCK tests run at
// socket size 0 only: vsockbench sets no socket buffer sizes, so a point per
// socket size would repeat one measurement under different labels.
func (m Matrix) Points() []results.Point {
	var pts []results.Point
	for _, test := range m.Tests {
		sizes := m.MessageSizes
		switch {
		case results.IsRR(test):
			sizes = m.RRSizes
		case test == results.UDPStream:
			sizes = m.udpSizes()
		}
		socks := m.SocketSizes
		if IsVSock(test) {
			socks = []int{0}
		}
		for _, sock := range socks {
			for _, msg := range sizes {
				for _, s := range m.Sessions {
					for _, p := range m.Pairs {
						pts = append(pts, results.Point{Test: test, SocketBytes: sock, MessageBytes: msg, Sessions: s, Pairs: p})
					}
				}
			}
		}
	}
	return pts
}

func (m Matrix) udpSizes() []int {
	if len(m.UDPSizes) == 0 {
		return []int{DefaultUDPMessageBytes}
	}
	return m.UDPSizes
}

// IsVSock reports whether test is one of the vsock tests (VSOCK_STREAM,
// VSOCK_RR) that the VSock tool runs.
func IsVSock(test string) bool {
	return test == results.VSockStream || test == results.VSockRR
}

// MaxPairs is the largest pair count, the number of endpoints a path needs.
func (m Matrix) MaxPairs() int {
	if len(m.Pairs) == 0 {
		return 0
	}
	return slices.Max(m.Pairs)
}

// Estimate is the time the matrix takes on n paths, counting only the tests
// themselves (each netperf adds a few tens of milliseconds of setup).
func (m Matrix) Estimate(n int) time.Duration {
	return time.Duration(len(m.Points())*m.Repetitions*n) * m.Duration
}
