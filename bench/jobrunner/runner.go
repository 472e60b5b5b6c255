package jobrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// RunnerFlags are the flags of `fastpath-bench run`: the contract RunnerArgs
// renders, plus flags for local use (--emulated, --netperf, --transport,
// --cid, --quiet, paths with ports). Register them with AddFlags, parse,
// then call Config.
type RunnerFlags struct {
	tests, socketSizes, messageSizes, rrSizes, sessions, pairs string
	duration                                                   time.Duration
	repetitions                                                int
	paths, vsockPaths, mtus                                    []string
	sshClients, sshServers, resultsConfigMap                   string
	hostCPUAgent, launcherPods                                 string
	c                                                          RunnerConfig
}

// RunnerConfig is the parsed and validated command line of the runner.
type RunnerConfig struct {
	bench.RunConfig
	// ResultsNamespace/ResultsName is --results-configmap; empty when not
	// given.
	ResultsNamespace, ResultsName string
	// Quiet turns off progress logging.
	Quiet bool
}

// AddFlags registers the runner's flags on fs.
func (f *RunnerFlags) AddFlags(fs *pflag.FlagSet) {
	def := bench.DefaultMatrix()
	c := &f.c
	fs.StringVar(&f.tests, "tests", strings.Join(def.Tests, ","), "tests to run: TCP_STREAM, TCP_RR, VSOCK_STREAM, VSOCK_RR")
	fs.StringVar(&f.socketSizes, "socket-sizes", "64K,256K", "socket buffer sizes in bytes (netperf -s/-S); 0 is the kernel default; vsock tests ignore them")
	fs.StringVar(&f.messageSizes, "message-sizes", "512,4K,16K,64K", "send sizes of stream tests in bytes (netperf -m)")
	fs.StringVar(&f.rrSizes, "rr-sizes", "1", "request/response sizes of RR tests in bytes (netperf -r n,n)")
	fs.StringVar(&f.sessions, "sessions", "1,5", "concurrent sessions per pair")
	fs.StringVar(&f.pairs, "pairs", "1", "client/server pairs at once, comma-separated; each point is run at each count; each path needs max(pairs) servers")
	fs.DurationVar(&f.duration, "duration", def.Duration, "length of each test, whole seconds")
	fs.IntVar(&f.repetitions, "repetitions", def.Repetitions, "runs per point and path; median, min and max are reported")
	fs.StringVar(&f.sshClients, "ssh-clients", "", "VM mode: the client VM of each pair (IP address or user@address), comma-separated; pair i's netperf runs there over SSH")
	fs.StringVar(&f.resultsConfigMap, "results-configmap", "", "namespace/name of the ConfigMap to write the outcome to (FastPathBenchmark)")
	fs.StringVar(&f.sshServers, "ssh-servers", "", "VM mode with vsock tests: the server VM of each pair (IP address or user@address), comma-separated; the runner copies itself there and starts vsock-server on --vsock-server-port")
	fs.IntVar(&c.VSockServerPort, "vsock-server-port", 0, "VM mode with vsock tests: the vsock port vsock-server listens on in the server VMs (the port of the attachment's vsock service)")
	fs.StringVar(&c.SSHUser, "ssh-user", "", "VM mode: guest user for --ssh-clients entries without user@")
	fs.StringVar(&c.SSHKey, "ssh-key", "", "VM mode: private key file for SSH")
	fs.DurationVar(&c.SSHWait, "ssh-wait", bench.DefaultSSHWait, "VM mode: how long to wait for the client VMs to accept SSH, and then for every server VM's netserver to answer, before measuring")
	fs.StringVar(&f.hostCPUAgent, "host-cpu-agent", "", "VM mode: <node IP>:<port> of the node agent's host CPU endpoint on the VMs' node; with --launcher-pods the runner records the launchers' cgroup CPU time and the node's softirq time around each repetition")
	fs.StringVar(&f.launcherPods, "launcher-pods", "", "VM mode with --host-cpu-agent: per pair <client virt-launcher pod uid>/<server virt-launcher pod uid>, comma-separated")
	fs.StringVar(&c.RunID, "run-id", "", "run ID echoed into the results ConfigMap as runID (the Job name)")
	fs.StringVar(&c.Netperf, "netperf", netperf.DefaultBinary, "netperf client binary")
	fs.StringVar(&c.Emulated, "emulated", "", "what is emulated, recorded in machine.emulated after the value of $"+results.EmulatedEnv+" (set by the demo's emulated kubelet)")
	fs.BoolVar(&c.Quiet, "quiet", false, "do not log progress to stderr")
	fs.StringArrayVar(&f.paths, "path", nil, "a path to measure, name=server[,server...] with one server (host[:port], or cid:port for vsock tests) per pair; repeat for more paths, measured in turn")
	fs.StringArrayVar(&f.vsockPaths, "vsock-path", nil, "a vsock path, name=cid:port[,cid:port...] with one server per pair (through the node's relay: 2:<relay port>); VSOCK_* tests run on vsock paths only, the others on --path paths only")
	fs.StringArrayVar(&f.mtus, "mtu", nil, "name=bytes, the MTU of a path; default: the local interface towards its first server (not in VM mode)")
	c.Transport.AddFlags(fs, "the vsock transport of VSOCK_* tests")
}

