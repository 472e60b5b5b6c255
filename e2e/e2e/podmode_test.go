package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	It("reports the attachment's bridge on the node's FastPathNode", func(ctx SpecContext) {
		eventually(ctx, func(g Gomega) {
			nodes := &fastpathv1alpha1.FastPathNodeList{}
			g.Expect(env.Client().List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(ContainElement(HaveField("Status.Bridges", ContainElement(And(
				HaveField("Name", network.Spec.Bridge), HaveField("MTU", BeNumerically(">=", *att.Spec.Network.MTU)), HaveField("Ready", BeTrue()))))))
		}, time.Minute).Should(Succeed())
	})
})
