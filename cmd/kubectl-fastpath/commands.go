package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/bench/benchjob"
	"github.com/fastpath-io/fastpath/internal/bench/report"
	"github.com/fastpath-io/fastpath/internal/localenv/demo"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, _ := newFlags("demo", stderr)
	full := fs.Bool("full", false, "also run the papers' whole netperf matrix (about 25 minutes)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("demo takes no arguments, got %q", pos)}
	}
	return demo.Run(ctx, demo.Options{Full: *full, Out: stdout})
}

// newClient builds a client the way kubectl finds its cluster, and the
// namespace of the current context.
func newClient(kubeconfig string) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("failed to read the current namespace: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
	if err != nil {
		return nil, "", fmt.Errorf("failed to create client: %w", err)
	}
	return c, ns, nil
}

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, kubeconfig := newFlags("status", stderr)
	ns := fs.String("n", "", "namespace (default: the current context's)")
	fs.StringVar(ns, "namespace", "", "namespace (default: the current context's)")
	all := fs.Bool("A", false, "all namespaces")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("status takes no arguments, got %q", pos)}
	}
	c, current, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	if *ns == "" {
		*ns = current
	}
	var opts []client.ListOption
	if !*all {
		opts = append(opts, client.InNamespace(*ns))
	}
	fpas := &fastpathv1alpha1.FastPathAttachmentList{}
	if err := c.List(ctx, fpas, opts...); err != nil {
		return fmt.Errorf("failed to list FastPathAttachments: %w", err)
	}
	fpns := &fastpathv1alpha1.FastPathNodeList{}
	if err := c.List(ctx, fpns); err != nil {
		return fmt.Errorf("failed to list FastPathNodes: %w", err)
	}
	return writeStatus(stdout, fpas.Items, fpns.Items)
}

func condStatus(conds []metav1Condition, t string) (string, string) {
	c := apimeta.FindStatusCondition(conds, t)
	if c == nil {
		return "Unknown", ""
	}
	return string(c.Status), c.Reason
}

// writeStatus prints attachments (like `kubectl get fpa -o wide`) with their
// conditions, VMs and vsock services, then nodes with bridges and relay
// listeners.
func writeStatus(w io.Writer, fpas []fastpathv1alpha1.FastPathAttachment, fpns []fastpathv1alpha1.FastPathNode) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// next flushes the table so far and starts a new one, so that each table
	// is aligned on its own.
	next := func(old *tabwriter.Writer) *tabwriter.Writer {
		_ = old.Flush()
		return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	}
	sort.Slice(fpas, func(i, j int) bool { return fpas[i].Namespace+"/"+fpas[i].Name < fpas[j].Namespace+"/"+fpas[j].Name })
	if len(fpas) == 0 {
		fmt.Fprintln(tw, "No FastPathAttachments.")
	}
	for _, a := range fpas {
		ready, reason := condStatus(a.Status.Conditions, fastpathv1alpha1.ReadyCondition)
		fmt.Fprintf(tw, "FASTPATHATTACHMENT\tREADY\tREASON\tDATAPATH\tMTU\tVMS\tSELECTED\tNAD\n")
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", a.Namespace, a.Name, ready, reason, a.Status.Datapath, a.Status.MTU, a.Status.WiredVMs, a.Status.SelectedVMs, a.Status.NetworkAttachmentDefinition)
		var conds []string
		for _, c := range a.Status.Conditions {
			s := fmt.Sprintf("%s=%s", c.Type, c.Status)
			if c.Status != "True" && c.Message != "" {
				s += " (" + c.Message + ")"
			}
			conds = append(conds, s)
		}
		fmt.Fprintf(tw, "  conditions: %s\n", strings.Join(conds, ", "))
		tw = next(tw)
		if len(a.Status.VMs) > 0 {
			fmt.Fprintf(tw, "  VM\tWIRED\tNODE\tINTERFACE\tPOD IFACE\tMAC\tIPS\tMTU\tCID\tRELAY PORTS\tRESTART\tMESSAGE\n")
		}
		for _, vm := range a.Status.VMs {
			cid := "-"
			if vm.CID != nil {
				cid = fmt.Sprint(*vm.CID)
			}
			var ports []string
			for _, p := range vm.RelayPorts {
				ports = append(ports, fmt.Sprintf("%s=%d", p.Service, p.Port))
			}
			fmt.Fprintf(tw, "  %s\t%t\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%t\t%s\n", vm.Name, vm.Wired, dash(vm.Node), dash(vm.Interface), dash(vm.PodInterface), dash(vm.MAC),
				dash(strings.Join(vm.IPs, ",")), vm.MTU, cid, dash(strings.Join(ports, ",")), vm.RestartRequired, dash(vm.Message))
		}
		tw = next(tw)
		if len(a.Status.VSOCKServices) > 0 {
			fmt.Fprintf(tw, "  VSOCK SERVICE\tTARGET\tPORT\tRELAY PORT\tNODE\tTARGET CID\tALLOWED CIDS\n")
		}
		for _, s := range a.Status.VSOCKServices {
			cid := "-"
			if s.TargetCID != nil {
				cid = fmt.Sprint(*s.TargetCID)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%v\n", s.Name, s.VM, s.Port, s.RelayPort, dash(s.Node), cid, s.AllowedCIDs)
		}
		fmt.Fprintln(tw)
		tw = next(tw)
	}
	sort.Slice(fpns, func(i, j int) bool { return fpns[i].Name < fpns[j].Name })
	if len(fpns) == 0 {
		fmt.Fprintln(tw, "No FastPathNodes (is fastpath-agent running?).")
	}
	for _, n := range fpns {
		ready, reason := condStatus(n.Status.Conditions, fastpathv1alpha1.ReadyCondition)
		caps := n.Status.Capabilities
		ovs := "-"
		if caps.OVS != nil && caps.OVS.Reachable {
			ovs = caps.OVS.Version
		}
		fmt.Fprintf(tw, "FASTPATHNODE\tREADY\tREASON\tVHOST-NET\tVHOST-VSOCK\tTUN\tOVS\tKERNEL\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\t%t\t%s\t%s\n", n.Name, ready, reason, caps.VhostNet, caps.VhostVSOCK, caps.Tun, ovs, caps.Kernel)
		tw = next(tw)
		for _, c := range n.Status.Conditions {
			if c.Status != "True" && c.Message != "" {
				fmt.Fprintf(tw, "  %s=%s: %s\n", c.Type, c.Status, c.Message)
			}
		}
		for _, b := range n.Status.Bridges {
			fmt.Fprintf(tw, "  bridge %s\t%s\tMTU %d\tready=%t\t%s\t%s\n", b.Name, b.Datapath, b.MTU, b.Ready, strings.Join(b.Attachments, ","), b.Message)
		}
		for _, l := range n.Status.RelayListeners {
			fmt.Fprintf(tw, "  relay port %d\t%s/%s\t-> CID %d port %d\tallowed %v\n", l.Port, l.Attachment, l.Service, l.TargetCID, l.TargetPort, l.AllowedCIDs)
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("bench needs a subcommand: report or local")}
	}
	switch args[0] {
	case "report":
		return benchReport(ctx, args[1:], stdout, stderr)
	case "local":
		return benchLocal(ctx, args[1:], stdout, stderr)
	default:
		return usageError{fmt.Errorf("unknown bench subcommand %q", args[0])}
	}
}

func benchReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, kubeconfig := newFlags("bench report", stderr)
	ns := fs.String("n", "", "namespace (default: the current context's)")
	fs.StringVar(ns, "namespace", "", "namespace (default: the current context's)")
	out := fs.String("o", "", "directory for results.json, report.md, report.html and the charts (default ./<name>-report)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Errorf("bench report needs one FastPathBenchmark name, got %d", len(pos))}
	}
	c, current, err := newClient(*kubeconfig)
	if err != nil {
		return err
	}
	if *ns == "" {
		*ns = current
	}
	b := &fastpathv1alpha1.FastPathBenchmark{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: *ns, Name: pos[0]}, b); err != nil {
		return fmt.Errorf("failed to get FastPathBenchmark %s/%s: %w", *ns, pos[0], err)
	}
	writeBenchmarkHeader(stdout, b)
	doc, err := benchjob.ReadResults(ctx, c, b)
	if err != nil {
		return err
	}
	if err := demo.WriteResultsTable(stdout, doc); err != nil {
		return err
	}
	r, err := report.Render(doc, report.Options{Title: "FastPathBenchmark " + b.Namespace + "/" + b.Name})
	if err != nil {
		return err
	}
	for _, l := range r.Lines {
		fmt.Fprintln(stdout, l)
	}
	dir := *out
	if dir == "" {
		dir = b.Name + "-report"
	}
	files, err := r.WriteDir(dir)
	if err != nil {
		return err
	}
	data, err := jsonResults(doc)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), data, 0o644); err != nil {
		return fmt.Errorf("failed to write results.json: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s and %d more files in %s\n", filepath.Join(dir, "results.json"), len(files), dir)
	return nil
}

// benchLocal runs `fastpath-bench local ARGS`, found next to this executable
// or on PATH, with our stdio and signals.
func benchLocal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	bin := "fastpath-bench"
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), bin); fileExists(p) {
			bin = p
		}
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("failed to find fastpath-bench next to kubectl-fastpath or on PATH (make build): %w", err)
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"local"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to run %s local: %w", path, err)
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// writeBenchmarkHeader prints a benchmark's phase, best throughput and
// speed-up, then its True conditions (how the run ended) or, while none is
// True (Pending), all of them, so the reason it waits shows.
func writeBenchmarkHeader(stdout io.Writer, b *fastpathv1alpha1.FastPathBenchmark) {
	fmt.Fprintf(stdout, "FastPathBenchmark %s/%s: phase %s", b.Namespace, b.Name, dash(string(b.Status.Phase)))
	if b.Status.BestGbps != "" {
		fmt.Fprintf(stdout, ", best %s Gbit/s, speed-up %s", b.Status.BestGbps, dash(b.Status.Speedup))
	}
	fmt.Fprintln(stdout)
	anyTrue := slices.ContainsFunc(b.Status.Conditions, func(c metav1.Condition) bool { return c.Status == metav1.ConditionTrue })
	for _, cond := range b.Status.Conditions {
		if cond.Status == metav1.ConditionTrue || !anyTrue {
			fmt.Fprintf(stdout, "  %s=%s (%s) %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
}
