package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/onsi/gomega"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// noExec fails the test if a command tries to replace the process.
func noExec(t *testing.T) func(string, []string) error {
	return func(path string, _ []string) error {
		t.Errorf("unexpected exec of %s", path)
		return nil
	}
}

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "kubectl fastpath [command]"},
		{[]string{"--help"}, 0, "bench report NAME"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"bench"}, 2, "bench needs a subcommand: run, compare, report or local"},
		{[]string{"bench", "report"}, 2, "needs one FastPathBenchmark name"},
		{[]string{"status", "extra"}, 2, "status takes no arguments"},
		{[]string{"status", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"cleanup", "extra"}, 2, `unknown command "extra" for "kubectl fastpath cleanup"`},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, noExec(t))).To(gomega.Equal(tc.code), "args %q", tc.args)
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
	}
}

// Like every kubectl plugin, kubectl fastpath takes kubectl's connection
// flags (genericclioptions).
func TestHelpShowsKubectlConnectionFlags(t *testing.T) {
	g := gomega.NewWithT(t)
	var out, errb bytes.Buffer
	g.Expect(Main(context.Background(), []string{"--help"}, &out, &errb, noExec(t))).To(gomega.Equal(0))
	for _, f := range []string{"--kubeconfig string", "--context string", "-n, --namespace string"} {
		g.Expect(errb.String()).To(gomega.ContainSubstring(f))
	}
}

// Flags may stand anywhere among the arguments, as kubectl allows; "--"
// ends them.
func TestParseFlagsAnywhere(t *testing.T) {
	g := gomega.NewWithT(t)
	kube := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{Use: "kubectl fastpath"}
	kube.AddFlags(root.PersistentFlags())
	root.AddCommand(newBenchCmd(kube, &bytes.Buffer{}, &bytes.Buffer{}, noExec(t)))
	cmd, rest, err := root.Find([]string{"bench", "report", "name", "-n", "apps", "--kubeconfig", "/k", "--", "-literal"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(cmd.Name()).To(gomega.Equal("report"))
	g.Expect(cmd.ParseFlags(rest)).To(gomega.Succeed())
	g.Expect(cmd.Flags().Args()).To(gomega.Equal([]string{"name", "-literal"}))
	g.Expect(*kube.Namespace).To(gomega.Equal("apps"))
	g.Expect(*kube.KubeConfig).To(gomega.Equal("/k"))
}

// demo and bench local replace the process with fastpath-dev demo and
// fastpath-bench local, found on PATH here, with the arguments as given.
func TestDemoAndBenchLocalExecTheirPrograms(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fastpath-dev", "fastpath-bench"} {
		gomega.NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755)).To(gomega.Succeed())
	}
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		args, argv []string
	}{
		{[]string{"demo", "--full", "extra"}, []string{filepath.Join(dir, "fastpath-dev"), "demo", "--full", "extra"}},
		{[]string{"bench", "local", "--paths", "ceiling", "--help"}, []string{filepath.Join(dir, "fastpath-bench"), "local", "--paths", "ceiling", "--help"}},
	} {
		g := gomega.NewWithT(t)
		var got []string
		exec := func(path string, argv []string) error {
			g.Expect(path).To(gomega.Equal(argv[0]))
			got = argv
			return nil
		}
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, exec)).To(gomega.Equal(0), errb.String())
		g.Expect(got).To(gomega.Equal(tc.argv))
	}
	g := gomega.NewWithT(t)
	t.Setenv("PATH", t.TempDir())
	var errb bytes.Buffer
	g.Expect(Main(context.Background(), []string{"demo"}, &bytes.Buffer{}, &errb, noExec(t))).To(gomega.Equal(1))
	g.Expect(errb.String()).To(gomega.ContainSubstring("failed to find fastpath-dev next to kubectl-fastpath or on PATH"))
	errb.Reset()
	g.Expect(Main(context.Background(), []string{"bench", "local", "--junit-file", "j.xml"}, &bytes.Buffer{}, &errb, noExec(t))).To(gomega.Equal(2),
		"bench local without fastpath-bench could not run: exit 2 as fastpath-bench local's own")
	g.Expect(errb.String()).To(gomega.ContainSubstring("failed to find fastpath-bench next to kubectl-fastpath or on PATH"))
}

