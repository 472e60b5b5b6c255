package tuning_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/tuning"
)

func ptr[T any](v T) *T { return &v }

// createNetwork creates a network on bridge br with MTU bounds 1280-65535,
// default 9000, tuning as given, and a Ready FastPathNode serving it.
func createNetwork(t *v1alpha1.NetworkTuning) (net, node string) {
	GinkgoHelper()
	suffix := rand.String(5)
	net, node, br := "net-"+suffix, "node-"+suffix, "fp"+suffix
	n := &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: net}, Spec: v1alpha1.FastPathNetworkSpec{
		Bridge: br, MTU: &v1alpha1.MTURange{Max: ptr(int32(65535)), Default: ptr(int32(9000))}, Tuning: t}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	fpn := &v1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: node}}
	Expect(k8s.Create(ctx, fpn)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, fpn))).To(Succeed()) })
	fpn.Status.Capabilities.Kernel = "6.18.0"
	fpn.Status.Bridges = []v1alpha1.BridgeStatus{{Name: br, Datapath: v1alpha1.DatapathLinuxBridge, MTU: 65535, Ready: true, Network: net}}
	meta.SetStatusCondition(&fpn.Status.Conditions, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "AgentReady", Message: "set by the test"})
	Expect(k8s.Status().Update(ctx, fpn)).To(Succeed())
	return net, node
}

func getNetwork(name string) *v1alpha1.FastPathNetwork {
	GinkgoHelper()
	n := &v1alpha1.FastPathNetwork{}
	Expect(k8s.Get(ctx, types.NamespacedName{Name: name}, n)).To(Succeed())
	return n
}

func tuningReason(name string) func() string {
	return func() string {
		c := meta.FindStatusCondition(getNetwork(name).Status.Conditions, v1alpha1.TuningReadyCondition)
		if c == nil {
			return ""
		}
		return c.Reason
	}
}

// outcome is what the test's stand-in runner reports for one benchmark.
type outcome struct {
	mbps int64
	sd   string
	fail string
}

// runSweep plays the benchmark controller for network net until node has
// its entry in status.tuning: every benchmark the sweep creates is finished
// with measure(mtu, n), n counting that MTU's benchmarks from 0. It fails
// when two benchmarks of the sweep are unfinished at once, and returns the
// MTUs in the order they ran.
func runSweep(net, node string, measure func(mtu int32, n int) outcome) []int32 {
	GinkgoHelper()
	finished := map[string]bool{}
	count := map[int32]int{}
	var order []int32
	Eventually(func(g Gomega) {
		var list v1alpha1.FastPathBenchmarkList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(sweepNS), client.MatchingLabels{tuning.NetworkLabel: net})).To(Succeed())
		var open []v1alpha1.FastPathBenchmark
		for _, b := range list.Items {
			if b.Status.Phase == "" && !finished[b.Name] {
				open = append(open, b)
			}
		}
		Expect(len(open)).To(BeNumerically("<=", 1), "the sweep runs one benchmark at a time")
		for _, b := range open {
			Expect(b.Spec.Mode).To(Equal(v1alpha1.BenchmarkModePod))
			Expect(b.Spec.Client.Node).To(Equal(node))
			Expect(metav1.IsControlledBy(&b, getNetwork(net))).To(BeTrue())
			att := &v1alpha1.FastPathAttachment{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: sweepNS, Name: b.Spec.AttachmentRef.Name}, att)).To(Succeed())
			mtu := *att.Spec.Network.MTU
			o := measure(mtu, count[mtu])
			count[mtu]++
			order = append(order, mtu)
			b.Status.Phase = v1alpha1.BenchmarkSucceeded
			if o.fail != "" {
				b.Status.Phase = v1alpha1.BenchmarkFailed
				b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.FailedCondition, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonNetserverUnreachable, Message: o.fail, LastTransitionTime: metav1.Now()}}
			} else {
				b.Status.Points = []v1alpha1.BenchmarkPoint{{Test: v1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536,
					Sessions: 1, Pairs: 1, FastPathMbps: o.mbps, FastPathServiceDemandUsPerKB: o.sd}}
			}
			Expect(k8s.Status().Update(ctx, &b)).To(Succeed())
			finished[b.Name] = true
		}
		g.Expect(getNetwork(net).Status.Tuning).NotTo(BeNil())
		g.Expect(getNetwork(net).Status.Tuning.Nodes).To(ContainElement(HaveField("Node", node)))
	}).Should(Succeed())
	return order
}

// sweepObjects counts the sweep's attachments and benchmarks left.
func sweepObjects(net string) func() int {
	return func() int {
		var b v1alpha1.FastPathBenchmarkList
		var a v1alpha1.FastPathAttachmentList
		Expect(k8s.List(ctx, &b, client.InNamespace(sweepNS), client.MatchingLabels{tuning.NetworkLabel: net})).To(Succeed())
		Expect(k8s.List(ctx, &a, client.InNamespace(sweepNS), client.MatchingLabels{tuning.NetworkLabel: net})).To(Succeed())
		return len(a.Items) + len(b.Items)
	}
}

var candidates = &v1alpha1.TuningCandidates{MTUs: []int32{1500, 9000, 65520}}

