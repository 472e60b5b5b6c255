package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/bench"
	"github.com/fastpath-io/fastpath/internal/bench/benchjob"
	"github.com/fastpath-io/fastpath/internal/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/bench/results"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

func init() {
	register("run", "run the netperf (and vsock) matrix over the given paths and print the results JSON", runCmd)
}

// sshOptions are the ssh options of VM mode, as the runner contract states
// them (benchjob.RunnerArgs): guest host keys are unknown and change with
// every VM, so they are not checked.
var sshOptions = []string{"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"}

// emulatedEnv is results.EmulatedEnv, named here because parseRunArgs has a
// local variable called results.
const emulatedEnv = results.EmulatedEnv

// runConfig is the parsed command line of `run`.
type runConfig struct {
	Matrix bench.Matrix
	// Paths carry their servers; MTU is set from --mtu, 0 otherwise.
	Paths []bench.Path
	// MTUGiven names the paths whose MTU came from --mtu.
	MTUGiven map[string]bool
	// SSHClients (VM mode): pair i's clients run on SSHClients[i], reached
	// as SSHUser@client with key SSHKey. Empty in Pod mode.
	SSHClients []string
	SSHUser    string
	SSHKey     string
	// SSHServers (VM mode with vsock tests): pair i's server VM, where the
	// runner starts `fastpath-bench vsock-server` on VSockServerPort.
	SSHServers      []string
	VSockServerPort int
	// ResultsNamespace/ResultsName is --results-configmap; empty when not given.
	ResultsNamespace, ResultsName string
	RunID                         string
	Emulated                      string
	Netperf                       string
	Quiet                         bool
	Transport                     transportFlags
}

