package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
)

// CSVColumns are the columns WriteCSV writes, in order. The first thirteen
// are the columns of k8s-netperf's result CSV (cloud-bulldozer/k8s-netperf,
// pkg/archive WriteCSVResult), with the same names and units, so that a run
// of Fastpath can be put beside k8s-netperf's; the rest are Fastpath's own.
// docs/benchmarks.md ("CSV") says what each holds; a test checks that it
// lists every one.
var CSVColumns = []string{
	// k8s-netperf's columns.
	"Driver", "Profile", "Same node", "Host Network", "Service", "Duration", "Parallelism",
	"# of Samples", "Message Size", "Avg Throughput", "Throughput Metric",
	"99%tile Observed Latency", "Latency Metric",
	// Fastpath's.
	"Path", "VM", "Socket Size", "Sessions", "Pairs", "MTU",
	"Median Throughput", "Min Throughput", "Max Throughput", "Mean Latency",
	"Service Demand", "CPU Scope", "UDP Loss Percent", "Schema Version",
}

// Throughput metrics of the "Throughput Metric" column: k8s-netperf's units,
// 10^6 bit/s for stream tests and transactions per second for
// request/response tests.
const (
	CSVMetricMbps = "Mb/s"
	CSVMetricOps  = "OP/s"
	// CSVLatencyMetric is the unit of the latency columns, microseconds.
	CSVLatencyMetric = "usec"
)

// CSVOptions says what a document does not record about the runs it holds.
type CSVOptions struct {
	// VM is true when the endpoints were virtual machines (a
	// FastPathBenchmark of mode VM, or real guests in the local
	// environment), false for pods or network namespaces.
	VM bool
}

// WriteCSV writes doc's runs to w as CSV: a header of CSVColumns, then one
// row per Run in document order. Numbers are plain decimals (six places
// for measured figures, as k8s-netperf writes them); a figure that was not
// measured is an empty cell.
//
// The k8s-netperf columns hold: Driver "netperf" (VSOCK_* tests:
// "fastpath-bench"); Profile the test; Same node "true" (Fastpath measures
// same-node paths only: Pod mode pins both endpoints to one node, VM mode
// benchmarks the co-located VMs of an attachment, the local benchmark runs
// on one host); Host Network and Service "false" (no path is the host's
// network namespace or a Service); Duration the median of the sessions'
// measured seconds, rounded; Parallelism the netperf processes at once
// (sessions × pairs); # of Samples the repetitions; Message Size in bytes;
// Avg Throughput the mean over repetitions in Throughput Metric (Mb/s for
// stream tests, OP/s, i.e. transactions per second, for RR tests);
// 99%tile Observed Latency the mean over repetitions of the P99 round-trip
// latency in usec (RR tests; a repetition's P99 is its sessions' largest,
// see Sample.P99LatencyUs).
//
// Fastpath's columns: Path; VM (opts.VM); Socket Size in bytes (0: the
// kernel default); Sessions per pair; Pairs; MTU in bytes; Median, Min and
// Max Throughput over repetitions in Throughput Metric; Mean Latency, the
// median mean round-trip latency in usec (RR tests); Service Demand, the
// median CPU per payload in usec/KB (KB = 1024 bytes); CPU Scope (host or
// endpoints); UDP Loss Percent, the median share of datagrams lost
// (UDP_STREAM); Schema Version of results.json (SchemaVersion).
func WriteCSV(w io.Writer, doc Document, opts CSVOptions) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("failed to write CSV header: %w", err)
	}
	for _, r := range doc.Runs {
		if err := cw.Write(csvRow(r, opts)); err != nil {
			return fmt.Errorf("failed to write CSV row of %s %s: %w", r.Path, r.Point(), err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("failed to write CSV: %w", err)
	}
	return nil
}

func csvRow(r Run, opts CSVOptions) []string {
	driver := "netperf"
	if r.Test == VSockStream || r.Test == VSockRR {
		driver = "fastpath-bench"
	}
	// The figure in the Throughput Metric, per repetition.
	metric, perSample := CSVMetricMbps, func(s Sample) float64 { return s.ThroughputMbps }
	if IsRR(r.Test) {
		metric, perSample = CSVMetricOps, func(s Sample) float64 { return s.TransactionsPerSec }
	}
	var tp, p99, elapsed []float64
	for _, s := range r.Samples {
		if v := perSample(s); v > 0 {
			tp = append(tp, v)
		}
		if s.P99LatencyUs > 0 {
			p99 = append(p99, s.P99LatencyUs)
		}
		for _, ss := range s.PerSession {
			if ss.ElapsedSec > 0 {
				elapsed = append(elapsed, ss.ElapsedSec)
			}
		}
	}
	duration := ""
	if len(elapsed) > 0 {
		duration = strconv.Itoa(int(math.Round(Median(elapsed))))
	}
	return []string{
		driver, r.Test, "true", "false", "false", duration,
		strconv.Itoa(r.Sessions * r.Pairs), strconv.Itoa(len(r.Samples)), strconv.Itoa(r.MessageBytes),
		decimal(mean(tp)), metric, decimal(mean(p99)), CSVLatencyMetric,
		r.Path, strconv.FormatBool(opts.VM), strconv.Itoa(r.SocketBytes), strconv.Itoa(r.Sessions), strconv.Itoa(r.Pairs), optionalInt(r.MTU),
		decimal(Median(tp)), decimal(minOf(tp)), decimal(maxOf(tp)), decimal(r.MeanLatencyUs),
		decimal(r.ServiceDemandUsPerKB), r.CPUScope, loss(r), strconv.Itoa(SchemaVersion),
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// decimal renders a measured figure with six decimals, "" for 0 (not
// measured: a measured figure is never 0, see Run).
func decimal(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 6, 64)
}

func optionalInt(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

// loss is a UDP_STREAM run's median loss ("0.000000" when nothing was
// lost), "" for other tests.
func loss(r Run) string {
	if r.Test != UDPStream {
		return ""
	}
	return strconv.FormatFloat(r.LossPercent, 'f', 6, 64)
}
