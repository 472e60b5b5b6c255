package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/bench/jobrunner"
)

// newRunCmd is `run`, also the runner of a FastPathBenchmark Job. A command
// line it rejects means the controller and the runner disagree on the
// contract: that goes into the results ConfigMap too (all is the whole
// command line, to find --results-configmap in).
func newRunCmd(all []string, stdout, stderr io.Writer) *cobra.Command {
	var (
		flags jobrunner.RunnerFlags
		cfg   jobrunner.RunnerConfig
	)
	reject := func(cmd *cobra.Command, err error) error {
		if werr := jobrunner.WriteRejection(cmd.Context(), all, err, newSink); werr != nil {
			fmt.Fprintln(stderr, werr)
		}
		return err
	}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the netperf (and vsock) matrix over the given paths and print the results JSON",
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if cfg, err = flags.Config(args); err != nil {
				return reject(cmd, err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sink *jobrunner.ConfigMapSink
			if cfg.ResultsName != "" {
				s, err := newSink(cfg.ResultsNamespace, cfg.ResultsName, cfg.RunID)
				if err != nil {
					return err
				}
				sink = s
			}
			return cfg.Execute(cmd.Context(), sink, stdout, newLogger(stderr, cfg.Quiet))
		},
	}
	cmd.SetFlagErrorFunc(reject)
	flags.AddFlags(cmd.Flags())
	return cmd
}