func TestWriteStatus(t *testing.T) {
	g := gomega.NewWithT(t)
	cid, target := int64(4), int64(4)
	fpa := fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "db-link", Namespace: "apps"},
		Status: fastpathv1alpha1.FastPathAttachmentStatus{
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotReady", Message: "VSOCKReady is False"},
				{Type: "VSOCKReady", Status: metav1.ConditionFalse, Reason: "NoCID", Message: "db-1 has no CID"},
			},
			NetworkAttachmentDefinition: "apps/db-link", Datapath: "LinuxBridge", MTU: 9000, SelectedVMs: 2, WiredVMs: 2,
			VMs: []fastpathv1alpha1.VMStatus{{Name: "db-0", Wired: true, Node: "n1", Interface: "eth1", PodInterface: "poda527fe112a5",
				MAC: "02:00:00:00:00:01", IPs: []string{"10.250.0.3"}, MTU: 9000, CID: &cid, RelayPorts: []fastpathv1alpha1.RelayPort{{Service: "db", Port: 20000}}}},
			VSOCKServices: []fastpathv1alpha1.VSOCKServiceStatus{{Name: "db", VM: "db-0", Port: 5432, RelayPort: 20000, Node: "n1", TargetCID: &target, AllowedCIDs: []int64{3}}},
		},
	}
	fpn := fastpathv1alpha1.FastPathNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: fastpathv1alpha1.FastPathNodeStatus{
			Capabilities: fastpathv1alpha1.NodeCapabilities{VhostNet: true, Tun: true, Kernel: "6.1.0"},
			Bridges:      []fastpathv1alpha1.BridgeStatus{{Name: "fastpath0", Datapath: "LinuxBridge", MTU: 9000, Ready: true, Attachments: []string{"apps/db-link"}}},
			Conditions:   []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
		},
	}
	var buf bytes.Buffer
	g.Expect(writeStatus(&buf, []fastpathv1alpha1.FastPathAttachment{fpa}, []fastpathv1alpha1.FastPathNode{fpn})).To(gomega.Succeed())
	out := buf.String()
	g.Expect(out).To(gomega.MatchRegexp(`apps/db-link\s+False\s+NotReady\s+LinuxBridge\s+9000\s+2\s+2\s+apps/db-link`))
	g.Expect(out).To(gomega.ContainSubstring("VSOCKReady=False (db-1 has no CID)"))
	g.Expect(out).To(gomega.MatchRegexp(`db-0\s+true\s+n1\s+eth1\s+poda527fe112a5\s+02:00:00:00:00:01\s+10\.250\.0\.3\s+9000\s+4\s+db=20000\s+false`))
	g.Expect(out).To(gomega.MatchRegexp(`db\s+db-0\s+5432\s+20000\s+n1\s+4\s+\[3\]`))
	g.Expect(out).To(gomega.MatchRegexp(`n1\s+True\s+Ready\s+true\s+false\s+true\s+-\s+6\.1\.0`))
	g.Expect(out).To(gomega.MatchRegexp(`bridge fastpath0\s+LinuxBridge\s+MTU 9000\s+ready=true`))
}

