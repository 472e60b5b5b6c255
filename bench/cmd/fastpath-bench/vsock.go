package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/bench"
)

func newVSockServerCmd(stderr io.Writer) *cobra.Command {
	var (
		o     bench.VSockServerOptions
		quiet bool
	)
	cmd := &cobra.Command{
		Use:     "vsock-server",
		Short:   "answer VSOCK_STREAM and VSOCK_RR clients on a vsock port until interrupted",
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.Validate() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Serve(cmd.Context(), newLogger(stderr, quiet))
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not log to stderr")
	return cmd
}

func newVSockClientCmd(stdout io.Writer) *cobra.Command {
	var o bench.VSockClientOptions
	cmd := &cobra.Command{
		Use:     "vsock-client",
		Short:   "run one VSOCK_STREAM or VSOCK_RR test against a vsock-server and print the session JSON",
		Args:    noArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.Validate() },
		RunE:    func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), stdout) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