// parseRunArgs parses the flags of `run` (the contract of
// benchjob.RunnerArgs plus flags for local use) and validates them. Errors
// are usageErrors.
func parseRunArgs(args []string, stderr io.Writer) (runConfig, error) {
	def := bench.DefaultMatrix()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c           runConfig
		tests       = fs.String("tests", strings.Join(def.Tests, ","), "tests to run: TCP_STREAM, TCP_RR, VSOCK_STREAM, VSOCK_RR")
		sockets     = fs.String("socket-sizes", "64K,256K", "socket buffer sizes in bytes (netperf -s/-S); 0 is the kernel default; vsock tests ignore them")
		messages    = fs.String("message-sizes", "512,4K,16K,64K", "send sizes of stream tests in bytes (netperf -m)")
		rrSizes     = fs.String("rr-sizes", "1", "request/response sizes of RR tests in bytes (netperf -r n,n)")
		sessions    = fs.String("sessions", "1,5", "concurrent sessions per pair")
		pairs       = fs.String("pairs", "1", "client/server pairs at once, comma-separated; each point is run at each count; each path needs max(pairs) servers")
		duration    = fs.Duration("duration", def.Duration, "length of each test, whole seconds")
		repetitions = fs.Int("repetitions", def.Repetitions, "runs per point and path; median, min and max are reported")
		sshClients  = fs.String("ssh-clients", "", "VM mode: the client VM of each pair (host or user@host), comma-separated; pair i's netperf runs there over SSH")
		results     = fs.String("results-configmap", "", "namespace/name of the ConfigMap to write the outcome to (FastPathBenchmark)")
		sshServers  = fs.String("ssh-servers", "", "VM mode with vsock tests: the server VM of each pair (host or user@host), comma-separated; the runner copies itself there and starts vsock-server on --vsock-server-port")
		paths       multiFlag
		vsockPaths  multiFlag
		mtus        multiFlag
	)
	fs.IntVar(&c.VSockServerPort, "vsock-server-port", 0, "VM mode with vsock tests: the vsock port vsock-server listens on in the server VMs (the port of the attachment's vsock service)")
	fs.StringVar(&c.SSHUser, "ssh-user", "", "VM mode: guest user for --ssh-clients entries without user@")
	fs.StringVar(&c.SSHKey, "ssh-key", "", "VM mode: private key file for SSH")
	fs.StringVar(&c.RunID, "run-id", "", "run ID echoed into the results ConfigMap as runID (the Job name)")
	fs.StringVar(&c.Netperf, "netperf", netperf.DefaultBinary, "netperf client binary")
	fs.StringVar(&c.Emulated, "emulated", "", "what is emulated, recorded in machine.emulated after the value of $"+emulatedEnv+" (set by the demo's emulated kubelet)")
	fs.BoolVar(&c.Quiet, "quiet", false, "do not log progress to stderr")
	fs.Var(&paths, "path", "a path to measure, name=server[,server...] with one server (host[:port], or cid:port for vsock tests) per pair; repeat for more paths, measured in turn")
	fs.Var(&vsockPaths, "vsock-path", "a vsock path, name=cid:port[,cid:port...] with one server per pair (through the node's relay: 2:<relay port>); VSOCK_* tests run on vsock paths only, the others on --path paths only")
	fs.Var(&mtus, "mtu", "name=bytes, the MTU of a path; default: the local interface towards its first server (not in VM mode)")
	c.Transport.register(fs, "the vsock transport of VSOCK_* tests")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return c, err
	}
	if len(pos) > 0 {
		return c, usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	c.Matrix = bench.Matrix{Tests: bench.ParseList(*tests), Duration: *duration, Repetitions: *repetitions}
	for _, f := range []struct {
		dst   *[]int
		val   string
		parse func(string) ([]int, error)
	}{
		{&c.Matrix.SocketSizes, *sockets, bench.ParseSizes},
		{&c.Matrix.MessageSizes, *messages, bench.ParseSizes},
		{&c.Matrix.RRSizes, *rrSizes, bench.ParseSizes},
		{&c.Matrix.Sessions, *sessions, bench.ParseCounts},
		{&c.Matrix.Pairs, *pairs, bench.ParseCounts},
	} {
		if *f.dst, err = f.parse(f.val); err != nil {
			return c, usageError{err}
		}
	}
	mtuOf := map[string]int{}
	for _, s := range mtus {
		name, v, err := bench.ParseNameInt(s)
		if err != nil {
			return c, usageError{err}
		}
		mtuOf[name] = v
	}
	c.MTUGiven = map[string]bool{}
	for _, s := range paths {
		p, err := bench.ParsePath(s)
		if err != nil {
			return c, usageError{err}
		}
		if v, ok := mtuOf[p.Name]; ok {
			p.MTU, c.MTUGiven[p.Name] = v, true
		}
		c.Paths = append(c.Paths, p)
	}
	// A run of vsock tests alone may name its vsock servers with --path.
	if c.vsockOnly() {
		for i := range c.Paths {
			c.Paths[i].VSock = true
		}
	}
	for _, s := range vsockPaths {
		p, err := bench.ParsePath(s)
		if err != nil {
			return c, usageError{err}
		}
		p.VSock = true
		c.Paths = append(c.Paths, p)
	}
	for name := range mtuOf {
		if !c.MTUGiven[name] {
			return c, usageError{fmt.Errorf("--mtu %s names no --path", name)}
		}
	}
	c.SSHClients = bench.ParseList(*sshClients)
	if len(c.SSHClients) > 0 {
		if c.SSHKey == "" {
			return c, usageError{fmt.Errorf("--ssh-clients needs --ssh-key")}
		}
		if len(c.SSHClients) < c.Matrix.MaxPairs() {
			return c, usageError{fmt.Errorf("%d --ssh-clients, pairs up to %d need as many", len(c.SSHClients), c.Matrix.MaxPairs())}
		}
		for _, cl := range c.SSHClients {
			if !strings.Contains(cl, "@") && c.SSHUser == "" {
				return c, usageError{fmt.Errorf("SSH client %s has no user: give user@host or --ssh-user", cl)}
			}
		}
	} else if c.SSHUser != "" || c.SSHKey != "" {
		return c, usageError{fmt.Errorf("--ssh-user and --ssh-key need --ssh-clients")}
	}
	c.SSHServers = bench.ParseList(*sshServers)
	switch {
	case c.vmMode() && c.hasVSock():
		if len(c.SSHServers) < c.Matrix.MaxPairs() {
			return c, usageError{fmt.Errorf("VM mode with vsock tests needs --ssh-servers, the server VM of each of the %d pairs, to start vsock-server in; got %d", c.Matrix.MaxPairs(), len(c.SSHServers))}
		}
		if c.VSockServerPort < 1 || c.VSockServerPort >= int(vsock.AnyCID) {
			return c, usageError{fmt.Errorf("VM mode with vsock tests needs --vsock-server-port, the vsock port of the service in the server VMs (1-%d)", vsock.AnyCID-1)}
		}
		for _, sv := range c.SSHServers {
			if !strings.Contains(sv, "@") && c.SSHUser == "" {
				return c, usageError{fmt.Errorf("SSH server %s has no user: give user@host or --ssh-user", sv)}
			}
		}
	case len(c.SSHServers) > 0 || c.VSockServerPort != 0:
		return c, usageError{fmt.Errorf("--ssh-servers and --vsock-server-port apply to VM mode (--ssh-clients) with vsock tests only")}
	}
	if *results != "" {
		ns, name, ok := strings.Cut(*results, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return c, usageError{fmt.Errorf("failed to parse --results-configmap %q: want namespace/name", *results)}
		}
		if c.RunID == "" {
			return c, usageError{fmt.Errorf("--results-configmap needs --run-id")}
		}
		c.ResultsNamespace, c.ResultsName = ns, name
	}
	if err := c.Transport.validate(); err != nil {
		return c, usageError{err}
	}
	if len(c.Paths) == 0 {
		return c, usageError{fmt.Errorf("failed to validate benchmark: no paths (give --path name=server)")}
	}
	if err := c.runner().Validate(); err != nil {
		return c, usageError{err}
	}
	return c, nil
}

