package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// SSHOptions are the ssh options of VM mode, as the runner contract states
// them (api/benchjob.RunnerArgs): guest host keys are unknown
// and change with every VM, so they are not checked.
var SSHOptions = []string{"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"}

// RunConfig is one run of `fastpath-bench run`: what to measure, where the
// servers are and, in VM mode, how to reach the guests the clients run in.
// api/benchjob.ParseRunnerArgs builds and validates it from the
// runner's command line.
type RunConfig struct {
	Matrix Matrix
	// Paths carry their servers; MTU is set from --mtu, 0 otherwise.
	Paths []Path
	// MTUGiven names the paths whose MTU came from --mtu.
	MTUGiven map[string]bool
	// SSHClients (VM mode): pair i's clients run on SSHClients[i], reached
	// with key SSHKey. Empty in Pod mode. SSHUser is the default user of
	// --ssh-clients and --ssh-servers entries without one.
	SSHClients []SSHGuest
	SSHUser    string
	SSHKey     string
	// SSHServers (VM mode with vsock tests): pair i's server VM, where the
	// runner starts `fastpath-bench vsock-server` on VSockServerPort.
	SSHServers      []SSHGuest
	VSockServerPort int
	// RunID names the run (the Job name); it also names the runner's copies
	// in the guests (GuestBinary).
	RunID string
	// Emulated is what --emulated adds to machine.emulated.
	Emulated string
	// Netperf is the netperf client binary.
	Netperf   string
	Transport TransportOptions
	// HostCPU (VM mode) is where the node agent of the VMs' node serves
	// the launchers' and the node's CPU counters; nil: not measured.
	HostCPU *HostCPU
	// SSHWait (VM mode) bounds how long the runner waits for every guest to
	// accept SSH before it measures (WaitForGuests); 0 is DefaultSSHWait.
	SSHWait time.Duration
}

// DefaultSSHWait is RunConfig.SSHWait's default: a VM the benchmark finds
// Running may still be booting (its VMI reports an address before sshd
// listens; under TCG, without KVM, a boot takes tens of seconds).
const DefaultSSHWait = 3 * time.Minute

// sshRetryInterval is the pause between two SSH attempts of WaitForGuests
// (a variable for tests).
var sshRetryInterval = 2 * time.Second

// WaitForGuests waits until every guest of VM mode (the clients, and the
// servers of vsock tests) runs `true` over SSH, trying each again every
// sshRetryInterval, for SSHWait in all. The error names each guest that
// did not answer in time and its last error (e.g. "Connection refused"
// while sshd starts, "Permission denied" for a key the guest lacks).
func (c RunConfig) WaitForGuests(ctx context.Context, log logr.Logger) error {
	wait := c.SSHWait
	if wait <= 0 {
		wait = DefaultSSHWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// Every guest is tried in each round, so one that never answers does
	// not use up the others' time.
	last := map[SSHGuest]string{}
	for _, g := range append(append([]SSHGuest(nil), c.SSHClients...), c.SSHServers...) {
		last[g] = "no attempt finished"
	}
	start := time.Now()
	for len(last) > 0 && ctx.Err() == nil {
		for _, t := range slices.SortedFunc(maps.Keys(last), func(a, b SSHGuest) int { return strings.Compare(a.String(), b.String()) }) {
			_, stderr, err := c.SSH(t).Run(ctx, []string{"true"})
			switch {
			case err == nil:
				log.Info("Guest accepts SSH", "guest", t.String(), "waited", time.Since(start).Round(time.Second).String())
				delete(last, t)
			case ctx.Err() == nil: // else the attempt was cut short: keep the one before
				last[t] = strings.TrimSpace(fmt.Sprintf("%v: %s", err, stderr))
			}
		}
		if len(last) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(sshRetryInterval):
			}
		}
	}
	var failed []string
	for t, msg := range last {
		failed = append(failed, t.String()+": "+msg)
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("failed to reach the guests over SSH within %s (VM mode: is the VM booted, sshd running and the key of spec.sshKeySecretRef in its authorized keys?): %s", wait, strings.Join(failed, "; "))
	}
	return nil
}

