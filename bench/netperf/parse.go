package netperf

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// Result is what one netperf run reported.
type Result struct {
	// ThroughputMbps in 10^6 bit/s. For RR tests it is the payload rate of
	// both directions, TransactionsPerSec × (RequestBytes+ResponseBytes) × 8 / 10^6.
	ThroughputMbps float64
	// ElapsedSec is netperf's measured test time in seconds.
	ElapsedSec float64
	// LocalSocketBytes and RemoteSocketBytes are the final local send and
	// remote receive socket buffer sizes (LSS_SIZE_END, RSR_SIZE_END); 0 when
	// netperf did not know them (it prints -1).
	LocalSocketBytes, RemoteSocketBytes int
	// MSSBytes is the TCP maximum segment size; 0 when unknown.
	MSSBytes int
	// TransactionsPerSec, RequestBytes, ResponseBytes, MeanLatencyUs and
	// P99LatencyUs (round trip, microseconds) are set by RR tests only.
	TransactionsPerSec          float64
	RequestBytes, ResponseBytes int
	MeanLatencyUs, P99LatencyUs float64

	// LocalCPUUtilPercent and RemoteCPUUtilPercent are the client's and the
	// server's CPU utilisation in percent of all their CPUs (LOCAL_CPU_UTIL,
	// REMOTE_CPU_UTIL). netperf on Linux reads /proc/stat, so both are
	// host-wide: on one host they are the same measurement.
	LocalCPUUtilPercent, RemoteCPUUtilPercent float64
	// LocalServiceDemandUsPerKB and RemoteServiceDemandUsPerKB are the
	// microseconds of CPU per KiB of payload on each end (LOCAL_SD,
	// REMOTE_SD; usec/Tran output is converted with the request and
	// response sizes).
	LocalServiceDemandUsPerKB, RemoteServiceDemandUsPerKB float64
	// CPUMethod is LOCAL_CPU_METHOD, "S" (/proc/stat) on Linux.
	CPUMethod string
	// CPUScope is results.CPUScopeHost when the run's Spec.SameHost was set,
	// else results.CPUScopeEndpoints; Run sets it, Parse leaves it empty.
	CPUScope string
	// MessagesSent and MessagesReceived are the UDP datagrams sent and
	// received (UDP_STREAM only).
	MessagesSent, MessagesReceived int64
}

// ServiceDemandUsPerKB is the CPU cost per KiB the run reports once: the
// host-wide LocalServiceDemandUsPerKB when client and server share a host
// (CPUScope "host": the remote figure is the same CPUs again), else the sum
// of both ends.
func (r Result) ServiceDemandUsPerKB() float64 {
	if r.CPUScope == results.CPUScopeHost {
		return r.LocalServiceDemandUsPerKB
	}
	return r.LocalServiceDemandUsPerKB + r.RemoteServiceDemandUsPerKB
}

// Session converts r into the results shape for session number session of
// pair pair against endpoint.
func (r Result) Session(pair, session int, endpoint string) results.Session {
	s := results.Session{
		Pair: pair, Session: session, Endpoint: endpoint,
		ThroughputMbps: r.ThroughputMbps, TransactionsPerSec: r.TransactionsPerSec,
		MeanLatencyUs: r.MeanLatencyUs, P99LatencyUs: r.P99LatencyUs,
		ElapsedSec: r.ElapsedSec, LocalSocketBytes: r.LocalSocketBytes,
		RemoteSocketBytes: r.RemoteSocketBytes, MSSBytes: r.MSSBytes,
		CPUUtilPercent: r.LocalCPUUtilPercent, ServiceDemandUsPerKB: r.ServiceDemandUsPerKB(),
		CPUScope: r.CPUScope, MessagesSent: r.MessagesSent, MessagesReceived: r.MessagesReceived,
	}
	if r.CPUScope == results.CPUScopeEndpoints {
		s.RemoteCPUUtilPercent = r.RemoteCPUUtilPercent
	}
	return s
}

