package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
	"github.com/fastpath-io/fastpath/controllers/benchmark/summary"
)

// runOptions are the flags of bench run.
type runOptions struct {
	file      string
	wait      bool
	timeout   time.Duration
	grace     time.Duration
	output    gate.Format
	junitFile string
	csvFile   string
}

func runLong() string {
	var b strings.Builder
	b.WriteString(`Create a FastPathBenchmark from FILE (-f, "-" for stdin; its namespace, else -n, else the
context's) or follow the existing one NAME, and exit by how it ended: a CI gate.

Without --wait, -f creates the benchmark, prints its name (metadata.generateName gives
each CI run its own) and exits 0. With --wait, and always with NAME, bench run follows
it, printing one line per phase or condition transition to stderr, until it ends or
--timeout passes, then prints the result to stdout (-o) and writes JUnit XML to
--junit-file (one testsuite per benchmark; a testcase for the run, one per success
criterion with the measured and required figures, one per matrix point) and the
run's results as CSV to --csv-file (k8s-netperf's columns first; -o csv prints them).

A benchmark Pending on something that does not exist (WaitingForAttachment with the
attachment absent, SSHKeyMissing, RunnerObjectConflict) or not yet observed by the
operator fails with exit 2 once that has lasted --grace; one waiting for something
under way (the attachment becoming Ready, VMs booting, netserver pods) is followed
until --timeout.

Exit codes:
`)
	for _, e := range gate.ExitCodes {
		fmt.Fprintf(&b, "  %d  %s: %s\n", e.Code, e.Name, e.When)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// newBenchRunCmd is `bench run`; its errors end Main with a gate.ExitError
// (ExitCouldNotRun unless it says otherwise).
func newBenchRunCmd(kube *genericclioptions.ConfigFlags, stdout, stderr io.Writer) *cobra.Command {
	o := &runOptions{output: gate.FormatText, grace: gate.DefaultGrace}
	cmd := &cobra.Command{
		Use:   "run (-f FILE | NAME) [--wait] [--timeout D] [-o " + gate.FormatNames() + "] [--junit-file F] [--csv-file F]",
		Short: "create or follow a FastPathBenchmark and exit by its outcome (0 succeeded, 1 criteria not met, 2 could not run, 3 timeout)",
		Long:  runLong(),
		Args:  func(cmd *cobra.Command, args []string) error { return o.validate(cmd, args) },
		RunE: func(cmd *cobra.Command, args []string) error {
			err := o.run(cmd.Context(), kube, cmd.InOrStdin(), stdout, stderr, args)
			var ee *gate.ExitError
			if err != nil && !errors.As(err, &ee) {
				err = &gate.ExitError{Code: gate.ExitCouldNotRun, Err: err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", `create the FastPathBenchmark in this YAML or JSON file ("-": stdin)`)
	f.BoolVarP(&o.wait, "wait", "w", false, "follow the benchmark until it ends (always with NAME)")
	f.DurationVar(&o.timeout, "timeout", 0, "give up with exit 3 after this long (default: the runner Job's deadline for the spec plus 10m)")
	f.DurationVar(&o.grace, "grace", gate.DefaultGrace, "exit 2 once the benchmark has waited this long for something that does not exist")
	f.VarP(&o.output, "output", "o", "result format on stdout: "+gate.FormatNames())
	f.StringVar(&o.junitFile, "junit-file", "", "also write the result as JUnit XML to this file")
	f.StringVar(&o.csvFile, "csv-file", "", "also write the run's results as CSV to this file (the header alone when there are none)")
	return cmd
}

// validate rejects a command line that cannot run (Main then exits 2 with
// the usage hint).
func (o *runOptions) validate(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) > 1:
		return fmt.Errorf("bench run takes one FastPathBenchmark NAME, got %d: %q", len(args), args)
	case o.file != "" && len(args) == 1:
		return fmt.Errorf("-f %s and NAME %s exclude each other: -f creates a benchmark, NAME follows an existing one", o.file, args[0])
	case o.file == "" && len(args) == 0:
		return fmt.Errorf("bench run needs -f FILE (create a benchmark) or a FastPathBenchmark NAME (follow it)")
	case o.file != "" && !o.wait && (cmd.Flags().Changed("output") || o.junitFile != "" || o.csvFile != "" || cmd.Flags().Changed("timeout") || cmd.Flags().Changed("grace")):
		return fmt.Errorf("-o, --junit-file, --csv-file, --timeout and --grace are about the outcome and need --wait: without it, bench run -f creates the benchmark and prints its name")
	case o.timeout < 0:
		return fmt.Errorf("--timeout %s is negative", o.timeout)
	case o.grace < 0:
		return fmt.Errorf("--grace %s is negative", o.grace)
	}
	return nil
}

func (o *runOptions) run(ctx context.Context, kube *genericclioptions.ConfigFlags, stdin io.Reader, stdout, stderr io.Writer, args []string) error {
	c, ns, err := newClient(kube)
	if err != nil {
		return err
	}
	var key types.NamespacedName
	if o.file == "" {
		key = types.NamespacedName{Namespace: ns, Name: args[0]}
	} else {
		b, err := o.create(ctx, c, kube, ns, stdin)
		if err != nil {
			return err
		}
		key = client.ObjectKeyFromObject(b)
		if !o.wait {
			fmt.Fprintln(stdout, b.Name)
			return nil
		}
		fmt.Fprintf(stderr, "FastPathBenchmark %s created\n", key)
	}
	f := &gate.Follower{Client: c, Clock: clock.RealClock{}, Grace: o.grace, Progress: stderr}
	res, err := f.Follow(ctx, key, o.timeout)
	if err != nil {
		return err
	}
	r := gate.Report{Benchmark: res.Benchmark, Outcome: res.Outcome, Elapsed: res.Elapsed}
	if res.Outcome.Code == gate.ExitSucceeded || res.Outcome.Code == gate.ExitCriteriaNotMet {
		doc, err := gate.ReadRunResults(ctx, c, r.Benchmark)
		if err == nil {
			r.Results = &doc
			r.Criteria, err = judge(r, doc)
		}
		if err != nil {
			fmt.Fprintf(stderr, "Success criteria not judged one by one (the condition's message stands for them): %v\n", err)
		}
	}
	if err := gate.Write(stdout, o.output, r); err != nil {
		return err
	}
	if o.junitFile != "" {
		if err := writeJUnit(o.junitFile, r); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Wrote %s\n", o.junitFile)
	}
	if o.csvFile != "" {
		if err := writeFile(o.csvFile, "CSV", func(w io.Writer) error { return gate.WriteCSV(w, r) }); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Wrote %s\n", o.csvFile)
	}
	if res.Outcome.Code == gate.ExitSucceeded {
		return nil
	}
	return &gate.ExitError{Code: res.Outcome.Code, Err: fmt.Errorf("exit %d, %s: %s: %s", res.Outcome.Code, res.Outcome.Code, res.Outcome.Reason, res.Outcome.Message)}
}

// create reads the benchmark of -f and creates it in its namespace.
func (o *runOptions) create(ctx context.Context, c client.Client, kube *genericclioptions.ConfigFlags, current string, stdin io.Reader) (*fastpathv1alpha1.FastPathBenchmark, error) {
	in := stdin
	if o.file != "-" {
		file, err := os.Open(o.file)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", o.file, err)
		}
		defer file.Close()
		in = file
	}
	b, err := gate.DecodeBenchmark(in)
	if err != nil {
		return nil, fmt.Errorf("failed to read a FastPathBenchmark from %s: %w", o.file, err)
	}
	flagNS := ""
	if kube.Namespace != nil {
		flagNS = *kube.Namespace
	}
	if b.Namespace, err = gate.Namespace(b.Namespace, flagNS, current); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, b, client.FieldOwner("kubectl-fastpath")); err != nil {
		name := b.Name
		if name == "" {
			name = b.GenerateName + "*"
		}
		return nil, fmt.Errorf("failed to create FastPathBenchmark %s/%s from %s: %w", b.Namespace, name, o.file, err)
	}
	return b, nil
}

// judge gives the verdict on each success criterion of r's benchmark as the
// operator judged it: summary over the run's results.json, doc.
func judge(r gate.Report, doc results.Document) ([]gate.Criterion, error) {
	var out []gate.Criterion
	for _, v := range summary.Judge(summary.Summarize(doc), r.Benchmark.Spec.SuccessCriteria) {
		out = append(out, gate.Criterion{Name: v.Criterion, Required: v.Required, Measured: v.Measured, Unit: v.Unit, Max: v.Max, Met: v.Met, Why: v.Why, Text: v.Text})
	}
	if err := gate.CheckCriteria(r.Outcome, out); err != nil {
		return nil, err
	}
	return out, nil
}

// writeFile writes what write renders (what, for errors) to path.
func writeFile(path, what string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write %s to %s: %w", what, path, err)
	}
	return nil
}

func writeJUnit(path string, r gate.Report) error {
	out, err := gate.JUnit([]gate.Report{r})
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("failed to write JUnit XML to %s: %w", path, err)
	}
	return nil
}
