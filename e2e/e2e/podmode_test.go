package e2e

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// The Pod-mode benchmark of config/samples/cluster/: netserver pods and the
// runner Job scheduled by the real scheduler, run by the real kubelet and
// containerd, wired by Multus to the fastpath CNI plugin (fast path) and the
// cluster network (baseline), measured in one run.
var _ = Describe("A Pod-mode FastPathBenchmark on real pods", Ordered, func() {
	var (
		network *fastpathv1alpha1.FastPathNetwork
		att     *fastpathv1alpha1.FastPathAttachment
		bench   *fastpathv1alpha1.FastPathBenchmark
	)
	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() {
			notRun("on the local stack: its kubelet is emulated and runs only runner Jobs, not the netserver pods Pod mode creates; make e2e-cluster runs it on a real kubelet")
		}
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		network, att, bench = &fastpathv1alpha1.FastPathNetwork{}, &fastpathv1alpha1.FastPathAttachment{}, &fastpathv1alpha1.FastPathBenchmark{}
		for file, obj := range map[string]any{
			"fastpath_v1alpha1_fastpathnetwork.yaml": network, "fastpath_v1alpha1_fastpathattachment.yaml": att, "fastpath_v1alpha1_fastpathbenchmark.yaml": bench,
		} {
			b, err := os.ReadFile(filepath.Join(root, "config", "samples", "cluster", file))
			Expect(err).NotTo(HaveOccurred())
			Expect(yaml.UnmarshalStrict(b, obj)).To(Succeed(), file)
		}
		// The suite's own network (cluster-scoped) for the suite's namespace only.
		network.Name = "e2e-pod-" + ns
		network.Spec.Bridge = "fpe2e1"
		network.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
		att.Namespace, bench.Namespace = ns, ns
		att.Spec.NetworkRef.Name = network.Name
		c := env.Client()
		Expect(c.Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Delete(ctx, network))).To(Succeed()) })
		Expect(c.Create(ctx, att)).To(Succeed())
		Expect(c.Create(ctx, bench)).To(Succeed())
	}, NodeTimeout(time.Minute))

	It("renders the attachment's NetworkAttachmentDefinition without any VM", func(ctx SpecContext) {
		eventually(ctx, func(g Gomega) {
			a := &fastpathv1alpha1.FastPathAttachment{}
			g.Expect(env.Client().Get(ctx, client.ObjectKeyFromObject(att), a)).To(Succeed())
			cond := apimeta.FindStatusCondition(a.Status.Conditions, fastpathv1alpha1.NetworkAttachmentReadyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "%s: %s", cond.Reason, cond.Message)
			g.Expect(a.Status.NetworkAttachmentDefinition).To(Equal(ns + "/" + att.Name))
		}, time.Minute).Should(Succeed())
	})

	It("runs to Succeeded with the fast path and the pod network measured in one run", func(ctx SpecContext) {
		b := &fastpathv1alpha1.FastPathBenchmark{}
		eventually(ctx, func(g Gomega) {
			g.Expect(env.Client().Get(ctx, client.ObjectKeyFromObject(bench), b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Or(Equal(fastpathv1alpha1.BenchmarkSucceeded), Equal(fastpathv1alpha1.BenchmarkFailed)))
		}, 8*time.Minute).Should(Succeed())
		Expect(b.Status.Phase).To(Equal(fastpathv1alpha1.BenchmarkSucceeded), "conditions: %+v", b.Status.Conditions)
		m := regexp.MustCompile(`^([0-9.]+)x$`).FindStringSubmatch(b.Status.Speedup)
		Expect(m).To(HaveLen(2), "status.speedup %q", b.Status.Speedup)
		speedup, _ := strconv.ParseFloat(m[1], 64)
		Expect(speedup).To(BeNumerically(">=", float64(*bench.Spec.SuccessCriteria.MinSpeedupPercent)/100))

		doc, err := benchjob.ReadResults(ctx, env.Client(), b)
		Expect(err).NotTo(HaveOccurred())
		Expect(results.Paths(doc.Runs)).To(ConsistOf("fastpath", "baseline"))
		subnet := netip.MustParsePrefix(att.Spec.Network.IPAM.Subnet)
		for _, r := range doc.Runs {
			Expect(r.Samples).To(HaveLen(int(*bench.Spec.Repetitions)), "%s %s", r.Path, r.Test)
			ep, err := netip.ParseAddrPort(r.Samples[0].PerSession[0].Endpoint)
			Expect(err).NotTo(HaveOccurred())
			// The fast-path netserver answers on the attachment's subnet (the
			// fastpath CNI plugin's interface), the baseline one on the
			// cluster network.
			Expect(subnet.Contains(ep.Addr())).To(Equal(r.Path == "fastpath"), "%s endpoint %s", r.Path, ep)
			if r.Path == "fastpath" && r.Test == results.TCPStream {
				Expect(r.MTU).To(BeEquivalentTo(*att.Spec.Network.MTU))
				Expect(r.Samples[0].PerSession[0].MSSBytes).To(BeNumerically(">", 1460), "TCP segments larger than the pod network's MTU allows")
			}
		}
		AddReportEntry("Pod-mode benchmark", fmt.Sprintf("best %s Gbit/s, speed-up %s over the pod network (%s)", b.Status.BestGbps, b.Status.Speedup, env.Name()))
	}, SpecTimeout(9*time.Minute))

	// kubectlFastpath is the plugin make build wrote into the repository's
	// bin/ (make e2e-cluster puts only KubeVirt's bin on PATH), else the
	// one on PATH.
	kubectlFastpath := func() string {
		root, err := testenv.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		if p := filepath.Join(root, "bin", "kubectl-fastpath"); fileExists(p) {
			return p
		}
		return "kubectl-fastpath"
	}
	// benchRun runs `kubectl fastpath bench run` as a CI job would and
	// returns its exit code and output.
	benchRun := func(ctx SpecContext, args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, kubectlFastpath(), append([]string{"bench", "run", "-n", ns}, args...)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		Expect(err).NotTo(HaveOccurred(), string(out))
		return 0, string(out)
	}
	// benchFile writes b as a manifest for bench run -f.
	benchFile := func(b *fastpathv1alpha1.FastPathBenchmark) string {
		b.SetGroupVersionKind(fastpathv1alpha1.GroupVersion.WithKind("FastPathBenchmark"))
		y, err := yaml.Marshal(b)
		Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(GinkgoT().TempDir(), b.Name+".yaml")
		Expect(os.WriteFile(f, y, 0o644)).To(Succeed())
		return f
	}
	// quick is the sample benchmark cut to one test and one repetition.
	quick := func(name string) *fastpathv1alpha1.FastPathBenchmark {
		b := bench.DeepCopy()
		b.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns}
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream}
		b.Spec.Repetitions = ptr.To[int32](1)
		return b
	}

	It("gates CI with kubectl fastpath bench run: exit 0 and JUnit for a benchmark that succeeded", func(ctx SpecContext) {
		junit := filepath.Join(GinkgoT().TempDir(), "junit.xml")
		code, out := benchRun(ctx, bench.Name, "--wait", "--timeout", "8m", "--junit-file", junit)
		Expect(code).To(Equal(0), out)
		doc, err := os.ReadFile(junit)
		Expect(err).NotTo(HaveOccurred())
		Expect(checkJUnit(doc)).To(Succeed(), "%s", doc)
		Expect(string(doc)).To(And(ContainSubstring(`name="minSpeedupPercent"`), ContainSubstring(`failures="0"`)))
	}, SpecTimeout(9*time.Minute))

	It("exits 1 naming the criterion a benchmark did not meet", func(ctx SpecContext) {
		b := quick("gate-impossible")
		b.Spec.SuccessCriteria.MinSpeedupPercent = ptr.To[int32](100000)
		code, out := benchRun(ctx, "-f", benchFile(b), "--wait", "--timeout", "8m")
		Expect(code).To(Equal(1), out)
		Expect(out).To(ContainSubstring("minSpeedupPercent 100000 not met"))
	}, SpecTimeout(9*time.Minute))

	It("exits 2 at once for a benchmark of an attachment that does not exist", func(ctx SpecContext) {
		b := quick("gate-no-attachment")
		b.Spec.AttachmentRef.Name = "no-such-attachment"
		start := time.Now()
		code, out := benchRun(ctx, "-f", benchFile(b), "--wait", "--timeout", "8m", "--grace", "10s")
		Expect(code).To(Equal(2), out)
		Expect(out).To(ContainSubstring("no-such-attachment"))
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Minute), "the grace, not the timeout")
	}, SpecTimeout(3*time.Minute))

	It("compares a second run with the first point by point: the ratio, and within noise where the ranges overlap", func(ctx SpecContext) {
		b := bench.DeepCopy()
		b.ObjectMeta = metav1.ObjectMeta{Name: bench.Name + "-again", Namespace: ns}
		b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{Benchmark: bench.Name}
		code, out := benchRun(ctx, "-f", benchFile(b), "--wait", "--timeout", "8m")
		Expect(code).To(Equal(0), out)
		cmp, err := exec.CommandContext(ctx, kubectlFastpath(), "bench", "compare", "-n", ns, bench.Name, b.Name).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(cmp))
		Expect(string(cmp)).To(And(ContainSubstring("TCP_STREAM"), ContainSubstring("fastpath")))
		Expect(string(cmp)).To(Or(ContainSubstring("within noise"), ContainSubstring("beyond noise")))
		AddReportEntry("bench compare", string(cmp))
	}, SpecTimeout(9*time.Minute))

	It("reports the attachment's bridge on the node's FastPathNode", func(ctx SpecContext) {
		eventually(ctx, func(g Gomega) {
			nodes := &fastpathv1alpha1.FastPathNodeList{}
			g.Expect(env.Client().List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(ContainElement(HaveField("Status.Bridges", ContainElement(And(
				HaveField("Name", network.Spec.Bridge), HaveField("MTU", BeNumerically(">=", *att.Spec.Network.MTU)), HaveField("Ready", BeTrue()))))))
		}, time.Minute).Should(Succeed())
	})
})

