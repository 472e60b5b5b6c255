package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// bench run rejects a command line it cannot run before it reaches a
// cluster: exit 2 and a message that names the offending flags.
func TestBenchRunFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "run"}, "bench run needs -f FILE (create a benchmark) or a FastPathBenchmark NAME (follow it)"},
		{[]string{"bench", "run", "-f", "ci.yaml", "ci"}, "-f ci.yaml and NAME ci exclude each other: -f creates a benchmark, NAME follows an existing one"},
		{[]string{"bench", "run", "ci", "-f", "ci.yaml", "--wait"}, "-f ci.yaml and NAME ci exclude each other"},
		{[]string{"bench", "run", "a", "b"}, `bench run takes one FastPathBenchmark NAME, got 2: ["a" "b"]`},
		{[]string{"bench", "run", "ci", "-o", "xml"}, `invalid argument "xml" for "-o, --output" flag: must be one of text|json|yaml|junit|csv`},
		{[]string{"bench", "run", "ci", "--output=table"}, "must be one of text|json|yaml|junit|csv"},
		{[]string{"bench", "run", "-f", "ci.yaml", "-o", "junit"}, "-o, --junit-file, --csv-file, --timeout and --grace are about the outcome and need --wait"},
		{[]string{"bench", "run", "-f", "ci.yaml", "--junit-file", "ci.xml"}, "need --wait"},
		{[]string{"bench", "run", "-f", "ci.yaml", "--timeout", "1h"}, "need --wait"},
		{[]string{"bench", "run", "-f", "ci.yaml", "--csv-file", "ci.csv"}, "need --wait"},
		{[]string{"bench", "run", "ci", "--timeout", "-1s"}, "--timeout -1s is negative"},
		{[]string{"bench", "run", "ci", "--grace", "-1s"}, "--grace -1s is negative"},
		{[]string{"bench", "run", "ci", "--timeout", "soon"}, `invalid argument "soon" for "--timeout" flag`},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, noExec(t))).To(gomega.Equal(2), "args %q: %s", tc.args, errb.String())
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
		g.Expect(errb.String()).To(gomega.ContainSubstring("See 'kubectl fastpath bench run --help'."), "args %q", tc.args)
		g.Expect(out.String()).To(gomega.BeEmpty(), "args %q", tc.args)
	}
}

// The help carries the exit-code table.
func TestBenchRunHelpListsTheExitCodes(t *testing.T) {
	g := gomega.NewWithT(t)
	var out, errb bytes.Buffer
	g.Expect(Main(context.Background(), []string{"bench", "run", "--help"}, &out, &errb, noExec(t))).To(gomega.Equal(0))
	g.Expect(errb.String()).To(gomega.ContainSubstring("kubectl fastpath bench run (-f FILE | NAME) [--wait] [--timeout D] [-o text|json|yaml|junit|csv] [--junit-file F] [--csv-file F]"))
	for _, e := range gate.ExitCodes {
		g.Expect(errb.String()).To(gomega.ContainSubstring("%d  %s: ", e.Code, e.Name))
	}
	for _, f := range []string{"-f, --filename", "-w, --wait", "--timeout duration", "--grace duration", "-o, --output format", "--junit-file string", "--csv-file string", "--kubeconfig string"} {
		g.Expect(errb.String()).To(gomega.ContainSubstring(f))
	}
}

