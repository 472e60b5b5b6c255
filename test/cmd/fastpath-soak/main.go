// Command fastpath-soak is Fastpath's fault-injection soak (make soak): it
// runs the parts of package test/soak (plugin, operator,
// apiserver, agent), prints one summary line
// per part and exits 1 when any part lost or leaked anything (2 for a part
// that could not run, or bad flags). It needs root (network namespaces,
// bridges, Open vSwitch), Debian's containernetworking-plugins and the
// control plane binaries of make setup.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/stdr"

	"github.com/fastpath-io/fastpath/test/soak"
)

func main() {
	var (
		parts      = flag.String("parts", soak.PartPlugin+","+soak.PartOperator+","+soak.PartAPIServer+","+soak.PartAgent, "Comma-separated parts to run: plugin, operator, apiserver, agent.")
		plugin     = flag.String("plugin", "bin/fastpath", "Path of the fastpath CNI plugin binary.")
		operator   = flag.String("operator", "bin/fastpath-operator", "Path of the fastpath-operator binary.")
		agent      = flag.String("agent", "bin/fastpath-agent", "Path of the fastpath-agent binary.")
		agentRnds  = flag.Int("agent-rounds", 10, "Rounds of bridge creation and relaying, each with two agent kills.")
		cniPath    = flag.String("cni-path", "/usr/lib/cni", "Directory with host-local.")
		cycles     = flag.Int("plugin-cycles", 1000, "Least number of ADD/CHECK/DEL cycles per datapath (LinuxBridge and OVS).")
		batch      = flag.Int("batch", 25, "Attachments added and deleted in parallel per batch.")
		vms        = flag.Int("vms", 300, "VirtualMachines the operator part's attachment selects.")
		rounds     = flag.Int("operator-rounds", 8, "Wire-and-unwire rounds with operator kills (after one measuring round).")
		killsPhase = flag.Int("kills-per-phase", 3, "Most operator kills per wiring or unwiring phase.")
		apiRounds  = flag.Int("apiserver-rounds", 4, "Wire-and-unwire rounds with kube-apiserver restarts (after one measuring round).")
		apiPhase   = flag.Int("apiserver-restarts-per-phase", 2, "Most kube-apiserver restarts per wiring or unwiring phase.")
		duration   = flag.Duration("duration", 30*time.Minute, "Bound on the whole soak: no batch or round starts after it.")
		seed       = flag.Uint64("seed", uint64(time.Now().UnixNano()), "Seed of every random choice (printed, to repeat a run).")
	)
	flag.Parse()
	logger := stdr.New(log.New(os.Stderr, "fastpath-soak: ", log.LstdFlags))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger.Info("Starting", "seed", *seed, "parts", *parts, "duration", duration.String())

	summaries, err := soak.Run(ctx, soak.Options{
		Parts: strings.Split(*parts, ","), Plugin: *plugin, CNIPath: *cniPath, PluginCycles: *cycles, Batch: *batch,
		Operator:  soak.OperatorOptions{Binary: *operator, VMs: *vms, Rounds: *rounds, KillsPerPhase: *killsPhase},
		APIServer: soak.OperatorOptions{Binary: *operator, VMs: *vms, Rounds: *apiRounds, KillsPerPhase: *apiPhase},
		Agent:     soak.AgentOptions{Binary: *agent, Rounds: *agentRnds},
		Seed:      *seed, Duration: *duration, Log: logger,
	})
	failed := false
	for _, s := range summaries {
		for _, p := range s.Problems {
			fmt.Fprintf(os.Stderr, "%s: %s\n", s.Part, p)
		}
		fmt.Println(s.String())
		failed = failed || !s.OK()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastpath-soak: %v\n", err)
		os.Exit(2)
	}
	if failed {
		fmt.Println("soak: FAILED (lost or leaked objects above)")
		os.Exit(1)
	}
	fmt.Printf("soak: passed (seed %d)\n", *seed)
}
