package localbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/benchfig"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/bench/report"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
)

// warnSocketBufferLimits logs when net.core.rmem_max or wmem_max is below
// the VMCI paper's 256 KiB: the kernel then clamps netperf -s/-S silently
// (the node agent raises them on a node; the benchmark changes no host-wide
// setting).
func warnSocketBufferLimits(log logr.Logger) {
	for _, name := range []string{"rmem_max", "wmem_max"} {
		raw, err := os.ReadFile("/proc/sys/net/core/" + name)
		if err != nil {
			continue
		}
		if v, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && v < sysctl.SocketBuffer {
			log.Info("WARNING: socket buffer limit below 256 KiB: netperf -s/-S 256K will be clamped", "sysctl", "net.core."+name, "value", v)
		}
	}
}

// loadAverage returns the first three fields of /proc/loadavg, "" when
// unreadable.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// measure runs the matrix on the built paths.
func measure(ctx context.Context, setup *Setup, m bench.Matrix, cpus *netperf.CPUPair) (results.Document, error) {
	if len(setup.Paths) == 0 {
		return results.Document{}, fmt.Errorf("failed to run the local benchmark: no path could be built (%v)", setup.Skipped)
	}
	// Client and server namespaces share this host: netperf's CPU figure is
	// the host's, reported once (Tools).
	// The clients are this process's children, and the paths know their
	// server processes: each repetition also gets the CPU time of the
	// benchmark's own processes per byte.
	r := &bench.Runner{Matrix: m, Paths: setup.Paths, Tools: Tools(cpus), ClientCPU: bench.FinishedChildrenCPU}
	doc, err := bench.Document(ctx, r, setup.Emulated)
	if err != nil {
		return doc, err
	}
	// The ceiling is the better of its candidates, repetition by repetition.
	doc.Runs = append(doc.Runs, CeilingOf(doc.Runs)...)
	return doc, nil
}

// writeLocal writes results.json and the report into dir and prints the
// medians and the ratio lines.
func writeLocal(stdout, stderr io.Writer, doc results.Document, setup *Setup, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	path := filepath.Join(dir, "results.json")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}
	if err := results.Encode(f, doc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	rep, err := report.Render(doc, report.Options{Title: "Fastpath local node benchmark"})
	if err != nil {
		return err
	}
	files, err := rep.WriteDir(dir)
	if err != nil {
		return err
	}
	for _, f := range append([]string{path}, files...) {
		fmt.Fprintln(stderr, "wrote", f)
	}
	fmt.Fprintf(stdout, "local node benchmark %s on %s (%d CPUs, kernel %s); emulated: %s\n", setup.ID, doc.Machine.Hostname, doc.Machine.CPUs, doc.Machine.Kernel, doc.Machine.Emulated)
	for name, why := range setup.Skipped {
		fmt.Fprintf(stdout, "skipped %s: %s\n", name, why)
	}
	for _, p := range setup.Paths {
		for test, why := range p.Skip {
			if slices.ContainsFunc(doc.Runs, func(r results.Run) bool { return r.Test == test }) {
				fmt.Fprintf(stdout, "skipped %s on %s@%d: %s\n", test, p.Name, p.MTU, why)
			}
		}
	}
	for _, r := range doc.Runs {
		if results.IsRR(r.Test) {
			fmt.Fprintf(stdout, "median %s %s mtu=%d: mean latency %.1f µs [%.1f-%.1f], %.0f transactions/s%s\n",
				r.Point(), r.Path, r.MTU, r.MeanLatencyUs, r.MeanLatencyMinUs, r.MeanLatencyMaxUs, r.TransactionsPerSec, cpuSuffix(r))
		} else {
			fmt.Fprintf(stdout, "median %s %s mtu=%d: %.2f Gbps [%.2f-%.2f]%s\n",
				r.Point(), r.Path, r.MTU, r.ThroughputMbps/1000, r.ThroughputMinMbps/1000, r.ThroughputMaxMbps/1000, cpuSuffix(r))
		}
	}
	for _, r := range doc.Runs {
		if r.Path == PathCeiling {
			fmt.Fprintf(stdout, "ceiling %s mtu=%d: %s\n", r.Point(), r.MTU, ceilingSources(r))
		}
	}
	for _, l := range rep.Lines {
		fmt.Fprintln(stdout, l)
	}
	return nil
}

// ceilingSources says which candidate each repetition of a ceiling run
// came from, e.g. "best per repetition: ceiling-loopback ceiling-veth
// ceiling-loopback (ceiling-loopback 2 of 3)".
func ceilingSources(r results.Run) string {
	var names []string
	n := map[string]int{}
	for _, s := range r.Samples {
		names = append(names, s.Source)
		n[s.Source]++
	}
	var counts []string
	for _, c := range CeilingCandidates {
		counts = append(counts, fmt.Sprintf("%s %d of %d", c, n[c], len(r.Samples)))
	}
	return "best per repetition: " + strings.Join(names, " ") + " (" + strings.Join(counts, ", ") + ")"
}

// cpuSuffix renders a run's UDP loss and service demand for the median
// lines, e.g. ", loss 0.0% [max 0.2%], CPU 3.600 µs/KiB [3.4-3.9] at 100% host-wide".
func cpuSuffix(r results.Run) string {
	s := ""
	if r.Test == results.UDPStream {
		s += fmt.Sprintf(", loss %.1f%% [max %.1f%%]", r.LossPercent, r.LossMaxPercent)
	}
	if r.ServiceDemandUsPerKB > 0 {
		s += fmt.Sprintf(", CPU %.3f µs/KiB [%.3f-%.3f] at %.0f%%", r.ServiceDemandUsPerKB, r.ServiceDemandMinUsPerKB, r.ServiceDemandMaxUsPerKB, r.CPUUtilPercent)
		if r.CPUScope == results.CPUScopeHost {
			s += " host-wide"
		}
	}
	if r.ProcessServiceDemandUsPerKB > 0 {
		s += fmt.Sprintf(", own processes %.3f µs/KiB [%.3f-%.3f]", r.ProcessServiceDemandUsPerKB, r.ProcessServiceDemandMinUsPerKB, r.ProcessServiceDemandMaxUsPerKB)
	}
	return s
}

// printFigures prints the other benchmarks' figures files in dir
// (cni-latency, relay, operator-scale), when present, and their targets as
// "target ..." lines; it returns the files.
func printFigures(stdout io.Writer, dir string) ([]benchfig.File, error) {
	files, err := benchfig.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "figures %s: %s\n", f.Benchmark, f.Description)
		for _, fig := range f.Figures {
			// Three decimals: the files keep full precision, a reader needs none of it.
			fmt.Fprintf(stdout, "  %s %s %g %s\n", f.Benchmark, fig.Name, math.Round(fig.Value*1000)/1000, fig.Unit)
		}
		for _, t := range f.Targets {
			fmt.Fprintln(stdout, "target", t)
		}
	}
	return files, nil
}
