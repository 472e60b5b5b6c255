package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
	"github.com/fastpath-io/fastpath/bench/report"
	"github.com/fastpath-io/fastpath/internal/node/cleanup"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// newDemoCmd is `demo ARGS`: `fastpath-dev demo ARGS` (the harness's
// development binary) in place of this process.
func newDemoCmd(execve func(string, []string) error) *cobra.Command {
	return &cobra.Command{
		Use:                "demo [--full] [--guests=netns|qemu]",
		Short:              "run Fastpath's whole job on this machine (root; runs fastpath-dev demo, see fastpath-dev demo --help)",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return execSibling(execve, "fastpath-dev", append([]string{"demo"}, args...))
		},
	}
}

// execSibling replaces this process with program (found next to this
// executable, else on PATH) and args.
func execSibling(execve func(string, []string) error, program string, args []string) error {
	bin := program
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), program); fileExists(p) {
			bin = p
		}
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("failed to find %s next to kubectl-fastpath or on PATH (make build): %w", program, err)
	}
	if err := execve(path, append([]string{path}, args...)); err != nil {
		return fmt.Errorf("failed to run %s: %w", path, err)
	}
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// newClient builds a client from kubectl's connection flags, and the
// namespace of -n or of the current context.
func newClient(kube *genericclioptions.ConfigFlags) (client.Client, string, error) {
	cfg, err := kube.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	ns, _, err := kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("failed to read the current namespace: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
	if err != nil {
		return nil, "", fmt.Errorf("failed to create client: %w", err)
	}
	return c, ns, nil
}

func newStatusCmd(kube *genericclioptions.ConfigFlags, stdout io.Writer) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "status [-n NS | -A]",
		Short: "FastPathAttachments and FastPathNodes with per-VM detail",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("status takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := newClient(kube)
			if err != nil {
				return err
			}
			var opts []client.ListOption
			if !all {
				opts = append(opts, client.InNamespace(ns))
			}
			fpas := &fastpathv1alpha1.FastPathAttachmentList{}
			if err := c.List(cmd.Context(), fpas, opts...); err != nil {
				return fmt.Errorf("failed to list FastPathAttachments: %w", err)
			}
			fpns := &fastpathv1alpha1.FastPathNodeList{}
			if err := c.List(cmd.Context(), fpns); err != nil {
				return fmt.Errorf("failed to list FastPathNodes: %w", err)
			}
			return writeStatus(stdout, fpas.Items, fpns.Items)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "all namespaces")
	return cmd
}

func newBenchCmd(kube *genericclioptions.ConfigFlags, stdout, stderr io.Writer, execve func(string, []string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "run FastPathBenchmarks as CI gates, their reports, and the local node benchmark",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("bench needs a subcommand: run, compare, report or local")
			}
			return fmt.Errorf("unknown bench subcommand %q", args[0])
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	var out string
	rep := &cobra.Command{
		Use:   "report NAME [-o DIR]",
		Short: "print a FastPathBenchmark's results and write results.json, results.csv, report.md and report.html",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("bench report needs one FastPathBenchmark name, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := newClient(kube)
			if err != nil {
				return err
			}
			b := &fastpathv1alpha1.FastPathBenchmark{}
			if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, b); err != nil {
				return fmt.Errorf("failed to get FastPathBenchmark %s/%s: %w", ns, args[0], err)
			}
			writeBenchmarkHeader(stdout, b)
			doc, err := benchjob.ReadResults(cmd.Context(), c, b)
			if err != nil {
				return err
			}
			return writeBenchmarkReport(stdout, stderr, b, doc, out)
		},
	}
	rep.Flags().StringVarP(&out, "out", "o", "", "directory for results.json, results.csv, report.md, report.html and the charts (default ./<name>-report)")
	local := &cobra.Command{
		Use:                "local [ARGS]",
		Short:              "run the local node benchmark and exit by its targets (fastpath-bench local ARGS; see fastpath-bench local --help)",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			// fastpath-bench replaces this process and exits by the targets
			// (0 met, 1 missed, 2 could not run); not found, it could not run.
			if err := execSibling(execve, "fastpath-bench", append([]string{"local"}, args...)); err != nil {
				return &gate.ExitError{Code: gate.ExitCouldNotRun, Err: err}
			}
			return nil
		},
	}
	cmd.AddCommand(newBenchRunCmd(kube, stdout, stderr), newBenchCompareCmd(kube, stdout), rep, local)
	return cmd
}