// LossPercent is the share of UDP datagrams sent that were not received, in
// percent; 0 for other tests.
func (r Result) LossPercent() float64 {
	if r.MessagesSent <= 0 {
		return 0
	}
	return results.LossPercent(r.MessagesSent, r.MessagesReceived)
}

// unitMbps maps netperf's THROUGHPUT_UNITS to a factor into 10^6 bit/s.
// netperf's lower-case -f units are powers of ten of bits, the upper-case
// ones powers of two of bytes (netperf manual, global option -f).
var unitMbps = map[string]float64{
	"10^3bits/s": 1e-3,
	"10^6bits/s": 1,
	"10^9bits/s": 1e3,
	"KBytes/s":   8 * (1 << 10) / 1e6,
	"MBytes/s":   8 * (1 << 20) / 1e6,
	"GBytes/s":   8 * (1 << 30) / 1e6,
}

// unitTransactions is the THROUGHPUT_UNITS of an RR test run without -f.
const unitTransactions = "Trans/s"

// Parse reads the output of one netperf run of test made with the selectors
// of Selectors(test) (in that order) and -P 0. Only the last non-empty line
// counts, so a banner and header (-P 1) or warnings before it do no harm.
//
// It returns an error wrapping ErrUnparsable when there is no output line,
// the field count differs from the selector count (netperf prints an empty
// field for a selector it does not know), a value is not a finite number, a
// unit is unknown, or the run measured nothing (zero throughput or
// transaction rate, a non-positive elapsed time or mean latency, a negative
// P99 latency, which netperf prints when it kept no histogram, a CPU figure
// of -1, which netperf prints when it did not measure CPU, or a UDP_STREAM
// that sent nothing).
func Parse(test string, stdout []byte) (Result, error) {
	sel, err := Selectors(test)
	if err != nil {
		return Result{}, err
	}
	line := lastLine(string(stdout))
	if line == "" {
		return Result{}, fmt.Errorf("%w: no result line in %q", ErrUnparsable, excerpt(string(stdout)))
	}
	fields := strings.Split(line, ",")
	if len(fields) != len(sel) {
		return Result{}, fmt.Errorf("%w: want %d comma-separated fields (%s), got %d in %q", ErrUnparsable, len(sel), strings.Join(sel, ","), len(fields), excerpt(line))
	}
	var (
		res        Result
		throughput float64
		units      string
		sdUnits    string
	)
	for i, name := range sel {
		v := strings.TrimSpace(fields[i])
		var err error
		switch name {
		case "THROUGHPUT":
			throughput, err = parseFloat(v, 0)
		case "THROUGHPUT_UNITS":
			units = v
			if _, ok := unitMbps[v]; !ok && v != unitTransactions {
				err = fmt.Errorf("unknown units %q", v)
			}
		case "ELAPSED_TIME":
			res.ElapsedSec, err = parseFloat(v, math.SmallestNonzeroFloat64)
		case "LSS_SIZE_END":
			res.LocalSocketBytes, err = parseSize(v)
		case "RSR_SIZE_END":
			res.RemoteSocketBytes, err = parseSize(v)
		case "TRANSPORT_MSS":
			res.MSSBytes, err = parseSize(v)
		case "TRANSACTION_RATE":
			res.TransactionsPerSec, err = parseFloat(v, math.SmallestNonzeroFloat64)
		case "REQUEST_SIZE":
			res.RequestBytes, err = parseSize(v)
		case "RESPONSE_SIZE":
			res.ResponseBytes, err = parseSize(v)
		case "MEAN_LATENCY":
			res.MeanLatencyUs, err = parseFloat(v, math.SmallestNonzeroFloat64)
		case "P99_LATENCY":
			res.P99LatencyUs, err = parseFloat(v, 0)
		case "LOCAL_CPU_UTIL":
			res.LocalCPUUtilPercent, err = parseCPU(v)
		case "REMOTE_CPU_UTIL":
			res.RemoteCPUUtilPercent, err = parseCPU(v)
		case "LOCAL_SD":
			res.LocalServiceDemandUsPerKB, err = parseCPU(v)
		case "REMOTE_SD":
			res.RemoteServiceDemandUsPerKB, err = parseCPU(v)
		case "SD_UNITS":
			sdUnits = v
			if v != sdPerKB && v != sdPerTran {
				err = fmt.Errorf("unknown service demand units %q (want %s or %s)", v, sdPerKB, sdPerTran)
			}
		case "LOCAL_CPU_METHOD":
			res.CPUMethod = v
		case "LOCAL_SEND_CALLS":
			res.MessagesSent, err = parseCount(v)
		case "REMOTE_RECV_CALLS":
			res.MessagesReceived, err = parseCount(v)
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: field %d (%s) of %q: %v", ErrUnparsable, i+1, name, excerpt(line), err)
		}
	}
	if results.IsRR(test) {
		res.ThroughputMbps = res.TransactionsPerSec * float64(res.RequestBytes+res.ResponseBytes) * 8 / 1e6
		if !(res.ThroughputMbps > 0) {
			return Result{}, fmt.Errorf("%w: request and response sizes are zero in %q", ErrUnparsable, excerpt(line))
		}
		if sdUnits == sdPerTran {
			// usec per transaction into usec per KiB of both directions.
			kib := float64(res.RequestBytes+res.ResponseBytes) / 1024
			res.LocalServiceDemandUsPerKB /= kib
			res.RemoteServiceDemandUsPerKB /= kib
		}
		return checkFinite(res, line)
	}
	if sdUnits == sdPerTran {
		return Result{}, fmt.Errorf("%w: %s service demand in %s in %q", ErrUnparsable, test, sdUnits, excerpt(line))
	}
	if test == results.UDPStream && res.MessagesSent == 0 {
		return Result{}, fmt.Errorf("%w: UDP_STREAM sent no datagrams in %q", ErrUnparsable, excerpt(line))
	}
	if units == unitTransactions {
		return Result{}, fmt.Errorf("%w: %s throughput in %s in %q", ErrUnparsable, test, units, excerpt(line))
	}
	res.ThroughputMbps = throughput * unitMbps[units]
	if !(res.ThroughputMbps > 0) {
		return Result{}, fmt.Errorf("%w: zero throughput in %q", ErrUnparsable, excerpt(line))
	}
	return checkFinite(res, line)
}

