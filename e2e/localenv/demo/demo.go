package demo

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/report"
	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// Names the demo uses.
const (
	// Namespace is where the samples are applied.
	Namespace = "fastpath-demo"
	// SSHSecret and SSHPubSecret are the Secrets the samples reference: the
	// benchmark's private key and the VMs' accessCredentials public key.
	SSHSecret    = "fastpath-bench-ssh"
	SSHPubSecret = "fastpath-bench-ssh-pub"
	// FullBenchmark is the name of the papers'-matrix benchmark of --full.
	FullBenchmark = "db-link-full"
	// OutsiderCID is the vsock CID the demo dials the relay from to show a
	// refusal: no VM of the attachment has it.
	OutsiderCID = 99
)

// Options configure Run.
type Options struct {
	// RepoRoot is the repository (config/samples, bin/); default: found from
	// the working directory.
	RepoRoot string
	// BinDir holds the binaries; default <RepoRoot>/bin.
	BinDir string
	// Full also runs the papers' whole matrix (FullBenchmark).
	Full bool
	// Guests is "netns" (default: guests are network namespaces) or "qemu"
	// (REAL VMs, e2e/localenv/guests; the proof runs inside them and
	// replaces the FastPathBenchmark step, whose VM mode needs SSH).
	Guests string
	// Out receives everything the demo prints; default os.Stdout.
	Out io.Writer
}

// demo is one run.
type demo struct {
	o   Options
	out io.Writer
	// emu receives the emulation's lines; it holds them back while a kubectl
	// command prints, so that command and output stay together.
	emu     *heldWriter
	bin     string
	outDir  string
	stack   *Stack
	step    int
	steps   int
	started time.Time
	// streamLines are the real-guest stream ratio lines, for the report.
	streamLines []string
}