// checkJUnit checks doc against the rules of Ant's JUnit schema that CI
// systems' readers rely on: a <testsuites> root of <testsuite>s, each with a
// name and tests/failures/errors/skipped counts that match its <testcase>s
// (each with a name and a classname, at most one of failure, error and
// skipped), and totals that are the sums.
func checkJUnit(doc []byte) error {
	type problem struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *problem `xml:"failure"`
		Error     *problem `xml:"error"`
		Skipped   *problem `xml:"skipped"`
	}
	type counts struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	type testsuite struct {
		Name string `xml:"name,attr"`
		counts
		Cases []testcase `xml:"testcase"`
	}
	var root struct {
		XMLName xml.Name
		counts
		Suites []testsuite `xml:"testsuite"`
	}
	if err := xml.Unmarshal(doc, &root); err != nil {
		return fmt.Errorf("not XML: %w", err)
	}
	if root.XMLName.Local != "testsuites" || len(root.Suites) == 0 {
		return fmt.Errorf("root <%s> with %d testsuites, want <testsuites> with at least one", root.XMLName.Local, len(root.Suites))
	}
	var total [4]int
	for _, s := range root.Suites {
		if s.Name == "" || len(s.Cases) == 0 {
			return fmt.Errorf("testsuite %q without a name or testcases", s.Name)
		}
		var n [4]int
		n[0] = len(s.Cases)
		for _, c := range s.Cases {
			if c.Name == "" || c.Classname == "" {
				return fmt.Errorf("testsuite %s: a testcase without name or classname", s.Name)
			}
			if c.Time != "" {
				if _, err := strconv.ParseFloat(c.Time, 64); err != nil {
					return fmt.Errorf("testcase %s: time %q is not a number of seconds", c.Name, c.Time)
				}
			}
			set := 0
			for i, p := range []*problem{c.Failure, c.Error, c.Skipped} {
				if p != nil {
					n[i+1]++
					set++
				}
			}
			if set > 1 {
				return fmt.Errorf("testcase %s: more than one of failure, error and skipped", c.Name)
			}
		}
		if got := [4]int{s.Tests, s.Failures, s.Errors, s.Skipped}; got != n {
			return fmt.Errorf("testsuite %s says tests/failures/errors/skipped %v, its testcases are %v", s.Name, got, n)
		}
		for i := range total {
			total[i] += n[i]
		}
	}
	if got := [4]int{root.Tests, root.Failures, root.Errors, root.Skipped}; got != total {
		return fmt.Errorf("testsuites says %v, the sums are %v", got, total)
	}
	return nil
}

// fileExists reports whether path is a file that exists.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
