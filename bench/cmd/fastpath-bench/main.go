package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/bench/gate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the subcommand named by args[0] and returns the exit status:
// 0 on success (and for --help), 1 when the command failed, 2 when the
// command line was rejected (flags, arguments or their validation, before
// the command started its work). local returns its own codes
// (localbench.ExitCodes: 1 a target missed, 2 could not run).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "fastpath-bench",
		Short:         "Run the Fastpath benchmarks and render their reports",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown subcommand %q", args[0])
			}
			return fmt.Errorf("a subcommand is required")
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	root.SetArgs(args)
	root.SetOut(stderr)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newRunCmd(args, stdout, stderr), newReportCmd(stdout, stderr), newLocalCmd(stdout, stderr),
		newVSockServerCmd(stderr), newVSockClientCmd(stdout))
	started := false
	for _, c := range root.Commands() {
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { started = true; return run(cmd, args) }
		}
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	if ee := (*gate.ExitError)(nil); errors.As(err, &ee) {
		return int(ee.Code)
	}
	if started {
		return 1
	}
	if cmd == root {
		_ = root.Usage()
	}
	return 2
}

// newLogger logs key/value lines to w, or nothing when quiet.
func newLogger(w io.Writer, quiet bool) logr.Logger {
	if quiet {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(w, prefix, args) }, funcr.Options{})
}

// noArgs rejects positional arguments, as every subcommand but report does.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	return nil
}