var _ = Describe("FastPathNetwork tuning", func() {
	It("refuses candidate MTUs outside the network's bounds, naming the field and the range", func() {
		n := &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: "net-" + rand.String(5)}, Spec: v1alpha1.FastPathNetworkSpec{
			Bridge: "fpbad", Tuning: &v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates}}}
		err := k8s.Create(ctx, n)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.tuning.candidates.mtus"), ContainSubstring("spec.mtu.max (default 9000)")))

		n.Spec.Tuning = &v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Duration: &metav1.Duration{Duration: 0}}
		err = k8s.Create(ctx, n)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.tuning.duration must be between 1s and 60s"))
	})

	It("Recommend: alternates the candidates one benchmark at a time, 3 repetitions each, and recommends the best by the objective", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates})
		mbps := map[int32]int64{1500: 10000, 9000: 15000, 65520: 13000}
		order := runSweep(net, node, func(mtu int32, n int) outcome {
			return outcome{mbps: mbps[mtu] + int64(n)*100, sd: "0.300"}
		})
		Expect(order).To(Equal([]int32{1500, 9000, 65520, 65520, 9000, 1500, 1500, 9000, 65520}))

		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonRecommended))
		st := getNetwork(net).Status.Tuning
		Expect(st.Nodes).To(HaveLen(1))
		Expect(st.Nodes[0].Recommended.MTU).To(Equal(int32(9000)))
		Expect(st.Nodes[0].Evidence).To(HaveLen(3))
		for _, ev := range st.Nodes[0].Evidence {
			Expect(ev.Repetitions).To(Equal(int32(3)))
			Expect(ev.Failed).To(BeEmpty())
			Expect(ev.MedianMbps).To(Equal(mbps[ev.MTU] + 100))
			Expect([]int64{ev.MinMbps, ev.MaxMbps}).To(Equal([]int64{mbps[ev.MTU], mbps[ev.MTU] + 200}))
		}
		Expect(st.Nodes[0].MarginPercent).To(Equal(fmt.Sprintf("%.1f", float64(15100-13100)/13100*100)))
		Expect(st.Nodes[0].Kernel).To(Equal("6.18.0"))
		Expect(st.Applied).To(BeNil(), "Recommend applies nothing")
		Eventually(sweepObjects(net)).Should(BeZero(), "the sweep deletes what it made")
	})

	It("never recommends a candidate that failed, however fast its other repetitions were", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates})
		runSweep(net, node, func(mtu int32, n int) outcome {
			if mtu == 65520 && n == 1 {
				return outcome{fail: "lost the connection"}
			}
			return outcome{mbps: map[int32]int64{1500: 10000, 9000: 12000, 65520: 30000}[mtu], sd: "0.3"}
		})
		st := getNetwork(net).Status.Tuning
		Expect(st.Nodes[0].Recommended.MTU).To(Equal(int32(9000)))
		Expect(st.Nodes[0].Evidence[2].Failed).To(And(ContainSubstring("repetition 2"), ContainSubstring("lost the connection")))
	})

	It("Apply: new attachments default to the winner's MTU, existing ones are listed as differing, and Off restores the default", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningApply, Candidates: candidates, Objective: v1alpha1.ObjectiveCPUPerByte})
		ns := "tenant-" + rand.String(5)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		attach := func(name string) {
			Expect(k8s.Create(ctx, &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.FastPathAttachmentSpec{
				VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, NetworkRef: &v1alpha1.NetworkReference{Name: net},
				Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}})).To(Succeed())
		}
		attach("old")
		Eventually(nadMTU(ns, "old")).Should(Equal(9000))

		sd := map[int32]string{1500: "0.900", 9000: "0.500", 65520: "0.250"}
		runSweep(net, node, func(mtu int32, _ int) outcome { return outcome{mbps: 1000, sd: sd[mtu]} })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonApplied))
		st := getNetwork(net).Status.Tuning
		Expect(st.Applied.MTU).To(Equal(int32(65520)), "the lowest CPU per byte wins under CPUPerByte")
		Expect(st.Differing).To(ConsistOf(And(HaveField("Name", "old"), HaveField("MTU", int32(9000)), HaveField("Restart", ContainSubstring("restart")))))

		// appliedAt is rounded up to a whole second; an attachment created
		// before it counts as existing. Wait for the clock, not for a duration.
		Eventually(func() bool { return time.Now().After(st.AppliedAt.Time) }, "3s").Should(BeTrue())
		attach("new")
		Eventually(nadMTU(ns, "new")).Should(Equal(65520))
		Consistently(nadMTU(ns, "old"), "300ms").Should(Equal(9000), "an existing attachment is left alone")

		n := getNetwork(net)
		n.Spec.Tuning.Mode = v1alpha1.TuningOff
		Expect(k8s.Update(ctx, n)).To(Succeed())
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonTuningOff))
		Eventually(nadMTU(ns, "new")).Should(Equal(9000), "Off brings the previous default back")
		Expect(getNetwork(net).Status.Tuning.Applied).To(BeNil())
	})
})

// nadMTU reads the mtu of an attachment's NetworkAttachmentDefinition
// netconf (0 while it does not exist).
func nadMTU(ns, name string) func() int {
	return func() int {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad); err != nil {
			return 0
		}
		var conf struct {
			MTU int `json:"mtu"`
		}
		Expect(json.Unmarshal([]byte(strings.TrimSpace(nad.Spec.Config)), &conf)).To(Succeed())
		return conf.MTU
	}
}
