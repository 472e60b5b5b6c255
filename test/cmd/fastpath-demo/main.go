package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/test/localenv/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		// A second Ctrl-C ends the process at once; the next run cleans up.
		stop()
	}()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr, demo.Run))
}

// Main parses args and calls run with the options; it returns the exit
// status: 0 on success and for --help, 1 when the demo failed, 2 for a
// command line it rejects.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, run func(context.Context, demo.Options) error) int {
	var o demo.Options
	started := false
	cmd := &cobra.Command{
		Use:           "fastpath-demo",
		Short:         "Run Fastpath's whole job on this machine: embedded control plane, operator, agent, emulated KubeVirt/Multus, benchmark (root)",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("demo takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			started = true
			o.Out = stdout
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Full, "full", false, "also run the papers' whole netperf matrix (about 25 minutes)")
	cmd.Flags().StringVar(&o.Guests, "guests", "", "what the VMs are: netns (network namespaces, the default) or qemu (REAL VMs: libvirt + QEMU under TCG; the proof runs inside them)")
	cmd.SetArgs(args)
	cmd.SetOut(stderr)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "fastpath-demo: %v\n", err)
		if started {
			return 1
		}
		return 2
	}
	return 0
}