// checkFinite rejects a throughput that overflowed in the unit conversion.
func checkFinite(res Result, line string) (Result, error) {
	if math.IsInf(res.ThroughputMbps, 0) {
		return Result{}, fmt.Errorf("%w: throughput overflows in %q", ErrUnparsable, excerpt(line))
	}
	return res, nil
}

// parseFloat parses a finite number that is at least min.
func parseFloat(s string, min float64) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < min {
		return 0, fmt.Errorf("value %q out of range (want a finite number >= %g)", s, min)
	}
	return v, nil
}

// Service demand units (SD_UNITS): per KiB with -f m, per transaction for
// RR tests without -f.
const (
	sdPerKB   = "usec/KB"
	sdPerTran = "usec/Tran"
)

// parseCPU parses a CPU utilisation or service demand: netperf prints -1
// when it did not measure CPU (no -c/-C), which is an error here because
// every run asks for it.
func parseCPU(s string) (float64, error) {
	v, err := parseFloat(s, -1)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("CPU not measured (%s): netperf needs -c -C", s)
	}
	return v, nil
}

// parseCount parses a non-negative call count.
func parseCount(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("not a count: %q", s)
	}
	return v, nil
}

// parseSize parses a byte count; netperf prints -1 for "unknown", which
// becomes 0.
func parseSize(s string) (int, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", s)
	}
	if v < -1 {
		return 0, fmt.Errorf("size %d out of range", v)
	}
	if v == -1 {
		return 0, nil
	}
	return int(v), nil
}

// lastLine returns the last line of s that is not blank, trimmed.
func lastLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// excerpt shortens s to at most 300 bytes for error messages.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	const max = 300
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
