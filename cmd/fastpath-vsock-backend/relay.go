package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// relayOptions are the flags of the relay the backend runs with --relay
// (vsock mode Relay, driven by fastpath-agent --relay-backend-socket).
type relayOptions struct {
	// enabled runs the relay (--relay).
	enabled bool
	// transport is "vsock" (AF_VSOCK) or "unix:<dir>" (the emulation)
	// (--vsock-transport, as the agent's).
	transport string
	// vsockBufferSize is the receive buffer of the relay's AF_VSOCK
	// connections, bytes (--relay-vsock-buffer-size; 0: the kernel's).
	vsockBufferSize uint64
	// memoryLimit is this container's memory limit, bytes (--memory-limit;
	// default $FASTPATH_MEMORY_LIMIT; 0: unknown).
	memoryLimit int64
	// limits are the --relay-* limit flags (relay.AddLimitFlags).
	limits relay.Options
}

func (o *relayOptions) addFlags(fs *flag.FlagSet) {
	o.transport, o.limits = "vsock", relay.DefaultLimitFlags()
	o.memoryLimit, _ = strconv.ParseInt(os.Getenv("FASTPATH_MEMORY_LIMIT"), 10, 64)
	fs.BoolVar(&o.enabled, "relay", false, "Run vsock mode Relay's relay in this process (fastpath-agent --relay-backend-socket drives it over --control-socket: PUT/GET /v1/relay; its metrics on GET /metrics there), so that an agent restart keeps the relayed connections and listeners.")
	fs.StringVar(&o.transport, "vsock-transport", o.transport, "With --relay: \"vsock\" (AF_VSOCK on the host CID; no capability for the relay's ports, which are >= 1024) or \"unix:<dir>\" (EMULATION over UNIX sockets, for tests and the local environment). The agent's --vsock-transport must say the same.")
	fs.Uint64Var(&o.vsockBufferSize, "relay-vsock-buffer-size", 0, "With --relay: receive buffer of its AF_VSOCK connections in bytes (0: the kernel's, 256 KiB). Not for --vsock-transport unix:<dir>.")
	fs.Int64Var(&o.memoryLimit, "memory-limit", o.memoryLimit, "With --relay: this container's memory limit in bytes (default $FASTPATH_MEMORY_LIMIT, which the chart sets from limits.memory; 0: unknown). Sets the Go soft memory limit to 90% of it unless $GOMEMLIMIT is set, and the relay limits left at 0 follow from it (relay.BudgetsForMemory), as in the agent.")
	relay.AddLimitFlags(fs, &o.limits)
}

// validate checks the relay flags: each names its flag and range.
func (o relayOptions) validate() error {
	if !o.enabled {
		return nil
	}
	if _, _, err := vsock.ParseTransport(o.transport, o.vsockBufferSize); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"--memory-limit", o.memoryLimit}, {"--relay-max-conns", int64(o.limits.MaxTotalConns)},
		{"--relay-max-conns-per-namespace", int64(o.limits.MaxConnsPerNamespace)}, {"--relay-max-conns-per-cid", int64(o.limits.MaxConnsPerCID)},
		{"--relay-max-conns-per-route", int64(o.limits.DefaultMaxConns)}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d is out of range: must be 0 (from the default) or more", f.name, f.v)
		}
	}
	return nil
}

// newRelay returns the relay of o, its metrics handler (the relay's and the
// Go runtime's and process's collectors, on a registry of their own) and
// vsock.EmulationNote of its transport. The caller closes the relay.
func newRelay(o relayOptions, log logr.Logger) (*relay.Relay, http.Handler, string, error) {
	tr, root, err := vsock.ParseTransport(o.transport, o.vsockBufferSize)
	if err != nil {
		return nil, nil, "", err
	}
	if root != "" {
		log.Info("Using the EMULATED vsock transport for the relay: UNIX sockets, not AF_VSOCK (tests and the local environment only)", "root", root)
		// The host CID's directory, which Listen would create under the
		// backend's umask (backend.SocketUmask takes the x bits away).
		host := filepath.Dir(tr.(*vsock.UnixTransport).SocketPath(vsock.HostCID, 1))
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, nil, "", fmt.Errorf("failed to create the emulated host CID directory %s: %w", host, err)
		}
		if err := os.Chmod(host, 0o755); err != nil {
			return nil, nil, "", fmt.Errorf("failed to set mode 0755 on the emulated host CID directory %s: %w", host, err)
		}
	}
	if o.memoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(o.memoryLimit / 10 * 9)
	}
	ropts := relay.OptionsForMemory(o.limits, o.memoryLimit)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ropts.Transport, ropts.Registerer, ropts.Logger = tr, reg, log.WithName("relay")
	rl, err := relay.New(ropts)
	if err != nil {
		return nil, nil, "", err
	}
	log.Info("vsock relay limits", "memoryLimit", o.memoryLimit, "goMemLimit", debug.SetMemoryLimit(-1), "transport", o.transport,
		"maxConns", ropts.MaxTotalConns, "maxConnsPerNamespace", ropts.MaxConnsPerNamespace, "bufferBudget", ropts.BufferBudget)
	return rl, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), vsock.EmulationNote(tr), nil
}
