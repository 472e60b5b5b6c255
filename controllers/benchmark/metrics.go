package benchmark

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Prometheus gauges of finished benchmarks, on controller-runtime's registry
// (served by the manager's metrics endpoint). Labels: namespace, benchmark and,
// per path, path. A benchmark's series are removed when it is deleted or
// starts a new run.
var (
	throughputMbps = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_throughput_mbps",
		Help: "Best single-pair TCP_STREAM median of the last finished run of a FastPathBenchmark, per path, in 10^6 bit/s.",
	}, []string{"namespace", "benchmark", "path"})
	latencyMicroseconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_latency_microseconds",
		Help: "Lowest single-pair TCP_RR mean round-trip latency of the last finished run of a FastPathBenchmark, per path, in microseconds.",
	}, []string{"namespace", "benchmark", "path"})
	speedupRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_speedup_ratio",
		Help: "Fast-path over baseline TCP_STREAM throughput at the best fast-path point of the last finished run (status.speedup).",
	}, []string{"namespace", "benchmark"})
	serviceDemand = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_service_demand_us_per_kib",
		Help: "netperf service demand (microseconds of CPU per KiB of payload, -c -C) at the best fast-path point of the last finished run of a FastPathBenchmark, per path (fastpath, baseline); lower is better.",
	}, []string{"namespace", "benchmark", "path"})
	cpuRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_cpu_ratio",
		Help: "Fast-path over baseline service demand (CPU per byte) at the best fast-path point of the last finished run, median of per-repetition ratios (status.cpuRatio); lower is better.",
	}, []string{"namespace", "benchmark"})
	succeeded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_benchmark_succeeded",
		Help: "1 when the last run of a FastPathBenchmark met its success criteria, 0 when it failed.",
	}, []string{"namespace", "benchmark"})
)

func init() {
	metrics.Registry.MustRegister(throughputMbps, latencyMicroseconds, speedupRatio, serviceDemand, cpuRatio, succeeded)
}

// observe exports a finished benchmark's status; it is idempotent, so a
// restarted operator re-exports finished benchmarks from their status. Series
// of an earlier run are removed by forget when the next run starts.
func observe(b *fastpathv1alpha1.FastPathBenchmark) {
	ns, name := b.Namespace, b.Name
	ok := 0.0
	if b.Status.Phase == fastpathv1alpha1.BenchmarkSucceeded {
		ok = 1
	}
	succeeded.WithLabelValues(ns, name).Set(ok)
	for _, p := range b.Status.Paths {
		if p.BestThroughputMbps > 0 {
			throughputMbps.WithLabelValues(ns, name, p.Path).Set(float64(p.BestThroughputMbps))
		}
		if p.MeanLatency != nil {
			latencyMicroseconds.WithLabelValues(ns, name, p.Path).Set(float64(p.MeanLatency.Duration.Nanoseconds()) / 1e3)
		}
	}
	if v, err := strconv.ParseFloat(strings.TrimSuffix(b.Status.Speedup, "x"), 64); err == nil {
		speedupRatio.WithLabelValues(ns, name).Set(v)
	}
	if v, err := strconv.ParseFloat(b.Status.CPURatio, 64); err == nil {
		cpuRatio.WithLabelValues(ns, name).Set(v)
	}
	if p, ok := cpuPoint(b); ok {
		for path, sd := range map[string]string{"fastpath": p.FastPathServiceDemandUsPerKB, "baseline": p.BaselineServiceDemandUsPerKB} {
			if v, err := strconv.ParseFloat(sd, 64); err == nil {
				serviceDemand.WithLabelValues(ns, name, path).Set(v)
			}
		}
	}
}

// cpuPoint is the status point status.cpuRatio was taken at: the
// single-pair TCP_STREAM point with that ratio and the highest fast-path
// throughput (the best point).
func cpuPoint(b *fastpathv1alpha1.FastPathBenchmark) (fastpathv1alpha1.BenchmarkPoint, bool) {
	var best fastpathv1alpha1.BenchmarkPoint
	found := false
	for _, p := range b.Status.Points {
		if p.Test == fastpathv1alpha1.TestTCPStream && p.Pairs == 1 && p.CPURatio != "" && p.CPURatio == b.Status.CPURatio && (!found || p.FastPathMbps > best.FastPathMbps) {
			best, found = p, true
		}
	}
	return best, found
}

// forget removes every series of one benchmark.
func forget(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "benchmark": name}
	throughputMbps.DeletePartialMatch(l)
	latencyMicroseconds.DeletePartialMatch(l)
	speedupRatio.DeletePartialMatch(l)
	serviceDemand.DeletePartialMatch(l)
	cpuRatio.DeletePartialMatch(l)
	succeeded.DeletePartialMatch(l)
}