// outcomeTarget finds --results-configmap ns/name and --run-id in raw args
// ("--flag value" or "--flag=value"), for reporting a command line that
// does not parse.
func outcomeTarget(args []string) (ns, name, runID string, ok bool) {
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

// vmMode reports whether the clients run in VMs over SSH.
func (c runConfig) vmMode() bool { return len(c.SSHClients) > 0 }

// sshTarget returns user@host of pair i's client VM (i counts from 0).
func (c runConfig) sshTarget(i int) string { return c.withUser(c.SSHClients[i]) }

// withUser returns host as user@host, with --ssh-user unless it has one.
func (c runConfig) withUser(host string) string {
	if strings.Contains(host, "@") {
		return host
	}
	return c.SSHUser + "@" + host
}

// ssh returns the SSH executor of a guest, user@host.
func (c runConfig) ssh(target string) netperf.Prefix {
	return netperf.SSH(target, append([]string{"-i", c.SSHKey}, sshOptions...)...)
}

// runner wires the parsed configuration to a bench.Runner: tools by test,
// and in VM mode an SSH executor per pair.
func (c runConfig) runner() *bench.Runner {
	np := bench.Netperf{Binary: c.Netperf}
	tools := map[string]bench.Tool{results.TCPStream: np, results.TCPRR: np}
	if c.hasVSock() {
		var vs bench.Tool = bench.VSock{Transport: c.Transport.transport()}
		if c.vmMode() {
			// The client runs in the client VM (guestBinary, put there by
			// provisionGuests), over the guest's own AF_VSOCK.
			vs = bench.GuestVSock{Binary: c.guestBinary("client")}
		}
		tools[results.VSockStream], tools[results.VSockRR] = vs, vs
	}
	r := &bench.Runner{Matrix: c.Matrix, Tools: tools}
	for _, p := range c.Paths {
		p.Endpoints = append([]bench.Endpoint(nil), p.Endpoints...)
		if c.vmMode() {
			for i := range p.Endpoints {
				if i < len(c.SSHClients) {
					p.Endpoints[i].Executor = c.ssh(c.sshTarget(i))
				}
			}
		}
		r.Paths = append(r.Paths, p)
	}
	return r
}

// hasVSock reports whether any test is a vsock test.
func (c runConfig) hasVSock() bool {
	for _, t := range c.Matrix.Tests {
		if bench.IsVSock(t) {
			return true
		}
	}
	return false
}

// vsockOnly reports whether every test is a vsock test (no IP paths).
func (c runConfig) vsockOnly() bool {
	for _, t := range c.Matrix.Tests {
		if !bench.IsVSock(t) {
			return false
		}
	}
	return true
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseRunArgs(args, stderr)
	if err != nil {
		// A command line the runner rejects means the controller and the
		// runner disagree on the contract: say so in the ConfigMap too.
		if ns, name, runID, ok := outcomeTarget(args); ok && !errors.Is(err, flag.ErrHelp) {
			if cs, cerr := coreClient(); cerr == nil {
				sink := bench.ConfigMapSink{Client: cs, Namespace: ns, Name: name, RunID: runID}
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if _, werr := sink.Write(wctx, results.Document{}, fmt.Errorf("runner rejected its command line: %w", err)); werr != nil {
					fmt.Fprintln(stderr, werr)
				}
			}
		}
		return err
	}
	log := newLogger(stderr, c.Quiet)
	var sink *bench.ConfigMapSink
	if c.ResultsName != "" {
		cs, err := coreClient()
		if err != nil {
			return err
		}
		sink = &bench.ConfigMapSink{Client: cs, Namespace: c.ResultsNamespace, Name: c.ResultsName, RunID: c.RunID}
	}
	doc, runErr := c.run(logr.NewContext(ctx, log), log)
	if runErr == nil {
		if err := results.Encode(stdout, doc); err != nil {
			runErr = err
		}
	}
	if sink != nil {
		// The outcome is written even when ctx was cancelled (Job deadline,
		// SIGTERM), so the controller learns why the run ended.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		data, err := sink.Write(wctx, doc, runErr)
		if err != nil {
			return errors.Join(runErr, err)
		}
		if reason := data[benchjob.ErrorReasonKey]; reason != nil {
			log.Info("Wrote the error to the results ConfigMap", "configMap", c.ResultsNamespace+"/"+c.ResultsName, "runID", c.RunID, "errorReason", *reason)
		} else {
			log.Info("Wrote the results to the results ConfigMap", "configMap", c.ResultsNamespace+"/"+c.ResultsName, "runID", c.RunID, "bytes", len(*data[benchjob.ResultsKey]))
		}
	}
	return runErr
}

// run measures the matrix and returns the results document.
func (c runConfig) run(ctx context.Context, log logr.Logger) (results.Document, error) {
	r := c.runner()
	for i := range r.Paths {
		p := &r.Paths[i]
		if c.MTUGiven[p.Name] || c.vmMode() || c.vsockOnly() {
			continue
		}
		mtu, err := bench.LocalMTU(p.Endpoints[0].Host)
		if err != nil {
			log.Info("Unknown MTU", "path", p.Name, "error", err.Error())
			continue
		}
		p.MTU = mtu
	}
	// What the starter of this process says is emulated (the demo's emulated
	// kubelet), then --emulated, then the vsock transport.
	var vsockNote string
	if c.hasVSock() {
		vsockNote = c.Transport.emulationNote()
	}
	emulated := results.JoinEmulated(os.Getenv(results.EmulatedEnv), c.Emulated, vsockNote)
	if c.vmMode() && c.hasVSock() {
		cleanup, err := c.provisionGuests(ctx, log)
		defer cleanup()
		if err != nil {
			return results.Document{}, err
		}
	}
	log.Info("Starting", "points", len(c.Matrix.Points()), "paths", len(r.Paths), "estimate", c.Matrix.Estimate(len(r.Paths)).Round(time.Second).String(), "vmMode", c.vmMode())
	doc, err := bench.Document(ctx, r, emulated)
	if err != nil && c.vmMode() && errors.Is(err, netperf.ErrNetserverUnreachable) {
		err = fmt.Errorf("%w (VM mode: netserver is not running in the server VM, or not on port %d; start it in the guest with `netserver -p %d`, as the sample VMs' cloud-init runcmd does)",
			err, benchjob.NetserverPort, benchjob.NetserverPort)
	}
	return doc, err
}
