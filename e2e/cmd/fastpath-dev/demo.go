package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/e2e/localenv/demo"
)

// newDemoCmd is `demo [--full] [--guests=netns|qemu]`: Fastpath's whole job
// on this machine, no cluster needed (root; e2e/localenv/demo): an
// embedded control plane, the real operator and agent, the emulated
// KubeVirt, Multus and kubelet, the samples applied with kubectl, a
// benchmark through the controller, the status and the results, and removal
// of everything it made. The first Ctrl-C cleans up, a second one ends the
// process at once (the next run cleans up).
func newDemoCmd(a *app) *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run Fastpath's whole job on this machine: embedded control plane, operator, agent, emulated KubeVirt/Multus, benchmark (root)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("demo takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			if a.stopSignals != nil {
				go func() {
					<-cmd.Context().Done()
					// A second Ctrl-C ends the process at once; the next run cleans up.
					a.stopSignals()
				}()
			}
			o.Out = a.stdout
			return a.runDemo(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Full, "full", false, "also run the papers' whole netperf matrix (about 25 minutes)")
	cmd.Flags().StringVar(&o.Guests, "guests", "", "what the VMs are: netns (network namespaces, the default) or qemu (REAL VMs: libvirt + QEMU under TCG; the proof runs inside them)")
	return cmd
}