// TestWriteStatusEscapesGuestStrings: what a guest reports (its interface
// name, addresses, MAC) and messages that embed it reach the terminal
// escaped: an ANSI escape sequence, a line break, a carriage return, a tab
// or a bidirectional override come out as Go escapes inside quotes, so
// they neither drive the terminal nor forge a row; plain values stay as
// they are.
func TestWriteStatusEscapesGuestStrings(t *testing.T) {
	g := gomega.NewWithT(t)
	const ansi, forged = "\x1b[2J\x1b[H", "\nFASTPATHNODE n9 True Ready"
	fpa := fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "db-link", Namespace: "apps"},
		Status: fastpathv1alpha1.FastPathAttachmentStatus{
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotReady", Message: "address 10.0.0.1" + forged}},
			VMs: []fastpathv1alpha1.VMStatus{{Name: "db-0", Wired: true, Node: "n1", Interface: "eth1" + ansi, MAC: "02:00:00:00:00:01\r",
				IPs: []string{"10.250.0.3", "10.250.0.4\tfake"}, Message: "guest says \u202egnp.exe" + forged}},
		},
	}
	fpn := fastpathv1alpha1.FastPathNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: fastpathv1alpha1.FastPathNodeStatus{
			Capabilities: fastpathv1alpha1.NodeCapabilities{Kernel: "6.1.0" + ansi},
			Bridges:      []fastpathv1alpha1.BridgeStatus{{Name: "fastpath0", Datapath: "LinuxBridge", Message: "port of 10.0.0.1" + forged}},
			Conditions:   []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotReady", Message: "bridge" + ansi}},
		},
	}
	var buf bytes.Buffer
	g.Expect(writeStatus(&buf, []fastpathv1alpha1.FastPathAttachment{fpa}, []fastpathv1alpha1.FastPathNode{fpn})).To(gomega.Succeed())
	out := buf.String()
	g.Expect(out).NotTo(gomega.ContainSubstring("\x1b"), "no raw escape character")
	g.Expect(out).NotTo(gomega.ContainSubstring("\r"))
	g.Expect(out).NotTo(gomega.ContainSubstring("\u202e"))
	g.Expect(out).NotTo(gomega.MatchRegexp(`(?m)^FASTPATHNODE n9`), "no forged row")
	for _, want := range []string{
		`"eth1\x1b[2J\x1b[H"`, `"02:00:00:00:00:01\r"`, `10.250.0.3,"10.250.0.4\tfake"`, `"guest says \u202egnp.exe\nFASTPATHNODE n9 True Ready"`,
		`Ready=False ("address 10.0.0.1\nFASTPATHNODE n9 True Ready")`, `"6.1.0\x1b[2J\x1b[H"`, `"port of 10.0.0.1\nFASTPATHNODE n9 True Ready"`,
		`Ready=False: "bridge\x1b[2J\x1b[H"`,
	} {
		g.Expect(out).To(gomega.ContainSubstring(want))
	}
	g.Expect(out).To(gomega.MatchRegexp(`db-0\s+true\s+n1\s+"eth1`), "plain values unquoted")

	b := &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "apps"}}
	b.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "RunFailed", Message: "netperf said" + ansi + forged}}
	buf.Reset()
	writeBenchmarkHeader(&buf, b)
	g.Expect(buf.String()).To(gomega.ContainSubstring(`Failed=True (RunFailed) "netperf said\x1b[2J\x1b[H\nFASTPATHNODE n9 True Ready"`))
	g.Expect(buf.String()).NotTo(gomega.ContainSubstring("\x1b"))
}

// A finished benchmark shows how it ended; a Pending one why it waits.
func TestWriteBenchmarkHeader(t *testing.T) {
	g := gomega.NewWithT(t)
	b := &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "apps"}}
	b.Status.Phase = fastpathv1alpha1.BenchmarkSucceeded
	b.Status.BestGbps, b.Status.Speedup, b.Status.CPURatio = "8.52", "3.89x", "0.62"
	b.Status.Conditions = []metav1.Condition{
		{Type: "Running", Status: metav1.ConditionFalse, Reason: "Completed"},
		{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "CriteriaMet", Message: "fast path 3.89x baseline"},
	}
	var buf bytes.Buffer
	writeBenchmarkHeader(&buf, b)
	g.Expect(buf.String()).To(gomega.Equal("FastPathBenchmark apps/b: phase Succeeded, best 8.52 Gbit/s, speed-up 3.89x, CPU per byte 0.62 of the baseline's (lower is better)\n" +
		"  Succeeded=True (CriteriaMet) fast path 3.89x baseline\n"))

	b.Status = fastpathv1alpha1.FastPathBenchmarkStatus{Phase: fastpathv1alpha1.BenchmarkPending, Conditions: []metav1.Condition{
		{Type: "Running", Status: metav1.ConditionFalse, Reason: "WaitingForAttachment", Message: "FastPathAttachment db-link is not Ready"},
	}}
	buf.Reset()
	writeBenchmarkHeader(&buf, b)
	g.Expect(buf.String()).To(gomega.Equal("FastPathBenchmark apps/b: phase Pending\n" +
		"  Running=False (WaitingForAttachment) FastPathAttachment db-link is not Ready\n"))
}