// WaitForNetservers (VM mode) waits until the netserver of every endpoint
// of paths (the vsock ones aside) answers netperf's control connection from
// its client, trying each again every sshRetryInterval, for SSHWait in
// all. WaitForGuests waits for the client VMs only; a server VM that the
// attachment has just restarted may still be booting (under TCG tens of
// seconds) when its client already answers. The probe is a 1-s TCP_RR, the
// cheapest netperf test; an answer that is not "netserver is not answering"
// or "host does not resolve" (netperf.Diagnose) ends the wait for that
// endpoint and is left to the measurement to report. The error names each
// endpoint whose netserver did not answer in time.
func (c RunConfig) WaitForNetservers(ctx context.Context, log logr.Logger, paths []Path) error {
	wait := c.SSHWait
	if wait <= 0 {
		wait = DefaultSSHWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	bin := c.Netperf
	if bin == "" {
		bin = "netperf"
	}
	pending := map[string]Endpoint{}
	last := map[string]string{}
	for _, p := range paths {
		if p.VSock || c.VSockOnly() {
			continue
		}
		for _, ep := range p.Endpoints {
			key := fmt.Sprintf("%s -> %s:%d", ep.executor(), ep.Host, ep.Port)
			pending[key], last[key] = ep, "no attempt finished"
		}
	}
	start := time.Now()
	for len(pending) > 0 && ctx.Err() == nil {
		for _, key := range slices.Sorted(maps.Keys(pending)) {
			ep := pending[key]
			argv := []string{bin, "-H", ep.Host, "-t", "TCP_RR", "-l", "1", "-P", "0"}
			if ep.Port != 0 {
				argv = append(argv, "-p", strconv.Itoa(ep.Port))
			}
			stdout, stderr, err := ep.executor().Run(ctx, argv)
			diag := netperf.Diagnose(stdout, stderr, err)
			switch {
			case err == nil && diag == nil, diag != nil && !errors.Is(diag, netperf.ErrNetserverUnreachable) && !errors.Is(diag, netperf.ErrHostUnresolvable):
				log.Info("Netserver answers", "endpoint", key, "waited", time.Since(start).Round(time.Second).String())
				delete(pending, key)
			case ctx.Err() == nil: // else the attempt was cut short: keep the one before
				if diag == nil {
					diag = err
				}
				last[key] = diag.Error()
			}
		}
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(sshRetryInterval):
			}
		}
	}
	var failed []string
	for key := range pending {
		failed = append(failed, key+": "+last[key])
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		return fmt.Errorf("%w within %s (VM mode: is netserver running in the server VM, on port %d unless the path says otherwise? the sample VMs start it with `netserver -p %d`): %s",
			netperf.ErrNetserverUnreachable, wait, netperf.DefaultControlPort, netperf.DefaultControlPort, strings.Join(failed, "; "))
	}
	return nil
}

// TCGNote is machine.emulated's note for guests without KVM: their CPUs,
// and so every CPU figure of theirs and of their launchers, are QEMU TCG's
// emulation.
func TCGNote(node string) string {
	return "emulated CPU (TCG): node " + node + " has no /dev/kvm, so QEMU emulates the guests' CPUs and the launchers' CPU time is mostly emulation"
}

// VMMode reports whether the clients run in VMs over SSH.
func (c RunConfig) VMMode() bool { return len(c.SSHClients) > 0 }

// SSH returns the SSH executor of a guest (netperf.SSH: the user after -l,
// the address after "--").
func (c RunConfig) SSH(g SSHGuest) netperf.Prefix {
	return netperf.SSH(g.User, g.Addr, append([]string{"-i", c.SSHKey}, SSHOptions...)...)
}

// HasVSock reports whether any test is a vsock test.
func (c RunConfig) HasVSock() bool {
	for _, t := range c.Matrix.Tests {
		if IsVSock(t) {
			return true
		}
	}
	return false
}

// VSockOnly reports whether every test is a vsock test (no IP paths).
func (c RunConfig) VSockOnly() bool {
	for _, t := range c.Matrix.Tests {
		if !IsVSock(t) {
			return false
		}
	}
	return true
}

// Runner wires the configuration to a Runner: tools by test, and in VM
// mode an SSH executor per pair.
func (c RunConfig) Runner() *Runner {
	// Pod mode runs the client pod and the netserver pods on one node, so
	// netperf's CPU figure is the node's, reported once.
	np := Netperf{Binary: c.Netperf, SameHost: !c.VMMode()}
	tools := map[string]Tool{}
	for _, t := range netperf.Tests {
		tools[t] = np
	}
	if c.HasVSock() {
		var vs Tool = VSock{Transport: c.Transport.Transport()}
		if c.VMMode() {
			// The client runs in the client VM (GuestBinary, put there by
			// ProvisionGuests), over the guest's own AF_VSOCK.
			vs = GuestVSock{Binary: c.GuestBinary("client")}
		}
		tools[results.VSockStream], tools[results.VSockRR] = vs, vs
	}
	r := &Runner{Matrix: c.Matrix, Tools: tools}
	if h := c.HostCPU; h != nil && c.VMMode() {
		r.HostCPU = func(ctx context.Context, pairs int) (results.HostCPUReading, error) {
			return h.Read(ctx, h.Pods(pairs))
		}
	}
	for _, p := range c.Paths {
		p.Endpoints = append([]Endpoint(nil), p.Endpoints...)
		if c.VMMode() {
			for i := range p.Endpoints {
				if i < len(c.SSHClients) {
					p.Endpoints[i].Executor = c.SSH(c.SSHClients[i])
				}
			}
		}
		r.Paths = append(r.Paths, p)
	}
	return r
}

