// Command kubectl-fastpath is the Fastpath kubectl plugin (`kubectl fastpath
// ...` when it is on PATH):
//
//	demo [--full]               Fastpath's whole job on this machine, no cluster needed (root; runs fastpath-dev demo)
//	status [-n NS | -A]         attachments and nodes, with per-VM detail
//	bench run (-f FILE | NAME)  create or follow a FastPathBenchmark, exit by its outcome (CI gate)
//	bench compare OLD NEW       two runs point by point: ratio, within or beyond the noise
//	bench report NAME [-o DIR]  a FastPathBenchmark's results: table, ratios, report.md/html
//	bench local [ARGS]          the local node benchmark (runs fastpath-bench local ARGS; exit by its targets)
//
// Like every kubectl plugin it takes kubectl's connection flags
// (k8s.io/cli-runtime genericclioptions: --kubeconfig, --context, -n, ...)
// and finds the cluster through them, $KUBECONFIG or ~/.kube/config. demo
// and bench local replace this process with fastpath-dev demo and fastpath-bench
// (beside this executable, else on PATH), so the plugin does not link the
// local environment.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/fastpath-io/fastpath/bench/gate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exec := func(path string, argv []string) error { return syscall.Exec(path, argv, os.Environ()) }
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr, exec))
}

const overview = `Fastpath: fast same-node networking and vsock for KubeVirt VMs.

  demo [--full]               run Fastpath's whole job on this machine: embedded control plane,
                              operator, agent, emulated KubeVirt/Multus, benchmark (root)
  status [-n NS | -A]         FastPathAttachments and FastPathNodes with per-VM detail
  bench run (-f FILE | NAME)  create or follow a FastPathBenchmark and exit by its outcome:
                              0 succeeded, 1 criteria not met, 2 could not run, 3 timeout
  bench compare OLD NEW       compare two runs (FastPathBenchmarks or results.json files) point by
                              point: throughput and CPU per byte, ratio, within or beyond the noise
  bench report NAME [-o DIR]  print a FastPathBenchmark's results and write report.md/report.html
  bench local [ARGS]          run the local node benchmark (fastpath-bench local ARGS) and exit by
                              its targets: 0 met, 1 a target missed, 2 could not run`

// Main runs the command in args and returns the exit status: 0 on success
// and for --help, 1 when the command failed, 2 when the command line was
// rejected; bench run returns its own codes (gate.ExitCodes), and bench
// local fastpath-bench local's (2 when fastpath-bench is not found). exec replaces the process with another program (argv[0] first),
// for demo and bench local; it returns only on failure.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, exec func(path string, argv []string) error) int {
	kube := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-fastpath",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fastpath"},
		Short:         "Fastpath's kubectl plugin",
		Long:          overview,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q", args[0])
			}
			return fmt.Errorf("a command is required")
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	kube.AddFlags(root.PersistentFlags())
	root.SetArgs(args)
	root.SetOut(stderr)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newDemoCmd(exec), newStatusCmd(kube, stdout), newBenchCmd(kube, stdout, stderr, exec), newTuningCmd(kube, stdout), newCleanupCmd(kube, stdout))
	started := false
	var markStarted func(*cobra.Command)
	markStarted = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if run := sub.RunE; run != nil {
				sub.RunE = func(cmd *cobra.Command, args []string) error { started = true; return run(cmd, args) }
			}
			markStarted(sub)
		}
	}
	markStarted(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if ee := (*gate.ExitError)(nil); errors.As(err, &ee) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return int(ee.Code)
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	if started {
		return 1
	}
	fmt.Fprintf(stderr, "See '%s --help'.\n", cmd.CommandPath())
	if cmd == root {
		_ = root.Help()
	}
	return 2
}
