package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/tuning/sweep"
	"github.com/fastpath-io/fastpath/e2e/localenv/cluster"
)

// A network that tunes itself (issue 27) on a real kubelet: the sweep's
// Pod-mode benchmarks run real netperf between pods wired by the fastpath
// CNI plugin, one MTU candidate after another.
var _ = Describe("A FastPathNetwork that tunes itself", Ordered, func() {
	var network *fastpathv1alpha1.FastPathNetwork
	c := func() client.Client { return env.Client() }
	get := func(ctx SpecContext) *fastpathv1alpha1.FastPathNetwork {
		GinkgoHelper()
		n := &fastpathv1alpha1.FastPathNetwork{}
		Expect(c().Get(ctx, types.NamespacedName{Name: network.Name}, n)).To(Succeed())
		return n
	}
	attach := func(ctx SpecContext, name string) {
		GinkgoHelper()
		Expect(c().Create(ctx, &fastpathv1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: fastpathv1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Placement: fastpathv1alpha1.PlacementNone,
			NetworkRef: &fastpathv1alpha1.NetworkReference{Name: network.Name},
			Network:    &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.251.0.0/24"}}}})).To(Succeed())
	}
	nadMTU := func(ctx SpecContext, name string) func() int {
		return func() int {
			nad := &nadv1.NetworkAttachmentDefinition{}
			if err := c().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad); err != nil {
				return 0
			}
			var conf struct {
				MTU int `json:"mtu"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(nad.Spec.Config)), &conf) != nil {
				return -1
			}
			return conf.MTU
		}
	}
	// nadOffloads reads the offloads of an attachment's NAD netconf (nil while
	// it does not exist).
	nadOffloads := func(ctx SpecContext, name string) func() map[string]bool {
		return func() map[string]bool {
			nad := &nadv1.NetworkAttachmentDefinition{}
			if err := c().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad); err != nil {
				return nil
			}
			var conf struct {
				Offloads map[string]bool `json:"offloads"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(nad.Spec.Config)), &conf) != nil {
				return nil
			}
			return conf.Offloads
		}
	}
	offloadsOf := func(o *fastpathv1alpha1.Offloads) map[string]bool {
		return map[string]bool{"tso": o.TSO.On(), "gso": o.GSO.On(), "gro": o.GRO.On(), "txChecksum": o.TXChecksum.On(), "rxChecksum": o.RXChecksum.On()}
	}

	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() {
			notRun("on the local stack: its kubelet is emulated and does not run the netserver pods of the sweep's Pod-mode benchmarks; make e2e-cluster runs it on a real kubelet")
		}
		// The default is none of the candidates, so Apply and Off are told apart.
		maxMTU, defaultMTU := int32(65520), int32(4000)
		// The sweep's attachments live in the operator's namespace, so the
		// network admits it beside the suite's.
		network = &fastpathv1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: "e2e-tune-" + ns}, Spec: fastpathv1alpha1.FastPathNetworkSpec{
			Bridge: "fpe2e3",
			MTU:    &fastpathv1alpha1.MTURange{Max: &maxMTU, Default: &defaultMTU},
			NamespaceSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns, cluster.Namespace}}}},
			Tuning: &fastpathv1alpha1.NetworkTuning{
				Mode:       fastpathv1alpha1.TuningRecommend,
				Candidates: &fastpathv1alpha1.TuningCandidates{MTUs: []int32{1500, 9000, 65520}},
				Duration:   &metav1.Duration{Duration: 3 * time.Second}, // short runs keep CI fast
			},
		}}
		Expect(c().Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c().Delete(ctx, network))).To(Succeed()) })
	}, NodeTimeout(time.Minute))

	It("Recommend: within 10 minutes, with 3 repetitions per candidate, the best by its own objective", func(ctx SpecContext) {
		start := time.Now()
		eventually(ctx, func(g Gomega) {
			n := get(ctx)
			cond := apimeta.FindStatusCondition(n.Status.Conditions, fastpathv1alpha1.TuningReadyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Or(Equal(fastpathv1alpha1.ReasonRecommended), Equal(fastpathv1alpha1.ReasonAllCandidatesFailed)), cond.Message)
		}, 10*time.Minute).Should(Succeed())
		took := time.Since(start)
		st := get(ctx).Status.Tuning
		Expect(st.Nodes).NotTo(BeEmpty())
		for _, node := range st.Nodes {
			var rows []string
			for _, ev := range node.Evidence {
				negotiated := "not reported"
				if ev.NegotiatedOffloads != nil {
					negotiated = ev.NegotiatedOffloads.Format(" ", ", ")
				}
				rows = append(rows, fmt.Sprintf("mtu %d: %d reps, median %d [%d-%d] Mbit/s, %s us/KiB, negotiated %s %s%s", ev.MTU, ev.Repetitions, ev.MedianMbps, ev.MinMbps, ev.MaxMbps, ev.ServiceDemandUsPerKB, negotiated, ev.Failed, ev.OffloadMismatch))
				Expect(ev.Failed).To(BeEmpty(), "mtu %d", ev.MTU)
				Expect(ev.Repetitions).To(BeNumerically(">=", 3), "mtu %d", ev.MTU)
				Expect(ev.NegotiatedOffloads).NotTo(BeNil(), "mtu %d: the evidence lists what the path negotiated", ev.MTU)
			}
			Expect(node.Recommended).NotTo(BeNil())
			rec, ok := sweep.Recommend(node.Evidence, fastpathv1alpha1.ObjectiveThroughput, 1280, 65520)
			Expect(ok).To(BeTrue())
			Expect(node.Recommended.MTU).To(Equal(node.Evidence[rec.Best].MTU), "the choice is the recommendation by its own objective in its evidence")
			AddReportEntry("Tuning sweep", fmt.Sprintf("node %s, %s: recommended MTU %d (margin %s%%, MTU curve %s): %s\n%s", node.Node, took.Round(time.Second), node.Recommended.MTU, node.MarginPercent, node.MTUCurve, node.Message, strings.Join(rows, "\n")))
		}
	}, SpecTimeout(11*time.Minute))

	It("Apply: a new attachment defaults to the winner's MTU and offloads; Off restores the defaults", func(ctx SpecContext) {
		setTuningMode(ctx, get(ctx), fastpathv1alpha1.TuningApply)
		var applied *fastpathv1alpha1.NetworkTuningStatus
		eventually(ctx, func(g Gomega) {
			st := get(ctx).Status.Tuning
			g.Expect(st.Applied).NotTo(BeNil())
			applied = st
		}, time.Minute).Should(Succeed())
		// appliedAt is rounded up to a second: attachments created before it count as existing.
		eventually(ctx, func() bool { return time.Now().After(applied.AppliedAt.Time) }, 5*time.Second).Should(BeTrue())
		attach(ctx, "tuned")
		eventually(ctx, nadMTU(ctx, "tuned"), time.Minute).Should(Equal(int(applied.Applied.MTU)))
		// The candidates are the network's own offloads only (a second set
		// would double the sweep), so this checks that the applied offloads
		// reach the netconf whole, not that Apply and Off tell them apart:
		// the envtest suite (controllers/tuning) does that.
		Expect(applied.Applied.Offloads).NotTo(BeNil())
		Expect(nadOffloads(ctx, "tuned")()).To(Equal(offloadsOf(applied.Applied.Offloads)))

		setTuningMode(ctx, get(ctx), fastpathv1alpha1.TuningOff)
		eventually(ctx, nadMTU(ctx, "tuned"), time.Minute).Should(Equal(4000), "Off restores spec.mtu.default")
		Expect(nadOffloads(ctx, "tuned")()).To(Equal(offloadsOf(&fastpathv1alpha1.Offloads{})), "Off restores spec.offloads (every offload On)")
	}, SpecTimeout(3*time.Minute))
})

// setTuningMode sets n's spec.tuning.mode with a merge patch, as `kubectl
// patch` would: an Update of the object read a moment before fails with a
// conflict whenever the operator wrote the network's status in between
// (the sweep's status writes change its resourceVersion).
func setTuningMode(ctx context.Context, n *fastpathv1alpha1.FastPathNetwork, mode fastpathv1alpha1.TuningMode) {
	GinkgoHelper()
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Tuning.Mode = mode
	Expect(env.Client().Patch(ctx, n, patch)).To(Succeed())
}
