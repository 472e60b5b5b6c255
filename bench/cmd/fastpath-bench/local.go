package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/bench/localbench"
)

func newLocalCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		o     localbench.RunOptions
		quiet bool
	)
	cmd := &cobra.Command{
		Use:     "local",
		Short:   "benchmark this node's datapaths between network namespaces (docs/design.md §5.2; root)",
		Long:    localLong(),
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.Validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), stdout, stderr, newLogger(stderr, quiet))
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not log progress to stderr")
	return cmd
}

func localLong() string {
	var b strings.Builder
	b.WriteString(`Build this node's datapaths between network namespaces, measure them with netperf
(paths alternating inside each repetition), write results.json, report.md and
report.html into --out, and print the medians, ratios and one "target PASS|FAIL|SKIP"
line per target, the targets of other benchmarks' figures files in --out included.
A target SKIP could not be measured here (the line says why): it counts neither way.
--junit-file writes the target lines as JUnit XML, a testcase each, for CI.

Exit codes:
`)
	for _, e := range localbench.ExitCodes {
		fmt.Fprintf(&b, "  %d  %s: %s\n", e.Code, e.Code, e.When)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
