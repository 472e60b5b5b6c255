package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/bench"
	"github.com/fastpath-io/fastpath/internal/bench/benchfig"
	"github.com/fastpath-io/fastpath/internal/bench/report"
	"github.com/fastpath-io/fastpath/internal/bench/results"
	"github.com/fastpath-io/fastpath/internal/localenv/localbench"
	"github.com/fastpath-io/fastpath/internal/node/sysctl"
)

func init() {
	register("local", "benchmark this node's datapaths between network namespaces (docs/design.md §5.2; root)", localCmd)
}

// defaultPlugin is the fastpath CNI binary next to this executable
// (make build puts both into bin/).
func defaultPlugin() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(exe), "fastpath")
}

func localCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		full        = fs.Bool("full", false, "the papers' full matrix (TCP_STREAM socket 64K,256K x message 512..64K x sessions 1,5 + TCP_RR) instead of the quick one (256K/64K single session + TCP_RR)")
		out         = fs.String("out", filepath.Join("_out", "bench"), "directory for results.json, report.md, report.html and the charts; other benchmarks' figures files there are printed too")
		duration    = fs.Duration("duration", 4*time.Second, "length of each test, whole seconds")
		repetitions = fs.Int("repetitions", 3, "runs per point and path; the median is reported")
		paths       = fs.String("paths", strings.Join(localbench.AllPaths, ","), "paths to build and measure")
		mtus        = fs.String("mtus", "9000,65520", "MTUs of the fast paths in bytes")
		plugin      = fs.String("plugin", defaultPlugin(), "the fastpath CNI binary (make build: bin/fastpath)")
		cniPath     = fs.String("cni-path", localbench.DefaultCNIPath, "directories of the host-local IPAM plugin, colon-separated")
		prefix      = fs.String("prefix", localbench.DefaultPrefix, "start of the names of everything the run makes (at most 5 characters); leftovers of killed runs with it are removed first")
		strict      = fs.Bool("strict", false, "exit 1 when a target is missed")
		nice        = fs.Int("nice", -20, "niceness of the benchmark, the netperf and netserver processes it starts and ovs-vswitchd while it runs (-20..19; 0 leaves it): the papers isolate the testbed, and on a busy machine other processes otherwise decide the medians")
		quiet       = fs.Bool("quiet", false, "do not log progress to stderr")
	)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	m := localbench.QuickMatrix(*duration)
	if *full {
		m = localbench.FullMatrix(*duration)
	}
	m.Repetitions = *repetitions
	if err := m.Validate(); err != nil {
		return usageError{err}
	}
	opts := localbench.Options{Prefix: *prefix, Paths: bench.ParseList(*paths), Plugin: *plugin, CNIPath: filepath.SplitList(*cniPath), Nice: *nice}
	if opts.FastPathMTUs, err = bench.ParseCounts(*mtus); err != nil {
		return usageError{err}
	}
	if err := localbench.ValidatePaths(opts.Paths); err != nil {
		return usageError{err}
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("failed to run the local benchmark: it needs root (network namespaces, links, bridges, Open vSwitch)")
	}
	if *nice < -20 || *nice > 19 {
		return usageError{fmt.Errorf("--nice %d must be -20..19", *nice)}
	}
	log := newLogger(stderr, *quiet)
	opts.Log = log
	ctx = logr.NewContext(ctx, log)
	if *nice != 0 {
		restore, err := localbench.SetNice(*nice)
		defer func() {
			if err := restore(); err != nil {
				log.Error(err, "Failed to restore the scheduler autogroup's niceness")
			}
		}()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "running at nice %d (and the session's scheduler autogroup where the process is in one; processes started from now on inherit it)\n", *nice)
	}

	if left, err := localbench.CleanLeftovers(opts.Prefix, log); err != nil {
		return fmt.Errorf("failed to remove leftovers of earlier runs (%s): %w", left, err)
	} else if !left.Empty() {
		fmt.Fprintf(stdout, "removed leftovers of killed runs: %s\n", left)
	}
	warnSocketBufferLimits(log)
	log.Info("Building paths", "paths", strings.Join(opts.Paths, ","), "fastPathMTUs", *mtus, "estimate", m.Estimate(opts.PathCount()).Round(time.Second).String())
	setup, err := localbench.Build(ctx, opts)
	if err != nil {
		return err
	}
	loadBefore := loadAverage()
	doc, runErr := measure(ctx, setup, m)
	loadAfter := loadAverage()
	closeErr := setup.Close()
	if closeErr == nil {
		log.Info("Removed everything the run made", "run", setup.ID)
	}
	if runErr != nil {
		return errors.Join(runErr, closeErr)
	}
	if err := writeLocal(stdout, stderr, doc, setup, *out); err != nil {
		return errors.Join(err, closeErr)
	}
	if loadBefore != "" && loadAfter != "" {
		fmt.Fprintf(stdout, "load average (1, 5, 15 min) before: %s, after: %s on %d CPUs; a load above the CPU count means other processes competed with netperf and the medians are noisy\n",
			loadBefore, loadAfter, doc.Machine.CPUs)
	}
	ts := localbench.CheckTargets(doc.Runs)
	missed := 0
	for _, t := range ts {
		fmt.Fprintln(stdout, "target", t)
		if t.Measured && !t.Pass {
			missed++
		}
	}
	if err := printFigures(stdout, *out); err != nil {
		closeErr = errors.Join(closeErr, err)
	}
	if closeErr != nil {
		return closeErr
	}
	if *strict && missed > 0 {
		return fmt.Errorf("%d of %d targets missed", missed, len(ts))
	}
	return nil
}

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
func measure(ctx context.Context, setup *localbench.Setup, m bench.Matrix) (results.Document, error) {
	if len(setup.Paths) == 0 {
		return results.Document{}, fmt.Errorf("failed to run the local benchmark: no path could be built (%v)", setup.Skipped)
	}
	np := bench.Netperf{}
	r := &bench.Runner{Matrix: m, Paths: setup.Paths, Tools: map[string]bench.Tool{results.TCPStream: np, results.TCPRR: np}}
	return bench.Document(ctx, r, setup.Emulated)
}

