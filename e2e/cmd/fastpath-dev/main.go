package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/e2e/localenv/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr, deps{runDemo: demo.Run, stopSignals: stop}))
}

// deps are what Main's subcommands call outside the command line, so tests
// can replace them.
type deps struct {
	// runDemo runs the demo (demo.Run).
	runDemo func(context.Context, demo.Options) error
	// stopSignals stops catching SIGINT and SIGTERM (the stop of
	// signal.NotifyContext): after it a signal ends the process. Nil in tests.
	stopSignals func()
}

// app is the state the subcommands share with the root command.
type app struct {
	deps
	stdout, stderr io.Writer
	// log is the logger of the running subcommand, on stderr with the
	// prefix "fastpath-dev <subcommand>: ".
	log logr.Logger
	// started is set once a subcommand has parsed its command line and
	// starts its work: an error after it is a failure (1), before it a
	// rejected command line (2).
	started bool
}

// exitError is an error with its own exit status; a nil err prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// Main runs the command line args and returns the exit status: 0 on success
// and for --help, 1 when the work failed, 2 for a command line it rejects
// (or the status of an exitError).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, d deps) int {
	a := &app{deps: d, stdout: stdout, stderr: stderr, log: logr.Discard()}
	var verbosity int
	root := &cobra.Command{
		Use:           "fastpath-dev",
		Short:         "The harness's development binary: the demo, a real single-node cluster, the images, the soak (never shipped)",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			stdr.SetVerbosity(verbosity)
			a.log = stdr.New(log.New(stderr, cmd.CommandPath()+": ", log.LstdFlags))
		},
	}
	root.PersistentFlags().IntVar(&verbosity, "v", 0, "verbosity of the log on stderr (logr V levels)")
	root.AddCommand(newDemoCmd(a), newClusterCmd(a), newImagesCmd(a), newSoakCmd(a))
	root.SetArgs(args)
	root.SetOut(stderr)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := root.Name()
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var e *exitError
	switch {
	case errors.As(err, &e):
		if e.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, e.err)
		}
		return e.code
	case a.started:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
}

// group makes cmd a command of subcommands: alone it prints its help, and an
// unknown subcommand is a rejected command line (cobra checks that only on
// the root).
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
}
