package main

import (
	"io"

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