// writeBenchmarkReport prints the results table and ratio lines of b and
// writes results.json and the report into dir (default ./<name>-report).
func writeBenchmarkReport(stdout, stderr io.Writer, b *fastpathv1alpha1.FastPathBenchmark, doc results.Document, dir string) error {
	if err := report.WriteResultsTable(stdout, doc); err != nil {
		return err
	}
	r, err := report.Render(doc, report.Options{Title: "FastPathBenchmark " + b.Namespace + "/" + b.Name})
	if err != nil {
		return err
	}
	for _, l := range r.Lines {
		fmt.Fprintln(stdout, l)
	}
	if dir == "" {
		dir = b.Name + "-report"
	}
	files, err := r.WriteDir(dir)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.json"))
	if err != nil {
		return fmt.Errorf("failed to write results.json: %w", err)
	}
	if err := results.Encode(f, doc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to write results.json: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "results.csv"), "CSV", func(w io.Writer) error {
		return results.WriteCSV(w, doc, results.CSVOptions{VM: b.Spec.Mode == fastpathv1alpha1.BenchmarkModeVM})
	}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s, results.csv and %d more files in %s\n", filepath.Join(dir, "results.json"), len(files), dir)
	return nil
}

func newTuningCmd(kube *genericclioptions.ConfigFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "tuning NETWORK",
		Short: "a FastPathNetwork's tuning: per node the evidence per candidate, the recommendation and a chart",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("tuning needs one FastPathNetwork name, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := newClient(kube)
			if err != nil {
				return err
			}
			n := &fastpathv1alpha1.FastPathNetwork{}
			if err := c.Get(cmd.Context(), types.NamespacedName{Name: args[0]}, n); err != nil {
				return fmt.Errorf("failed to get FastPathNetwork %s: %w", args[0], err)
			}
			t := fastpathv1alpha1.DefaultTuning(fastpathv1alpha1.DefaultNetworkSpec(n.Spec))
			fmt.Fprintf(stdout, "FastPathNetwork %s: tuning %s", n.Name, t.Mode)
			if c := apimeta.FindStatusCondition(n.Status.Conditions, fastpathv1alpha1.TuningReadyCondition); c != nil {
				fmt.Fprintf(stdout, ", %s: %s", c.Reason, c.Message)
			}
			fmt.Fprintln(stdout)
			return report.WriteTuningReport(stdout, n.Status.Tuning, t.Objective)
		},
	}
}

// newCleanupCmd switches the agent DaemonSet to --cleanup and waits until
// every node is clean (internal/node/cleanup.SwitchDaemonSet): the uninstall
// step of a kustomize install, which has no Helm hook
// (docs/operations.md#uninstalling). Delete the install afterwards.
func newCleanupCmd(kube *genericclioptions.ConfigFlags, stdout io.Writer) *cobra.Command {
	var daemonSet string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup [-n fastpath-system] [--daemonset fastpath-agent]",
		Short: "Remove Fastpath's bridges, links, port security rules and plugin files from every node, before an uninstall",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := newClient(kube)
			if err != nil {
				return err
			}
			ns := "fastpath-system"
			if kube.Namespace != nil && *kube.Namespace != "" {
				ns = *kube.Namespace
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			key := client.ObjectKey{Namespace: ns, Name: daemonSet}
			log := funcr.New(func(prefix, args string) { fmt.Fprintln(stdout, prefix, args) }, funcr.Options{})
			if err := cleanup.SwitchDaemonSet(ctx, c, key, 2*time.Second, log); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "Every node of DaemonSet %s is clean: now delete the install (kubectl delete -f config/default/fastpath.yaml)\n", key)
			return nil
		},
	}
	cmd.Flags().StringVar(&daemonSet, "daemonset", "fastpath-agent", "the agent DaemonSet")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every node")
	return cmd
}
