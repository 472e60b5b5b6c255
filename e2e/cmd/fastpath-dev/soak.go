package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fastpath-io/fastpath/e2e/soak"
)

// newSoakCmd is `soak`: Fastpath's fault-injection soak (make soak). It runs
// the parts of package e2e/soak (plugin, operator, apiserver, agent),
// prints one summary line per part and exits 1 when any part lost or leaked
// anything (2 for a part that could not run, or bad flags). It needs root
// (network namespaces, bridges, Open vSwitch), Debian's
// containernetworking-plugins and the control plane binaries of make setup.
func newSoakCmd(a *app) *cobra.Command {
	var (
		o                   soak.Options
		parts               string
		rounds, killsPhase  int
		apiRounds, apiPhase int
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Fault-injection soak: SIGKILLed plugin, operator and agent, restarted kube-apiserver; summary per part, exit 1 on any loss (root)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			o.Parts = strings.Split(parts, ",")
			o.Operator.Rounds, o.Operator.KillsPerPhase = rounds, killsPhase
			o.APIServer = soak.OperatorOptions{Binary: o.Operator.Binary, VMs: o.Operator.VMs, Rounds: apiRounds, KillsPerPhase: apiPhase}
			o.Log = a.log
			a.log.Info("Starting", "seed", o.Seed, "parts", parts, "duration", o.Duration.String())
			summaries, err := soak.Run(cmd.Context(), o)
			failed := false
			for _, s := range summaries {
				for _, p := range s.Problems {
					fmt.Fprintf(a.stderr, "%s: %s\n", s.Part, p)
				}
				fmt.Fprintln(a.stdout, s.String())
				failed = failed || !s.OK()
			}
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if failed {
				fmt.Fprintln(a.stdout, "soak: FAILED (lost or leaked objects above)")
				return &exitError{code: 1}
			}
			fmt.Fprintf(a.stdout, "soak: passed (seed %d)\n", o.Seed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&parts, "parts", soak.PartPlugin+","+soak.PartOperator+","+soak.PartAPIServer+","+soak.PartAgent, "Comma-separated parts to run: plugin, operator, apiserver, agent.")
	f.StringVar(&o.Plugin, "plugin", "bin/fastpath", "Path of the fastpath CNI plugin binary.")
	f.StringVar(&o.Operator.Binary, "operator", "bin/fastpath-operator", "Path of the fastpath-operator binary.")
	f.StringVar(&o.Agent.Binary, "agent", "bin/fastpath-agent", "Path of the fastpath-agent binary.")
	f.StringVar(&o.Agent.Backend, "vsock-backend", "bin/fastpath-vsock-backend", "Path of the fastpath-vsock-backend binary: the agent part runs the vsock relay in it (--relay), as a process the kills leave alone.")
	f.IntVar(&o.Agent.Rounds, "agent-rounds", 10, "Rounds of bridge creation and relaying, each with two agent kills.")
	f.IntVar(&o.Agent.StreamKills, "agent-stream-kills", 50, "Agent kills while a TCP connection over the fast path and relayed vsock connections (relay in fastpath-vsock-backend) stream (0: none).")
	f.StringVar(&o.CNIPath, "cni-path", "/usr/lib/cni", "Directory with host-local.")
	f.IntVar(&o.PluginCycles, "plugin-cycles", 1000, "Least number of ADD/CHECK/DEL cycles per datapath (LinuxBridge and OVS).")
	f.IntVar(&o.Batch, "batch", 25, "Attachments added and deleted in parallel per batch.")
	f.IntVar(&o.Operator.VMs, "vms", 300, "VirtualMachines the operator part's attachment selects.")
	f.IntVar(&rounds, "operator-rounds", 8, "Wire-and-unwire rounds with operator kills (after one measuring round).")
	f.IntVar(&killsPhase, "kills-per-phase", 3, "Most operator kills per wiring or unwiring phase.")
	f.IntVar(&apiRounds, "apiserver-rounds", 4, "Wire-and-unwire rounds with kube-apiserver restarts (after one measuring round).")
	f.IntVar(&apiPhase, "apiserver-restarts-per-phase", 2, "Most kube-apiserver restarts per wiring or unwiring phase.")
	f.DurationVar(&o.Duration, "duration", 30*time.Minute, "Bound on the whole soak: no batch or round starts after it.")
	f.Uint64Var(&o.Seed, "seed", uint64(time.Now().UnixNano()), "Seed of every random choice (printed, to repeat a run).")
	return cmd
}