// Failures past the command line are exit 2 (could not run), never 1,
// which means the criteria were not met.
func TestBenchRunCouldNotRunIsExit2(t *testing.T) {
	dir := t.TempDir()
	// A cluster nothing listens at: client.New does not dial it.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	gomega.NewWithT(t).Expect(os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: ci}}]
current-context: c
`), 0o600)).To(gomega.Succeed())
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		gomega.NewWithT(t).Expect(os.WriteFile(p, []byte(content), 0o600)).To(gomega.Succeed())
		return p
	}
	bench := "apiVersion: fastpath.io/v1alpha1\nkind: FastPathBenchmark\nmetadata: {name: ci, namespace: apps}\nspec: {attachmentRef: {name: a}, mode: Pod}\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "run", "ci", "--kubeconfig", filepath.Join(dir, "missing")}, "failed to load kubeconfig"},
		{[]string{"bench", "run", "ci", "--kubeconfig", kubeconfig}, "failed to get FastPathBenchmark ci/ci: "},
		{[]string{"bench", "run", "-f", filepath.Join(dir, "missing.yaml"), "--kubeconfig", kubeconfig}, "failed to read " + filepath.Join(dir, "missing.yaml")},
		{[]string{"bench", "run", "-f", file("typo.yaml", strings.Replace(bench, "mode: Pod}", "mode: Pod, sucessCriteria: {}}", 1)), "--kubeconfig", kubeconfig}, `unknown field "spec.sucessCriteria"`},
		{[]string{"bench", "run", "-f", file("ci.yaml", bench), "-n", "other", "--kubeconfig", kubeconfig}, "the file's metadata.namespace apps and -n other differ"},
		{[]string{"bench", "run", "-f", file("ci.yaml", bench), "--kubeconfig", kubeconfig}, "failed to create FastPathBenchmark apps/ci from"},
	} {
		g := gomega.NewWithT(t)
		var out, errb bytes.Buffer
		g.Expect(Main(context.Background(), tc.args, &out, &errb, noExec(t))).To(gomega.Equal(2), "args %q: %s", tc.args, errb.String())
		g.Expect(errb.String()).To(gomega.HavePrefix("kubectl fastpath bench run: "))
		g.Expect(errb.String()).To(gomega.ContainSubstring(tc.want), "args %q", tc.args)
		g.Expect(errb.String()).NotTo(gomega.ContainSubstring("See '"), "not a command line error")
	}
}

// TestBenchRunAgainstAnAPIServer runs the envtest specs of
// run_envtest_test.go (kube-apiserver and etcd from bin/ or
// $KUBEBUILDER_ASSETS: make setup-core+tools).
func TestBenchRunAgainstAnAPIServer(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "kubectl fastpath bench run (envtest)")
}

// bench compare OLD NEW of two results.json files: a line per point, and
// exit 1 with --max-regression-percent when the new run regressed beyond
// it and beyond the noise.
func TestBenchCompareFiles(t *testing.T) {
	g := gomega.NewWithT(t)
	dir := t.TempDir()
	raw, err := os.ReadFile("../../controllers/benchmark/summary/testdata/results-pod.json")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	doc, err := results.Decode(bytes.NewReader(raw))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	write := func(name string, f float64) string {
		d := doc
		d.Runs = nil
		for _, r := range doc.Runs {
			if r.Path == "fastpath" {
				r.Samples = slices.Clone(r.Samples)
				for i := range r.Samples {
					r.Samples[i].ThroughputMbps *= f
				}
				r.Summarize()
			}
			d.Runs = append(d.Runs, r)
		}
		var buf bytes.Buffer
		g.Expect(results.Encode(&buf, d)).To(gomega.Succeed())
		p := filepath.Join(dir, name)
		g.Expect(os.WriteFile(p, buf.Bytes(), 0o600)).To(gomega.Succeed())
		return p
	}
	old, same, slow := write("old.json", 1), write("same.json", 1), write("slow.json", 0.8)

	var out, errb bytes.Buffer
	g.Expect(Main(context.Background(), []string{"bench", "compare", old, same, "--max-regression-percent", "5"}, &out, &errb, noExec(t))).To(gomega.Equal(0), errb.String())
	g.Expect(out.String()).To(gomega.ContainSubstring("then: " + old))
	g.Expect(out.String()).To(gomega.MatchRegexp(`(?m)^fastpath\s+TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1\s+7603\s+7603\s+1\.00\s+7410-7733\s+7410-7733\s+within noise`))
	g.Expect(out.String()).To(gomega.ContainSubstring("No regression beyond the noise."))

	out.Reset()
	errb.Reset()
	g.Expect(Main(context.Background(), []string{"bench", "compare", old, slow, "--max-regression-percent", "5"}, &out, &errb, noExec(t))).To(gomega.Equal(1))
	g.Expect(out.String()).To(gomega.MatchRegexp(`(?m)^fastpath\s+TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1\s+7603\s+6082\s+0\.80\s+7410-7733\s+5928-6186\s+beyond noise`))
	g.Expect(errb.String()).To(gomega.ContainSubstring("regression 20.0% (throughput 0.80x) at fastpath "))
	g.Expect(errb.String()).To(gomega.ContainSubstring(" is beyond --max-regression-percent 5"))

	g.Expect(Main(context.Background(), []string{"bench", "compare", old, slow}, &out, &errb, noExec(t))).To(gomega.Equal(0), "without the flag a regression is reported, not an error")
	g.Expect(Main(context.Background(), []string{"bench", "compare", old}, &out, &errb, noExec(t))).To(gomega.Equal(2))
}