// ParseRunnerArgs parses args, the runner's command line after "run" (what
// RunnerArgs.Args renders after its first word), and validates it.
func ParseRunnerArgs(args []string) (RunnerConfig, error) {
	var f RunnerFlags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return RunnerConfig{}, err
	}
	return f.Config(fs.Args())
}

// Config validates the parsed flags and returns the configuration; pos are
// the positional arguments, of which there must be none. Errors name the
// flag and what it accepts.
func (f *RunnerFlags) Config(pos []string) (RunnerConfig, error) {
	c := f.c
	if len(pos) > 0 {
		return c, fmt.Errorf("unexpected arguments %q", pos)
	}
	c.Matrix = bench.Matrix{Tests: bench.ParseList(f.tests), Duration: f.duration, Repetitions: f.repetitions}
	var err error
	for _, l := range []struct {
		dst   *[]int
		val   string
		parse func(string) ([]int, error)
	}{
		{&c.Matrix.SocketSizes, f.socketSizes, bench.ParseSizes},
		{&c.Matrix.MessageSizes, f.messageSizes, bench.ParseSizes},
		{&c.Matrix.RRSizes, f.rrSizes, bench.ParseSizes},
		{&c.Matrix.Sessions, f.sessions, bench.ParseCounts},
		{&c.Matrix.Pairs, f.pairs, bench.ParseCounts},
	} {
		if *l.dst, err = l.parse(l.val); err != nil {
			return c, err
		}
	}
	mtuOf := map[string]int{}
	for _, s := range f.mtus {
		name, v, err := bench.ParseNameInt(s)
		if err != nil {
			return c, err
		}
		mtuOf[name] = v
	}
	c.MTUGiven = map[string]bool{}
	for _, s := range f.paths {
		p, err := bench.ParsePath(s)
		if err != nil {
			return c, err
		}
		if v, ok := mtuOf[p.Name]; ok {
			p.MTU, c.MTUGiven[p.Name] = v, true
		}
		c.Paths = append(c.Paths, p)
	}
	// A run of vsock tests alone may name its vsock servers with --path.
	if c.VSockOnly() {
		for i := range c.Paths {
			c.Paths[i].VSock = true
		}
	}
	for _, s := range f.vsockPaths {
		p, err := bench.ParsePath(s)
		if err != nil {
			return c, err
		}
		p.VSock = true
		c.Paths = append(c.Paths, p)
	}
	// The servers of IP paths come from pod and VMI status (a guest's agent
	// reports a VMI's addresses): only IP addresses are measured against,
	// never a name or anything netperf could take for more than -H's value.
	for _, p := range c.Paths {
		if p.VSock {
			continue
		}
		for _, ep := range p.Endpoints {
			if _, err := bench.ParseIP(ep.Host); err != nil {
				return c, fmt.Errorf("failed to parse --path %s: server %w", p.Name, err)
			}
		}
	}
	for name := range mtuOf {
		if !c.MTUGiven[name] {
			return c, fmt.Errorf("--mtu %s names no --path", name)
		}
	}
	if err := c.validateSSH(f.sshClients, f.sshServers); err != nil {
		return c, err
	}
	if c.HostCPU, err = bench.ParseHostCPU(f.hostCPUAgent, f.launcherPods); err != nil {
		return c, err
	}
	if h := c.HostCPU; h != nil && (!c.VMMode() || len(h.Launchers) < c.Matrix.MaxPairs()) {
		return c, fmt.Errorf("--host-cpu-agent needs VM mode (--ssh-clients) and a --launcher-pods entry per pair: %d entries, pairs up to %d", len(h.Launchers), c.Matrix.MaxPairs())
	}
	if f.resultsConfigMap != "" {
		ns, name, ok := strings.Cut(f.resultsConfigMap, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return c, fmt.Errorf("failed to parse --results-configmap %q: want namespace/name", f.resultsConfigMap)
		}
		if c.RunID == "" {
			return c, fmt.Errorf("--results-configmap needs --run-id")
		}
		c.ResultsNamespace, c.ResultsName = ns, name
	}
	if err := c.Transport.Validate(); err != nil {
		return c, err
	}
	if len(c.Paths) == 0 {
		return c, fmt.Errorf("failed to validate benchmark: no paths (give --path name=server)")
	}
	if err := c.Runner().Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// validateSSH sets and checks the VM-mode fields from --ssh-user,
// --ssh-clients and --ssh-servers: the user must be a POSIX user name and
// every guest an IP address (bench.ParseSSHGuest), so no value can reach
// ssh's command line as an option.
func (c *RunnerConfig) validateSSH(clients, servers string) error {
	if c.SSHUser != "" && !wellknown.ValidSSHUser(c.SSHUser) {
		return fmt.Errorf("failed to parse --ssh-user %q: want a POSIX user name (1-%d letters, digits, '_', '.' or '-', starting with a letter or '_')", c.SSHUser, wellknown.SSHUserMaxLength)
	}
	var err error
	if c.SSHClients, err = bench.ParseSSHGuests("--ssh-clients", clients, c.SSHUser); err != nil {
		return err
	}
	if len(c.SSHClients) > 0 {
		if c.SSHKey == "" {
			return fmt.Errorf("--ssh-clients needs --ssh-key")
		}
		if len(c.SSHClients) < c.Matrix.MaxPairs() {
			return fmt.Errorf("%d --ssh-clients, pairs up to %d need as many", len(c.SSHClients), c.Matrix.MaxPairs())
		}
	} else if c.SSHUser != "" || c.SSHKey != "" {
		return fmt.Errorf("--ssh-user and --ssh-key need --ssh-clients")
	}
	if c.SSHServers, err = bench.ParseSSHGuests("--ssh-servers", servers, c.SSHUser); err != nil {
		return err
	}
	switch {
	case c.VMMode() && c.HasVSock():
		if len(c.SSHServers) < c.Matrix.MaxPairs() {
			return fmt.Errorf("VM mode with vsock tests needs --ssh-servers, the server VM of each of the %d pairs, to start vsock-server in; got %d", c.Matrix.MaxPairs(), len(c.SSHServers))
		}
		if c.VSockServerPort < 1 || c.VSockServerPort >= int(vsock.AnyCID) {
			return fmt.Errorf("VM mode with vsock tests needs --vsock-server-port, the vsock port of the service in the server VMs (1-%d)", vsock.AnyCID-1)
		}
	case len(c.SSHServers) > 0 || c.VSockServerPort != 0:
		return fmt.Errorf("--ssh-servers and --vsock-server-port apply to VM mode (--ssh-clients) with vsock tests only")
	}
	return nil
}

// OutcomeTarget finds --results-configmap ns/name and --run-id in raw args
// ("--flag value" or "--flag=value", one dash or two), for reporting a
// command line that does not parse.
func OutcomeTarget(args []string) (ns, name, runID string, ok bool) {
	val := func(flagName string) string {
		for i, a := range args {
			for _, prefix := range []string{"-", "--"} {
				if a == prefix+flagName && i+1 < len(args) {
					return args[i+1]
				}
				if v, found := strings.CutPrefix(a, prefix+flagName+"="); found {
					return v
				}
			}
		}
		return ""
	}
	ns, name, okCM := strings.Cut(val("results-configmap"), "/")
	runID = val("run-id")
	return ns, name, runID, okCM && ns != "" && name != "" && runID != ""
}

// sinkTimeout bounds the write of an outcome after the run ended.
const sinkTimeout = time.Minute

// WriteRejection records in the results ConfigMap named in args (see
// OutcomeTarget) that the runner rejected its command line with err: the
// controller and the runner disagree on the contract. newSink builds the
// sink of that ConfigMap; nothing is written when args name none or
// newSink fails (outside a cluster).
func WriteRejection(ctx context.Context, args []string, err error, newSink func(ns, name, runID string) (*ConfigMapSink, error)) error {
	ns, name, runID, ok := OutcomeTarget(args)
	if !ok {
		return nil
	}
	sink, serr := newSink(ns, name, runID)
	if serr != nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkTimeout)
	defer cancel()
	_, werr := sink.Write(wctx, results.Document{}, fmt.Errorf("runner rejected its command line: %w", err))
	return werr
}

// Execute runs c, prints the results JSON on stdout and, when sink is not
// nil, writes the outcome (results or error) to the results ConfigMap, even
// when ctx was cancelled (Job deadline, SIGTERM), so the controller learns
// why the run ended.
func (c RunnerConfig) Execute(ctx context.Context, sink *ConfigMapSink, stdout io.Writer, log logr.Logger) error {
	doc, runErr := c.Run(logr.NewContext(ctx, log), log)
	if runErr == nil {
		if err := results.Encode(stdout, doc); err != nil {
			runErr = err
		}
	}
	if sink == nil {
		return runErr
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkTimeout)
	defer cancel()
	data, err := sink.Write(wctx, doc, runErr)
	if err != nil {
		return errors.Join(runErr, err)
	}
	cm := sink.Namespace + "/" + sink.Name
	if reason := data[benchjob.ErrorReasonKey]; reason != nil {
		log.Info("Wrote the error to the results ConfigMap", "configMap", cm, "runID", sink.RunID, "errorReason", *reason)
	} else {
		log.Info("Wrote the results to the results ConfigMap", "configMap", cm, "runID", sink.RunID, "bytes", len(*data[benchjob.ResultsKey]))
	}
	return runErr
}
