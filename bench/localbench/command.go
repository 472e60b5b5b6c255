package localbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// RunOptions are the flags of `fastpath-bench local`: build the paths,
// measure them, write results.json and the report into Out, and print the
// medians, the ratio lines, the targets and other benchmarks' figures.
type RunOptions struct {
	// Full selects FullMatrix instead of QuickMatrix.
	Full bool
	// Out is the directory for results.json, report.md, report.html and
	// the charts.
	Out         string
	Duration    time.Duration
	Repetitions int
	// Paths and MTUs are comma-separated (AllPaths names; fast-path MTUs
	// in bytes).
	Paths, MTUs string
	// Plugin is the fastpath CNI binary; CNIPath is colon-separated.
	Plugin, CNIPath string
	Prefix          string
	// JUnitFile, when set, is where the run's JUnit XML goes
	// (Outcome.JUnit), whatever the outcome.
	JUnitFile string
	// Nice is the niceness to run at, -20 to 19; 0 leaves it.
	Nice int
	// Tests are the netperf tests to run, comma-separated (default
	// QuickTests).
	Tests string
	// CPUs pins the client and the server's test process on every path,
	// "client,server" (netperf -T; default DefaultCPUs); "" leaves them to
	// the scheduler.
	CPUs string

	matrix bench.Matrix
	opts   Options
	cpus   *netperf.CPUPair
}

// defaultPlugin is the fastpath CNI binary next to this executable (make
// build puts both into bin/).
func defaultPlugin() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Join(filepath.Dir(exe), "fastpath")
}

// AddFlags registers the flags of `fastpath-bench local` on fs.
func (o *RunOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Full, "full", false, "the papers' full matrix (socket 64K,256K x message 512..64K x sessions 1,5 for TCP_STREAM and TCP_MAERTS, plus UDP_STREAM, TCP_RR, TCP_CRR) instead of the quick one (256K/64K single session)")
	fs.StringVar(&o.Out, "out", filepath.Join("_out", "bench"), "directory for results.json, report.md, report.html and the charts; other benchmarks' figures files there are printed too")
	fs.DurationVar(&o.Duration, "duration", 4*time.Second, "length of each test, whole seconds")
	fs.IntVar(&o.Repetitions, "repetitions", MinRepetitions, "runs per point and path, paths alternating inside each (order reversed every other repetition); the median is reported and every target ratio is the median of the paired per-repetition ratios")
	fs.StringVar(&o.Paths, "paths", strings.Join(AllPaths, ","), "paths to build and measure")
	fs.StringVar(&o.MTUs, "mtus", "9000,65520", "MTUs of the fast paths in bytes")
	fs.StringVar(&o.Plugin, "plugin", defaultPlugin(), "the fastpath CNI binary (make build: bin/fastpath)")
	fs.StringVar(&o.CNIPath, "cni-path", DefaultCNIPath, "directories of the host-local IPAM plugin, colon-separated")
	fs.StringVar(&o.Prefix, "prefix", DefaultPrefix, "start of the names of everything the run makes (at most 5 characters); leftovers of killed runs with it are removed first")
	fs.StringVar(&o.JUnitFile, "junit-file", "", "also write the target lines as JUnit XML to this file (a testcase per target: failure when missed, skipped when not measurable here), also when the run fails")
	// A missed target always exits 1 now; --strict stays so that scripts
	// that pass it still run.
	fs.Bool("strict", true, "")
	_ = fs.MarkDeprecated("strict", "a missed target always exits 1")
	fs.StringVar(&o.Tests, "tests", strings.Join(QuickTests, ","), "netperf tests to run, comma-separated (TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, TCP_CRR); every one measures CPU with -c -C")
	fs.StringVar(&o.CPUs, "cpus", DefaultCPUs, "CPUs to pin netperf and netserver's test process to on every path alike, client,server (netperf -T); empty leaves them to the scheduler")
	fs.IntVar(&o.Nice, "nice", -20, "niceness of the benchmark, the netperf and netserver processes it starts and ovs-vswitchd while it runs (-20..19; 0 leaves it): the papers isolate the testbed, and on a busy machine other processes otherwise decide the medians")
}

// Validate checks the flags and builds the matrix and Build's options;
// errors name the flag and the allowed values.
func (o *RunOptions) Validate() error {
	o.matrix = QuickMatrix(o.Duration)
	if o.Full {
		o.matrix = FullMatrix(o.Duration)
	}
	o.matrix.Repetitions = o.Repetitions
	if o.Tests != "" {
		o.matrix.Tests = bench.ParseList(o.Tests)
	}
	for _, t := range o.matrix.Tests {
		if !slices.Contains(netperf.Tests, t) {
			return fmt.Errorf("--tests: unknown test %q (known: %s)", t, strings.Join(netperf.Tests, ", "))
		}
	}
	if err := o.matrix.Validate(); err != nil {
		return err
	}
	o.opts = Options{Prefix: o.Prefix, Paths: bench.ParseList(o.Paths), Plugin: o.Plugin, CNIPath: filepath.SplitList(o.CNIPath), Nice: o.Nice}
	var err error
	if o.opts.FastPathMTUs, err = bench.ParseCounts(o.MTUs); err != nil {
		return err
	}
	if err := ValidatePaths(o.opts.Paths); err != nil {
		return err
	}
	if o.cpus, err = netperf.ParseCPUPair(o.CPUs); err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	if o.cpus != nil && max(o.cpus.Client, o.cpus.Server) >= runtime.NumCPU() {
		return fmt.Errorf("--cpus %s: this machine has CPUs 0-%d", o.CPUs, runtime.NumCPU()-1)
	}
	if o.Nice < -20 || o.Nice > 19 {
		return fmt.Errorf("--nice %d must be -20..19", o.Nice)
	}
	return nil
}

