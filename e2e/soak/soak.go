package soak

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsrun"
)

// Part names accepted by Options.Parts.
const (
	PartPlugin   = "plugin"
	PartOperator = "operator"
	// PartAPIServer restarts kube-apiserver under a running operator.
	PartAPIServer = "apiserver"
	// PartAgent kills the node agent while it creates bridges and relays.
	PartAgent = "agent"
)

// Options configures Run.
type Options struct {
	// Parts to run, in this order; default all (PartPlugin, PartOperator,
	// PartAPIServer, PartAgent).
	Parts []string
	// Plugin is the path of the fastpath binary (PartPlugin).
	Plugin string
	// CNIPath holds host-local; default "/usr/lib/cni".
	CNIPath string
	// PluginCycles is the least number of cycles per datapath.
	PluginCycles int
	// Batch is the number of attachments in flight at once.
	Batch int
	// Operator configures PartOperator.
	Operator OperatorOptions
	// APIServer configures PartAPIServer (KillsPerPhase: restarts per phase).
	APIServer OperatorOptions
	// Agent configures PartAgent (its Plugin defaults to Options.Plugin).
	Agent AgentOptions
	// Seed seeds every random choice; Run prints it so a run can be repeated.
	Seed uint64
	// Duration bounds the whole soak: no batch starts after Start+Duration.
	Duration time.Duration
	// WorkDir holds state; default a new temporary directory, removed at the end.
	WorkDir string
	// Log receives progress lines.
	Log logr.Logger
}

// Run runs the parts and returns one Summary per part (per datapath for
// the plugin part). The error is for a part that could not run at all; the
// summaries of the parts that ran are returned with it.
func Run(ctx context.Context, opts Options) ([]Summary, error) {
	if len(opts.Parts) == 0 {
		opts.Parts = []string{PartPlugin, PartOperator, PartAPIServer, PartAgent}
	}
	deadline := time.Time{}
	if opts.Duration > 0 {
		deadline = time.Now().Add(opts.Duration)
	}
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "fastpath-soak-")
		if err != nil {
			return nil, fmt.Errorf("failed to create work directory: %w", err)
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	logf := func(format string, args ...any) { opts.Log.Info(fmt.Sprintf(format, args...)) }
	var out []Summary
	for _, part := range opts.Parts {
		switch part {
		case PartPlugin:
			for i, dp := range []string{netconf.DatapathLinuxBridge, netconf.DatapathOVS} {
				s, err := runPluginOn(ctx, opts, dp, opts.Seed+uint64(i), deadline, logf)
				if err != nil {
					return out, fmt.Errorf("plugin part on %s: %w", dp, err)
				}
				out = append(out, s)
			}
		case PartOperator:
			o := opts.Operator
			o.Seed, o.Deadline, o.Log = opts.Seed, deadline, opts.Log
			s, err := RunOperator(ctx, o)
			if err != nil {
				return out, fmt.Errorf("operator part: %w", err)
			}
			out = append(out, s)
		case PartAPIServer:
			o := opts.APIServer
			o.Seed, o.Deadline, o.Log = opts.Seed+2, deadline, opts.Log
			s, err := RunAPIServer(ctx, o)
			if err != nil {
				return out, fmt.Errorf("apiserver part: %w", err)
			}
			out = append(out, s)
		case PartAgent:
			o := opts.Agent
			o.Seed, o.Deadline, o.Log = opts.Seed+3, deadline, opts.Log
			if o.Plugin == "" {
				o.Plugin = opts.Plugin
			}
			if o.CNIPath == "" {
				o.CNIPath = opts.CNIPath
			}
			s, err := RunAgent(ctx, o)
			out = append(out, s...)
			if err != nil {
				return out, fmt.Errorf("agent part: %w", err)
			}
		default:
			return out, fmt.Errorf("unknown part %q: must be %s, %s, %s or %s", part, PartPlugin, PartOperator, PartAPIServer, PartAgent)
		}
	}
	return out, nil
}

func runPluginOn(ctx context.Context, opts Options, datapath string, seed uint64, deadline time.Time, logf func(string, ...any)) (Summary, error) {
	if datapath == netconf.DatapathOVS {
		s, err := ovsrun.Start(ctx, opts.Log)
		if err != nil {
			return Summary{}, err
		}
		defer func() {
			if err := s.Stop(); err != nil {
				logf("Failed to stop Open vSwitch: %v", err)
			}
		}()
	}
	return RunPlugin(ctx, PluginOptions{Plugin: opts.Plugin, CNIPath: opts.CNIPath, Datapath: datapath,
		Cycles: opts.PluginCycles, Batch: opts.Batch, Seed: seed, Deadline: deadline, WorkDir: opts.WorkDir, Logf: logf})
}
