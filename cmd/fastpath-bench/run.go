package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/fastpath-io/fastpath/internal/bench"
	"github.com/fastpath-io/fastpath/internal/netperf"
	"github.com/fastpath-io/fastpath/internal/results"
)

func init() {
	register("run", "run the netperf matrix over the given paths and print the results JSON", runCmd)
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultMatrix()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		tests       = fs.String("tests", strings.Join(def.Tests, ","), "tests to run: TCP_STREAM, TCP_RR")
		sockets     = fs.String("socket-sizes", "64K,256K", "socket buffer sizes (netperf -s/-S); 0 is the kernel default")
		messages    = fs.String("message-sizes", "512,4K,16K,64K", "stream send sizes (netperf -m)")
		rrSizes     = fs.String("rr-sizes", "1", "request/response sizes of RR tests (netperf -r n,n)")
		sessions    = fs.String("sessions", "1,5", "concurrent sessions per pair")
		pairs       = fs.String("pairs", "1", "client/server pairs at once; each path needs as many hosts")
		duration    = fs.Duration("duration", def.Duration, "length of each test, whole seconds")
		repetitions = fs.Int("repetitions", def.Repetitions, "runs per point and path; the median is reported")
		netperfBin  = fs.String("netperf", netperf.DefaultBinary, "netperf client binary")
		emulated    = fs.String("emulated", "", "what is emulated, recorded in machine.emulated")
		sshTarget   = fs.String("ssh", "", "run the netperf clients on user@host over SSH instead of here")
		sshKey      = fs.String("ssh-key", "", "identity file for --ssh")
		quiet       = fs.Bool("quiet", false, "do not log progress to stderr")
		paths       multiFlag
		mtus        multiFlag
		sshOpts     multiFlag
	)
	fs.Var(&paths, "path", "a path to measure, name=host[:port][,host[:port]...] (one host per pair); repeat for more paths, measured in turn")
	fs.Var(&mtus, "mtu", "name=bytes, the MTU of a path; default: the local interface towards its first host (not with --ssh)")
	fs.Var(&sshOpts, "ssh-option", "an ssh -o option for --ssh, e.g. StrictHostKeyChecking=accept-new; repeatable")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	m := bench.Matrix{Tests: bench.ParseList(*tests), Duration: *duration, Repetitions: *repetitions}
	for _, f := range []struct {
		dst   *[]int
		val   string
		parse func(string) ([]int, error)
	}{
		{&m.SocketSizes, *sockets, bench.ParseSizes},
		{&m.MessageSizes, *messages, bench.ParseSizes},
		{&m.RRSizes, *rrSizes, bench.ParseSizes},
		{&m.Sessions, *sessions, bench.ParseCounts},
		{&m.Pairs, *pairs, bench.ParseCounts},
	} {
		if *f.dst, err = f.parse(f.val); err != nil {
			return usageError{err}
		}
	}
	var ex netperf.Executor = netperf.Local{}
	if *sshTarget != "" {
		var opts []string
		if *sshKey != "" {
			opts = append(opts, "-i", *sshKey)
		}
		for _, o := range sshOpts {
			opts = append(opts, "-o", o)
		}
		ex = netperf.SSH(*sshTarget, opts...)
	}
	mtuOf := map[string]int{}
	for _, s := range mtus {
		name, v, err := bench.ParseNameInt(s)
		if err != nil {
			return usageError{err}
		}
		mtuOf[name] = v
	}
	log := logr.Discard()
	if !*quiet {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(stderr, prefix, args) }, funcr.Options{})
	}
	r := &bench.Runner{Matrix: m, Tools: map[string]bench.Tool{results.TCPStream: bench.Netperf{Binary: *netperfBin}, results.TCPRR: bench.Netperf{Binary: *netperfBin}}}
	for _, s := range paths {
		p, err := bench.ParsePath(s)
		if err != nil {
			return usageError{err}
		}
		for i := range p.Endpoints {
			p.Endpoints[i].Executor = ex
		}
		if v, ok := mtuOf[p.Name]; ok {
			p.MTU = v
		} else if *sshTarget == "" {
			if p.MTU, err = bench.LocalMTU(p.Endpoints[0].Host); err != nil {
				log.Info("Unknown MTU", "path", p.Name, "error", err.Error())
			}
		}
		r.Paths = append(r.Paths, p)
	}
	if err := r.Validate(); err != nil {
		return usageError{err}
	}
	log.Info("Starting", "points", len(m.Points()), "paths", len(r.Paths), "estimate", m.Estimate(len(r.Paths)).Round(time.Second).String())
	doc, err := bench.Document(logr.NewContext(ctx, log), r, *emulated)
	if err != nil {
		return err
	}
	return results.Encode(stdout, doc)
}