// Run builds, measures and reports (call Validate first): results on
// stdout, the files written on stderr, progress on log. It needs root.
// Everything the run made is removed before it returns. It writes the JUnit
// XML to JUnitFile when set, and returns Outcome.ExitError: nil when every
// target measured here was met, a *gate.ExitError with code 1 naming the
// missed targets, or with code 2 and what failed when the benchmark could
// not run or finish (ExitCodes).
func (o *RunOptions) Run(ctx context.Context, stdout, stderr io.Writer, log logr.Logger) error {
	out := Outcome{Started: time.Now()}
	out.Err = o.run(ctx, stdout, stderr, log, &out)
	out.Elapsed = time.Since(out.Started)
	if o.JUnitFile != "" {
		if err := writeJUnit(o.JUnitFile, out); err != nil {
			out.Err = errors.Join(out.Err, err)
		} else {
			fmt.Fprintln(stderr, "wrote", o.JUnitFile)
		}
	}
	return out.ExitError()
}

// writeJUnit writes out's JUnit XML to path, creating its directory.
func writeJUnit(path string, out Outcome) error {
	x, err := out.JUnit()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, x, 0o644); err != nil {
		return fmt.Errorf("failed to write JUnit XML to %s: %w", path, err)
	}
	return nil
}

// run is Run up to the outcome: it fills out's run ID, machine, targets and
// figures as it learns them and returns what kept the benchmark from
// running or finishing.
func (o *RunOptions) run(ctx context.Context, stdout, stderr io.Writer, log logr.Logger, out *Outcome) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("failed to run the local benchmark: it needs root (network namespaces, links, bridges, Open vSwitch)")
	}
	opts, m := o.opts, o.matrix
	opts.Log = log
	ctx = logr.NewContext(ctx, log)
	if o.Nice != 0 {
		restore, err := SetNice(o.Nice)
		defer func() {
			if err := restore(); err != nil {
				log.Error(err, "Failed to restore the scheduler autogroup's niceness")
			}
		}()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "running at nice %d (and the session's scheduler autogroup where the process is in one; processes started from now on inherit it)\n", o.Nice)
	}

	if left, err := CleanLeftovers(opts.Prefix, log); err != nil {
		return fmt.Errorf("failed to remove leftovers of earlier runs (%s): %w", left, err)
	} else if !left.Empty() {
		fmt.Fprintf(stdout, "removed leftovers of killed runs: %s\n", left)
	}
	warnSocketBufferLimits(log)
	log.Info("Building paths", "paths", strings.Join(opts.Paths, ","), "fastPathMTUs", o.MTUs, "estimate", m.Estimate(opts.PathCount()).Round(time.Second).String())
	setup, err := Build(ctx, opts)
	if err != nil {
		return err
	}
	out.RunID = setup.ID
	loadBefore := loadAverage()
	if o.cpus != nil {
		fmt.Fprintf(stdout, "netperf on CPU %d, netserver's test process on CPU %d, on every path (netperf -T %s)\n", o.cpus.Client, o.cpus.Server, o.cpus)
	}
	doc, runErr := measure(ctx, setup, m, o.cpus)
	loadAfter := loadAverage()
	closeErr := setup.Close()
	if closeErr == nil {
		log.Info("Removed everything the run made", "run", setup.ID)
	}
	if runErr != nil {
		return errors.Join(runErr, closeErr)
	}
	out.Machine, out.Targets = doc.Machine, CheckTargets(doc.Runs, setup.CPUNotApplicable)
	if err := writeLocal(stdout, stderr, doc, setup, o.Out); err != nil {
		return errors.Join(err, closeErr)
	}
	if loadBefore != "" && loadAfter != "" {
		fmt.Fprintf(stdout, "load average (1, 5, 15 min) before: %s, after: %s on %d CPUs; a load above the CPU count means other processes competed with netperf and the medians are noisy\n",
			loadBefore, loadAfter, doc.Machine.CPUs)
	}
	for _, t := range out.Targets {
		fmt.Fprintln(stdout, "target", t)
	}
	figs, err := printFigures(stdout, o.Out)
	out.Figures = figs
	return errors.Join(closeErr, err)
}