// Run measures the matrix and returns the results document. Each path's
// client interface (not on a vsock path) is the local one towards its first
// server, or in VM mode pair 1's client guest's: the run records its name
// and the offloads it negotiated (LocalOffloads; GuestOffloads over SSH in
// VM mode, once the guests answer), and, outside VM mode, its MTU unless
// --mtu gave one;
// machine.emulated joins $FASTPATH_EMULATED, Emulated and the vsock
// transport's note. In VM mode with vsock tests the guests are provisioned
// first (ProvisionGuests) and cleaned up after.
func (c RunConfig) Run(ctx context.Context, log logr.Logger) (results.Document, error) {
	r := c.Runner()
	for i := range r.Paths {
		p := &r.Paths[i]
		if c.VMMode() || c.VSockOnly() || p.VSock {
			continue
		}
		ifc, err := LocalInterface(p.Endpoints[0].Host)
		if err != nil {
			log.Info("Unknown client interface: no MTU or offloads recorded", "path", p.Name, "error", err.Error())
			continue
		}
		p.Interface = ifc.Name
		if !c.MTUGiven[p.Name] {
			p.MTU = ifc.MTU
		}
		if p.Offloads, err = LocalOffloads(ifc.Name); err != nil {
			log.Info("Unknown offloads", "path", p.Name, "interface", ifc.Name, "error", err.Error())
		}
	}
	// What the starter of this process says is emulated (the demo's emulated
	// kubelet), then --emulated, then the vsock transport.
	var vsockNote string
	if c.HasVSock() {
		vsockNote = c.Transport.EmulationNote()
	}
	emulated := results.JoinEmulated(os.Getenv(results.EmulatedEnv), c.Emulated, vsockNote)
	if c.VMMode() {
		if err := c.WaitForGuests(ctx, log); err != nil {
			return results.Document{}, err
		}
		if err := c.WaitForNetservers(ctx, log, r.Paths); err != nil {
			return results.Document{}, err
		}
		// The client guest's own view of each path: pair 1's client,
		// towards its first server.
		for i := range r.Paths {
			p := &r.Paths[i]
			if p.VSock || c.VSockOnly() {
				continue
			}
			ifName, offloads, err := GuestOffloads(ctx, c.SSH(c.SSHClients[0]), p.Endpoints[0].Host)
			if err != nil {
				log.Info("Unknown offloads", "path", p.Name, "guest", c.SSHClients[0].String(), "error", err.Error())
				continue
			}
			p.Interface, p.Offloads = ifName, offloads
		}
	}
	guests := ""
	if r.HostCPU != nil {
		// One reading before the first point: the agent answers for these
		// launchers, and whether the node has KVM.
		first, err := r.HostCPU(ctx, c.Matrix.MaxPairs())
		switch {
		case err != nil:
			log.Info("Host CPU not measured: the node agent did not answer", "agent", c.HostCPU.Agent.String(), "error", err.Error())
			r.HostCPU = nil
		case first.KVM:
			guests = results.GuestsKVM
		default:
			guests = results.GuestsTCG
			emulated = results.JoinEmulated(emulated, TCGNote(first.Node))
		}
	}
	if c.VMMode() && c.HasVSock() {
		cleanup, err := c.ProvisionGuests(ctx, log)
		defer cleanup()
		if err != nil {
			return results.Document{}, err
		}
	}
	log.Info("Starting", "points", len(c.Matrix.Points()), "paths", len(r.Paths), "estimate", c.Matrix.Estimate(len(r.Paths)).Round(time.Second).String(), "vmMode", c.VMMode())
	doc, err := Document(ctx, r, emulated)
	if guests != "" {
		doc.Machine.Guests = guests
	}
	if err != nil && c.VMMode() && errors.Is(err, netperf.ErrNetserverUnreachable) {
		err = fmt.Errorf("%w (VM mode: netserver is not running in the server VM, or not on port %d; start it in the guest with `netserver -p %d`, as the sample VMs' cloud-init runcmd does)",
			err, netperf.DefaultControlPort, netperf.DefaultControlPort)
	}
	return doc, err
}