// Run runs the demo (issue 7): embedded control plane, real operator and
// agent, the samples applied with kubectl, the emulated KubeVirt/Multus/
// kubelet, the vsock relay, the benchmark through the controller, the status
// and results, and removal of everything it made, also when ctx is cancelled
// (Ctrl-C). It returns an error when a step fails or the benchmark did not
// succeed (after printing the results it has).
func Run(ctx context.Context, o Options) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.RepoRoot == "" {
		if o.RepoRoot, err = repoRoot(); err != nil {
			return err
		}
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoRoot, "bin")
	}
	d := &demo{o: o, out: o.Out, emu: &heldWriter{w: o.Out}, bin: o.BinDir, outDir: filepath.Join(o.RepoRoot, "_out", "demo"), steps: 7, started: time.Now()}
	if err := CheckRequirements(d.bin); err != nil {
		return err
	}
	realGuests := false
	switch o.Guests {
	case "", emulation.GuestsNetNS:
	case emulation.GuestsQEMU:
		realGuests = true
		d.steps += 2 // the Sibling and unwire steps
		if err := CheckGuestRequirements(d.bin); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--guests %q must be %q or %q", o.Guests, emulation.GuestsNetNS, emulation.GuestsQEMU)
	}
	mode := "quick"
	if o.Full {
		mode = "full (the papers' matrix)"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(d.out, "Fastpath demo, %s, on %s (%d CPUs). Lines starting with EMULATED come from the stand-ins for KubeVirt, Multus and the kubelet; everything else is real.\n", mode, host, runtime.NumCPU())

	bridges, err := sampleBridges(filepath.Join(o.RepoRoot, "config", "samples"))
	if err != nil {
		return err
	}
	d.header("Embedded control plane: kube-apiserver and etcd (real)")
	if err := os.MkdirAll(d.outDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", d.outDir, err)
	}
	logFile, err := os.Create(filepath.Join(d.outDir, "emulation-controllers.log"))
	if err != nil {
		return fmt.Errorf("failed to create the emulation's controller log: %w", err)
	}
	defer logFile.Close()
	ctrllog.SetLogger(zap.New(zap.WriteTo(logFile)))
	for _, f := range []string{"report.md", "report.html", "results.json"} {
		_ = os.Remove(filepath.Join(d.outDir, f))
	}
	d.stack, err = StartStack(ctx, StackOptions{
		BinDir:       d.bin,
		WorkDir:      d.outDir,
		Namespaces:   []string{Namespace},
		NetNSPrefix:  "fpdemo-",
		HostIfPrefix: "fpdv",
		PodCIDR:      netip.MustParsePrefix("10.244.250.0/24"),
		Bridges:      bridges,
		RunnerImage:  "ghcr.io/fastpath-io/fastpath:dev",
		Guests:       o.Guests,
		Out:          d.emu,
	})
	defer func() {
		if ctx.Err() != nil {
			fmt.Fprintln(d.out, "\nInterrupted: cleaning up (Ctrl-C again to abort; the next run then cleans up)")
		}
		d.header("Cleanup: emulated VMs, CNI DEL, operator, agent, bridges, control plane")
		if d.stack != nil {
			if stopErr := d.stack.Stop(); stopErr != nil {
				fmt.Fprintf(d.out, "cleanup: %v\n", stopErr)
				err = errors.Join(err, stopErr)
			} else {
				fmt.Fprintln(d.out, "removed everything the demo made; _out/demo keeps the report and logs")
			}
		}
		fmt.Fprintf(d.out, "demo took %s\n", time.Since(d.started).Round(time.Second))
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "kube-apiserver %s with the fastpath.io CRDs and KubeVirt/Multus fixture CRDs; kubeconfig %s\n", d.stack.Env.Config.Host, d.rel(d.stack.Kubeconfig))
	d.header("Operator and node agent (real processes)")
	fmt.Fprintf(d.out, "fastpath-operator running; log %s\n", d.rel(d.stack.OperatorLog))
	fmt.Fprintf(d.out, "fastpath-agent running as node %s (CNI binary installed into %s, vsock relay over the EMULATED UNIX-socket transport %s); log %s\n",
		d.stack.NodeName, d.rel(d.stack.CNIBinDir), d.rel(d.stack.VSOCKRoot), d.rel(d.stack.AgentLog))
	if d.stack.SiblingSocketDir != "" {
		fmt.Fprintf(d.out, "  and with --vhost-device-vsock (v0.3.0, bin/): vsock mode Sibling on this node, vhost-user sockets in %s\n", d.rel(d.stack.SiblingSocketDir))
	}

	if err := d.applySamples(ctx); err != nil {
		return err
	}
	if err := d.waitAttachment(ctx); err != nil {
		return err
	}
	var benchErr error
	if realGuests {
		if err := d.startSibling(ctx); err != nil {
			return err
		}
		benchErr = d.realGuestProof(ctx)
		if benchErr == nil {
			if err := d.showStatus(ctx); err != nil {
				return err
			}
			return d.realGuestUnwire(ctx)
		}
	} else {
		if err := d.showVSOCK(ctx); err != nil {
			return err
		}
		benchErr = d.runBenchmarks(ctx)
	}
	if ctx.Err() != nil {
		return errors.Join(benchErr, ctx.Err())
	}
	if err := d.showStatus(ctx); err != nil {
		return errors.Join(benchErr, err)
	}
	return benchErr
}

func (d *demo) header(title string) {
	d.step++
	fmt.Fprintf(d.out, "\n[%d/%d] %s  (+%s)\n", d.step, d.steps, title, time.Since(d.started).Round(time.Second))
}

