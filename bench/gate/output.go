package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Format is an output format of bench run (-o). It is a pflag.Value, so a
// wrong value is rejected while the flags are parsed, naming the allowed
// ones.
type Format string

// The formats, in the order the help lists them.
const (
	FormatText  Format = "text"
	FormatJSON  Format = "json"
	FormatYAML  Format = "yaml"
	FormatJUnit Format = "junit"
	// FormatCSV is the run's results as CSV (results.WriteCSV).
	FormatCSV Format = "csv"
)

// Formats are the values -o takes.
var Formats = []Format{FormatText, FormatJSON, FormatYAML, FormatJUnit, FormatCSV}

func (f *Format) String() string { return string(*f) }

// Set accepts one of Formats.
func (f *Format) Set(v string) error {
	for _, ok := range Formats {
		if Format(v) == ok {
			*f = ok
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", FormatNames())
}

// Type is the value's name in the flag's usage.
func (f *Format) Type() string { return "format" }

// FormatNames is "text|json|yaml|junit|csv".
func FormatNames() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, "|")
}

// Write renders r to w in format: text (WriteText), the FastPathBenchmark
// as JSON or YAML (as `kubectl get -o json|yaml` prints it, without
// managedFields), JUnit XML of r alone, or r.Results as CSV (WriteCSV).
func Write(w io.Writer, format Format, r Report) error {
	switch format {
	case FormatCSV:
		return WriteCSV(w, r)
	case FormatJSON, FormatYAML:
		b := r.Benchmark.DeepCopy()
		b.APIVersion, b.Kind = fastpathv1alpha1.GroupVersion.String(), "FastPathBenchmark"
		b.ManagedFields = nil
		out, err := json.MarshalIndent(b, "", "    ")
		if err == nil && format == FormatYAML {
			out, err = yaml.JSONToYAML(out)
		} else if err == nil {
			out = append(out, '\n')
		}
		if err != nil {
			return fmt.Errorf("failed to render FastPathBenchmark %s/%s as %s: %w", b.Namespace, b.Name, format, err)
		}
		_, err = w.Write(out)
		return err
	case FormatJUnit:
		out, err := JUnit([]Report{r})
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	return WriteText(w, r)
}

// WriteCSV writes r.Results as CSV (results.WriteCSV; the VM column from
// the benchmark's mode). Without results (the benchmark did not run, or
// they could not be read) it writes the header alone, so a pipeline's file
// always parses.
func WriteCSV(w io.Writer, r Report) error {
	var doc results.Document
	if r.Results != nil {
		doc = *r.Results
	}
	return results.WriteCSV(w, doc, results.CSVOptions{VM: r.Benchmark.Spec.Mode == fastpathv1alpha1.BenchmarkModeVM})
}

// WriteText prints r for a person: the figures `kubectl get fpb` shows
// (phase, best Gbit/s, speed-up, CPU ratio), the deciding reason and
// message, one line per success criterion with the required and the
// measured figure, and the exit code, e.g.
//
//	NAMESPACE  NAME        PHASE   BEST GBPS  SPEEDUP  CPU RATIO
//	apps       db-link-ci  Failed  13.52      2.95x    0.62
//	Failed (ThresholdNotMet): best fast path 13.52 Gbps at ...
//
//	CRITERION          REQUIRED       MEASURED    VERDICT
//	minThroughputMbps  >= 10000 Mbps  13520 Mbps  met
//	minSpeedupPercent  >= 300%        294.5%      NOT MET
//
//	exit 1: criteria not met
func WriteText(w io.Writer, r Report) error {
	b, o := r.Benchmark, r.Outcome
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPHASE\tBEST GBPS\tSPEEDUP\tCPU RATIO")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.Namespace, b.Name, dash(string(b.Status.Phase)), dash(b.Status.BestGbps), dash(b.Status.Speedup), dash(b.Status.CPURatio))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, headlineText(o))
	if len(r.Criteria) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CRITERION\tREQUIRED\tMEASURED\tVERDICT")
		for _, c := range r.Criteria {
			bound, verdict := ">=", "met"
			if c.Max {
				bound = "<="
			}
			if !c.Met {
				verdict = "NOT MET"
				if c.Why != "" {
					verdict += ": " + c.Why
				}
			}
			fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", c.Name, bound, withUnit(c.Required, c.Unit), dash(withUnit(c.Measured, unitIf(c.Measured, c.Unit))), verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\nexit %d: %s\n", o.Code, o.Code)
	return err
}

// unitIf is unit, or "" for an empty figure (so it prints as "-").
func unitIf(v, unit string) string {
	if v == "" {
		return ""
	}
	return unit
}
