package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// newBenchCompareCmd is `bench compare OLD NEW`: two runs point by point,
// as spec.compareTo compares them.
func newBenchCompareCmd(kube *genericclioptions.ConfigFlags, stdout io.Writer) *cobra.Command {
	var maxRegression float64
	cmd := &cobra.Command{
		Use:   "compare OLD NEW [--max-regression-percent P]",
		Short: "compare two runs point by point: throughput and CPU per byte, their ratio, and whether it is beyond the noise",
		Long: `Compare the run NEW with the run OLD at every path and matrix point both measured, as a
FastPathBenchmark's spec.compareTo does: the median throughput then and now, their ratio,
the min-max ranges of the repetitions and whether they overlap (within noise) or not
(beyond noise), and the same for the service demand (CPU per byte) where both measured it.

OLD and NEW are each a results.json file (from kubectl fastpath bench report, bench run
--csv-file's sibling artifacts, fastpath-bench local --out) when a file of that name
exists, else the name of a finished FastPathBenchmark (-n, else the context's namespace).

Exit 0; with --max-regression-percent P, exit 1 when a path other than the baseline
regressed by more than P percent beyond the noise (throughput down or CPU per byte up).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("bench compare needs two runs, OLD and NEW (results.json files or FastPathBenchmark names), got %d", len(args))
			}
			if maxRegression < 0 {
				return fmt.Errorf("--max-regression-percent %v is negative", maxRegression)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var c client.Client
			var ns string
			load := func(arg string) (results.Document, string, error) {
				if st, err := os.Stat(arg); err == nil && st.Mode().IsRegular() {
					doc, err := readResultsFile(arg)
					return doc, arg, err
				}
				if c == nil {
					var err error
					if c, ns, err = newClient(kube); err != nil {
						return results.Document{}, "", err
					}
				}
				return readBenchmarkResults(cmd.Context(), c, ns, arg)
			}
			then, thenName, err := load(args[0])
			if err != nil {
				return err
			}
			now, nowName, err := load(args[1])
			if err != nil {
				return err
			}
			cmp := results.Compare(now, then)
			if err := gate.WriteComparison(stdout, nowName, thenName, cmp); err != nil {
				return err
			}
			if !cmd.Flags().Changed("max-regression-percent") {
				return nil
			}
			if worst, percent, what, ok := cmp.Worst(nil); ok && what != "" && percent > maxRegression {
				return &gate.ExitError{Code: gate.ExitCriteriaNotMet, Err: fmt.Errorf("regression %.1f%% (%s) at %s %s is beyond --max-regression-percent %v", percent, what, worst.Path, worst.Point, maxRegression)}
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&maxRegression, "max-regression-percent", 0, "exit 1 when a regression beyond the noise exceeds this many percent")
	return cmd
}

// readResultsFile reads a results.json file.
func readResultsFile(path string) (results.Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return results.Document{}, fmt.Errorf("failed to read %s: %w", path, err)
	}
	defer f.Close()
	doc, err := results.Decode(f)
	if err != nil {
		return results.Document{}, fmt.Errorf("failed to read %s: %w", path, err)
	}
	return doc, nil
}

// readBenchmarkResults reads the results of the FastPathBenchmark ns/name's
// last run, and names it "FastPathBenchmark <name> (run <job>)".
func readBenchmarkResults(ctx context.Context, c client.Reader, ns, name string) (results.Document, string, error) {
	b := &fastpathv1alpha1.FastPathBenchmark{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, b); err != nil {
		return results.Document{}, "", fmt.Errorf("failed to get FastPathBenchmark %s/%s (and no file %s): %w", ns, name, name, err)
	}
	doc, err := gate.ReadRunResults(ctx, c, b)
	if err != nil {
		return results.Document{}, "", err
	}
	return doc, fmt.Sprintf("FastPathBenchmark %s (run %s)", name, b.Status.JobName), nil
}