// rel returns p relative to the repository root when it is inside it.
func (d *demo) rel(p string) string {
	if r, err := filepath.Rel(d.o.RepoRoot, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// kubectl runs bin/kubectl with the demo kubeconfig, printing the command
// line as a user would type it and the output indented.
func (d *demo) kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	d.emu.hold()
	defer d.emu.release()
	fmt.Fprintf(d.out, "$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.stack.Kubeconfig)
	cmd.Dir = d.o.RepoRoot
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	d.indent(out)
	if err != nil {
		return out, fmt.Errorf("failed to run kubectl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

func (d *demo) indent(out []byte) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fmt.Fprintf(d.out, "  %s\n", sc.Text())
	}
}

// waitAttachment waits until every FastPathAttachment of the namespace is
// Ready, printing condition changes; the emulation runs meanwhile.
func (d *demo) waitAttachment(ctx context.Context) error {
	d.header("KubeVirt and Multus emulated on this node; the operator wires the VMs, the agent the node")
	return d.waitAttachments(ctx)
}

// waitAttachments is waitAttachment without its header.
func (d *demo) waitAttachments(ctx context.Context) error {
	last := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		if err := d.stack.CheckProcesses(); err != nil {
			return false, err
		}
		list := &fastpathv1alpha1.FastPathAttachmentList{}
		if err := d.stack.Client.List(ctx, list, clientInNamespace(Namespace)); err != nil {
			return false, fmt.Errorf("failed to list FastPathAttachments: %w", err)
		}
		ready := len(list.Items) > 0
		for _, a := range list.Items {
			for _, c := range a.Status.Conditions {
				k := a.Name + "/" + c.Type
				v := fmt.Sprintf("%s %s", c.Status, c.Reason)
				if last[k] != v {
					last[k] = v
					msg := ""
					if c.Status != "True" && c.Message != "" {
						msg = ": " + c.Message
					}
					fmt.Fprintf(d.out, "FastPathAttachment %s: %s=%s (%s)%s\n", a.Name, c.Type, c.Status, c.Reason, msg)
				}
			}
			if err := refusal(&a); err != nil {
				return false, err
			}
			c := apimeta.FindStatusCondition(a.Status.Conditions, fastpathv1alpha1.ReadyCondition)
			if c == nil || c.Status != "True" || c.ObservedGeneration != a.Generation {
				ready = false
			}
		}
		return ready, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("failed to see the attachments Ready within 3m: see %s and %s", d.rel(d.stack.OperatorLog), d.rel(d.stack.AgentLog))
	}
	return err
}

// showVSOCK plays a guest service in the target VM of every vsock service,
// connects from another selected VM through the relay, and shows that a CID
// outside the attachment is refused.
func (d *demo) showVSOCK(ctx context.Context) error {
	list := &fastpathv1alpha1.FastPathAttachmentList{}
	if err := d.stack.Client.List(ctx, list, clientInNamespace(Namespace)); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	for _, a := range list.Items {
		for _, svc := range a.Status.VSOCKServices {
			if err := d.vsockService(ctx, &a, svc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *demo) vsockService(ctx context.Context, a *fastpathv1alpha1.FastPathAttachment, svc fastpathv1alpha1.VSOCKServiceStatus) error {
	emu := d.stack.Emulator
	target := types.NamespacedName{Namespace: a.Namespace, Name: svc.VM}
	var client *types.NamespacedName
	for _, vm := range a.Status.VMs {
		if vm.Name != svc.VM {
			client = &types.NamespacedName{Namespace: a.Namespace, Name: vm.Name}
			break
		}
	}
	if client == nil {
		return fmt.Errorf("failed to show vsock service %s: the attachment selects no VM besides %s", svc.Name, svc.VM)
	}
	tt, err := emu.VSOCK(target)
	if err != nil {
		return err
	}
	ln, err := tt.Listen(uint32(svc.Port))
	if err != nil {
		return fmt.Errorf("failed to listen as the guest service %s: %w", svc.Name, err)
	}
	defer ln.Close()
	fmt.Fprintf(d.out, "%s %-15s guest %s (CID %d) listens on vsock port %d (service %q)\n", emulation.Label, "guest:", svc.VM, tt.CID, svc.Port, svc.Name)
	emulation.ServeLines(ln, func(line string, peer uint32) string {
		return fmt.Sprintf("%s answers %q (connection from CID %d, the relay)", svc.VM, line, peer)
	})
	ct, err := emu.VSOCK(*client)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "%s %-15s guest %s (CID %d) dials CID %d port %d (relay port of %q from the attachment status; allowed CIDs %v)\n",
		emulation.Label, "guest:", client.Name, ct.CID, vsock.HostCID, svc.RelayPort, svc.Name, svc.AllowedCIDs)
	reply, err := emulation.RequestLine(ctx, ct, vsock.HostCID, uint32(svc.RelayPort), "SELECT 1")
	if err != nil {
		return fmt.Errorf("failed to reach vsock service %s through the relay from %s: %w (see %s)", svc.Name, client.Name, err, d.rel(d.stack.AgentLog))
	}
	fmt.Fprintf(d.out, "  -> %s", reply)
	outsider := vsock.NewUnixTransport(d.stack.VSOCKRoot, OutsiderCID)
	fmt.Fprintf(d.out, "%s %-15s a guest with CID %d, outside the attachment, dials CID %d port %d\n", emulation.Label, "guest:", OutsiderCID, vsock.HostCID, svc.RelayPort)
	reply, err = emulation.RequestLine(ctx, outsider, vsock.HostCID, uint32(svc.RelayPort), "SELECT 1")
	switch {
	case err != nil:
		fmt.Fprintf(d.out, "  -> refused by the relay: %v\n", err)
	case reply == "":
		fmt.Fprintf(d.out, "  -> refused: the relay closed the connection without forwarding it\n")
	default:
		return fmt.Errorf("failed to see the relay refuse CID %d: it answered %q", OutsiderCID, reply)
	}
	if line := lastLineContaining(d.stack.AgentLog, fmt.Sprint(OutsiderCID)); line != "" {
		fmt.Fprintf(d.out, "  agent log: %s\n", line)
	}
	return nil
}

// runBenchmarks waits for the samples' benchmarks (and, with Full, then
// applies and waits for the papers' matrix) to finish.
func (d *demo) runBenchmarks(ctx context.Context) error {
	d.header("Benchmark: the FastPathBenchmark controller's runner Job, run by the emulated kubelet in the client VM")
	list := &fastpathv1alpha1.FastPathBenchmarkList{}
	if err := d.stack.Client.List(ctx, list, clientInNamespace(Namespace)); err != nil {
		return fmt.Errorf("failed to list FastPathBenchmarks: %w", err)
	}
	var errs []error
	for _, b := range list.Items {
		if err := d.waitBenchmark(ctx, b.Name, benchTimeout(b.Spec)); err != nil {
			errs = append(errs, err)
		}
	}
	if d.o.Full {
		manifest := fullBenchmark(list.Items)
		if manifest == nil {
			return errors.Join(append(errs, fmt.Errorf("failed to derive the full benchmark: the samples have no FastPathBenchmark"))...)
		}
		data, err := yaml.Marshal(manifest)
		if err != nil {
			return fmt.Errorf("failed to render the full benchmark: %w", err)
		}
		path := filepath.Join(d.outDir, FullBenchmark+".yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
		fmt.Fprintf(d.out, "The papers' matrix: socket 64/256 KiB x message 512 B-64 KiB x 1 and 5 sessions, TCP_RR, 3 runs of %s per point and path\n", manifest.Spec.Duration.Duration)
		if _, err := d.kubectl(ctx, nil, "-n", Namespace, "apply", "-f", d.rel(path)); err != nil {
			return err
		}
		if err := d.waitBenchmark(ctx, FullBenchmark, benchTimeout(manifest.Spec)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fullBenchmark is the first sample benchmark with the papers' default matrix
// (every matrix field unset, so the API defaults apply) at 10 s per run.
func fullBenchmark(samples []fastpathv1alpha1.FastPathBenchmark) *fastpathv1alpha1.FastPathBenchmark {
	if len(samples) == 0 {
		return nil
	}
	s := samples[0].Spec.DeepCopy()
	s.Tests, s.SocketSizes, s.MessageSizes, s.Sessions, s.Repetitions = nil, nil, nil, nil, nil
	s.Duration = &metaDuration{Duration: 10 * time.Second}
	return &fastpathv1alpha1.FastPathBenchmark{
		TypeMeta:   typeMeta("FastPathBenchmark"),
		ObjectMeta: objectMeta(FullBenchmark, Namespace),
		Spec:       *s,
	}
}

// benchTimeout is the whole matrix's run time with margin.
func benchTimeout(spec fastpathv1alpha1.FastPathBenchmarkSpec) time.Duration {
	return benchjob.Deadline(fastpathv1alpha1.DefaultBenchmarkSpec(spec))
}

func (d *demo) waitBenchmark(ctx context.Context, name string, timeout time.Duration) error {
	fmt.Fprintf(d.out, "waiting for FastPathBenchmark %s (at most %s)\n", name, timeout.Round(time.Second))
	var lastPhase fastpathv1alpha1.BenchmarkPhase
	lastCond := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		if err := d.stack.CheckProcesses(); err != nil {
			return false, err
		}
		b := &fastpathv1alpha1.FastPathBenchmark{}
		if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, b); err != nil {
			return false, fmt.Errorf("failed to get FastPathBenchmark %s: %w", name, err)
		}
		if b.Status.Phase != lastPhase {
			lastPhase = b.Status.Phase
			fmt.Fprintf(d.out, "FastPathBenchmark %s: phase %s (+%s)\n", name, b.Status.Phase, time.Since(d.started).Round(time.Second))
		}
		for _, c := range b.Status.Conditions {
			v := string(c.Status) + " " + c.Reason + " " + c.Message
			if lastCond[c.Type] != v {
				lastCond[c.Type] = v
				fmt.Fprintf(d.out, "FastPathBenchmark %s: %s=%s (%s) %s\n", name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
		switch b.Status.Phase {
		case fastpathv1alpha1.BenchmarkSucceeded:
			return true, d.results(ctx, b)
		case fastpathv1alpha1.BenchmarkFailed:
			_ = d.results(ctx, b)
			return false, fmt.Errorf("failed: FastPathBenchmark %s ended Failed (see its conditions above)", name)
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("failed to see FastPathBenchmark %s finish within %s", name, timeout.Round(time.Second))
	}
	return err
}

// results reads the benchmark's results ConfigMap, prints the table and the
// ratios, and writes results.json, report.md and report.html (with the
// charts) into _out/demo (the full benchmark's into _out/demo/<name>/).
func (d *demo) results(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark) error {
	doc, err := benchjob.ReadResults(ctx, d.stack.Client, b)
	if err != nil {
		fmt.Fprintf(d.out, "no results: %v\n", err)
		return err
	}
	dir := d.outDir
	if b.Name == FullBenchmark {
		dir = filepath.Join(d.outDir, b.Name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	var buf bytes.Buffer
	if err := results.Encode(&buf, doc); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write results.json: %w", err)
	}
	r, err := report.Render(doc, report.Options{Title: "Fastpath demo: " + b.Name})
	if err != nil {
		return err
	}
	files, err := r.WriteDir(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nResults of %s (fast path beside the pod-network baseline; medians of %d runs):\n", b.Name, len(doc.Runs[0].Samples))
	if err := report.WriteResultsTable(d.out, doc); err != nil {
		return err
	}
	for _, l := range r.Lines {
		fmt.Fprintln(d.out, l)
	}
	if b.Status.BestGbps != "" || b.Status.Speedup != "" {
		fmt.Fprintf(d.out, "status: best %s Gbit/s, speed-up %s, cpuRatio %s (fast path / baseline CPU per byte, lower is better)\n", b.Status.BestGbps, b.Status.Speedup, cmp.Or(b.Status.CPURatio, "-"))
	}
	var rels []string
	for _, f := range append([]string{filepath.Join(dir, "results.json")}, files...) {
		if strings.HasSuffix(f, ".svg") {
			continue
		}
		rels = append(rels, d.rel(f))
	}
	slices.Sort(rels)
	fmt.Fprintf(d.out, "wrote %s\n", strings.Join(rels, ", "))
	return nil
}

// showStatus prints what a user looks at: the attachments and nodes as
// kubectl shows them, the VMIs and the benchmarks.
func (d *demo) showStatus(ctx context.Context) error {
	d.header("Status, as kubectl shows it")
	cmds := [][]string{
		{"-n", Namespace, "get", "fpa,fpn", "-o", "wide"},
		{"-n", Namespace, "get", "vmi", "-o", "wide"},
		{"-n", Namespace, "get", "fpb"},
	}
	if d.o.Guests == emulation.GuestsQEMU {
		cmds = cmds[:2]
	}
	for _, args := range cmds {
		if _, err := d.kubectl(ctx, nil, args...); err != nil {
			return err
		}
	}
	if d.o.Guests == emulation.GuestsQEMU {
		fmt.Fprintf(d.out, "report: %s, %s, %s\n", d.rel(filepath.Join(d.outDir, "report.md")), d.rel(filepath.Join(d.outDir, "report.html")), d.rel(filepath.Join(d.outDir, "results.json")))
		return nil
	}
	fmt.Fprintf(d.out, "report: %s, %s, %s\n", d.rel(filepath.Join(d.outDir, "report.md")), d.rel(filepath.Join(d.outDir, "report.html")), d.rel(filepath.Join(d.outDir, "results.json")))
	return nil
}
