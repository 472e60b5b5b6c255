// Command kubectl-fastpath is the Fastpath kubectl plugin (`kubectl fastpath
// ...` when it is on PATH):
//
//	demo [--full]            Fastpath's whole job on this machine, no cluster needed (root)
//	status [-n NS | -A]      attachments and nodes, with per-VM detail
//	bench report NAME [-o DIR]  a FastPathBenchmark's results: table, ratios, report.md/html
//	bench local [ARGS]       the local node benchmark (runs fastpath-bench local ARGS)
//
// Like kubectl, it finds the cluster through --kubeconfig, $KUBECONFIG or
// ~/.kube/config.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fastpath-io/fastpath/internal/platform/cliflags"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// A second Ctrl-C ends the process at once; the next run cleans up.
		stop()
	}()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command-line mistake (exit status 2).
type usageError struct{ error }

const usage = `usage: kubectl fastpath <command> [flags]

commands:
  demo [--full]               run Fastpath's whole job on this machine: embedded control plane,
                              operator, agent, emulated KubeVirt/Multus, benchmark (root)
  status [-n NS | -A]         FastPathAttachments and FastPathNodes with per-VM detail
  bench report NAME [-o DIR]  print a FastPathBenchmark's results and write report.md/report.html
  bench local [ARGS]          run the local node benchmark (fastpath-bench local ARGS)

global flags (before or after the command): --kubeconfig PATH
`

// Main runs the command in args and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "demo":
		err = demoCmd(ctx, args[1:], stdout, stderr)
	case "status":
		err = statusCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		err = benchCmd(ctx, args[1:], stdout, stderr)
	default:
		err = usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "kubectl fastpath: %v\n\n%s", err, usage)
		return 2
	}
	fmt.Fprintf(stderr, "kubectl fastpath %s: %v\n", args[0], err)
	return 1
}

// newFlags returns a flag set that reports errors as usage errors and knows
// the global --kubeconfig.
func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	return fs, kubeconfig
}

// parse parses flags wherever they are among args (flags may follow
// positional arguments, as kubectl allows) and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := cliflags.Parse(fs, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, usageError{err}
	}
	return pos, err
}