// writeLocal writes results.json and the report into dir and prints the
// medians and the ratio lines.
func writeLocal(stdout, stderr io.Writer, doc results.Document, setup *localbench.Setup, dir string) error {
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
	for _, r := range doc.Runs {
		if results.IsRR(r.Test) {
			fmt.Fprintf(stdout, "median %s %s mtu=%d: mean latency %.1f µs [%.1f-%.1f], %.0f transactions/s\n",
				r.Point(), r.Path, r.MTU, r.MeanLatencyUs, r.MeanLatencyMinUs, r.MeanLatencyMaxUs, r.TransactionsPerSec)
		} else {
			fmt.Fprintf(stdout, "median %s %s mtu=%d: %.2f Gbps [%.2f-%.2f]\n",
				r.Point(), r.Path, r.MTU, r.ThroughputMbps/1000, r.ThroughputMinMbps/1000, r.ThroughputMaxMbps/1000)
		}
	}
	for _, l := range rep.Lines {
		fmt.Fprintln(stdout, l)
	}
	return nil
}

// printFigures prints the other benchmarks' figures files in dir
// (cni-latency, relay, operator-scale), when present.
func printFigures(stdout io.Writer, dir string) error {
	files, err := benchfig.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "figures %s: %s\n", f.Benchmark, f.Description)
		for _, fig := range f.Figures {
			// Three decimals: the files keep full precision, a reader needs none of it.
			fmt.Fprintf(stdout, "  %s %s %g %s\n", f.Benchmark, fig.Name, math.Round(fig.Value*1000)/1000, fig.Unit)
		}
	}
	return nil
}
