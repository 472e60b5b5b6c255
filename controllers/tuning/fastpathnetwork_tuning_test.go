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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/tuning"
)

func ptr[T any](v T) *T { return &v }

// createNetwork creates a network on bridge br with MTU bounds 1280-65535,
// default 9000, tuning as given (then changed by mutate), and a Ready
// FastPathNode serving it.
func createNetwork(t *v1alpha1.NetworkTuning, mutate ...func(*v1alpha1.FastPathNetworkSpec)) (net, node string) {
	GinkgoHelper()
	suffix := rand.String(5)
	net, node, br := "net-"+suffix, "node-"+suffix, "fp"+suffix
	n := &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: net}, Spec: v1alpha1.FastPathNetworkSpec{
		Bridge: br, MTU: &v1alpha1.MTURange{Max: ptr(int32(65535)), Default: ptr(int32(9000))}, Tuning: t}}
	for _, m := range mutate {
		m(&n.Spec)
	}
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
// The fast path's negotiated offloads (status.paths[]) are the candidate's
// attachment's, as a path that works has them, unless negotiated says
// otherwise or unreported leaves them out.
type outcome struct {
	mbps       int64
	sd         string
	fail       string
	negotiated *v1alpha1.Offloads
	unreported bool
}

// runSweep plays the benchmark controller for network net until node has
// its entry in status.tuning: every benchmark the sweep creates is finished
// with measure(mtu, n), n counting that MTU's benchmarks from 0. It fails
// when two benchmarks of the sweep are unfinished at once, and returns the
// MTUs in the order they ran. The network's candidates must have one offload
// set (runSweepSettings takes more).
func runSweep(net, node string, measure func(mtu int32, n int) outcome) []int32 {
	GinkgoHelper()
	var order []int32
	for _, c := range runSweepSettings(net, node, func(c v1alpha1.TuningSetting, n int) outcome { return measure(c.MTU, n) }) {
		order = append(order, c.MTU)
	}
	return order
}

// runSweepSettings is runSweep for candidates of several offload sets:
// measure gets the candidate's setting (its attachment's MTU and offloads)
// and n counting that setting's benchmarks from 0; it returns the settings
// in the order they ran.
func runSweepSettings(net, node string, measure func(c v1alpha1.TuningSetting, n int) outcome) []v1alpha1.TuningSetting {
	GinkgoHelper()
	type key struct {
		mtu      int32
		offloads v1alpha1.Offloads
	}
	finished := map[string]bool{}
	count := map[key]int{}
	var order []v1alpha1.TuningSetting
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
			c := v1alpha1.TuningSetting{MTU: *att.Spec.Network.MTU, Offloads: att.Spec.Network.Offloads.DeepCopy()}
			k := key{mtu: c.MTU}
			if c.Offloads != nil {
				k.offloads = *c.Offloads
			}
			o := measure(c, count[k])
			count[k]++
			order = append(order, c)
			b.Status.Phase = v1alpha1.BenchmarkSucceeded
			if o.fail != "" {
				b.Status.Phase = v1alpha1.BenchmarkFailed
				b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.FailedCondition, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonNetserverUnreachable, Message: o.fail, LastTransitionTime: metav1.Now()}}
			} else {
				b.Status.Points = []v1alpha1.BenchmarkPoint{{Test: v1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536,
					Sessions: 1, Pairs: 1, FastPathMbps: o.mbps, FastPathServiceDemandUsPerKB: o.sd}}
				path := v1alpha1.PathSummary{Path: "fastpath", BestThroughputMbps: o.mbps, Interface: "net1", Offloads: c.Offloads.DeepCopy()}
				if o.negotiated != nil {
					path.Offloads = o.negotiated.DeepCopy()
				}
				if o.unreported {
					path.Interface, path.Offloads = "", nil
				}
				b.Status.Paths = []v1alpha1.PathSummary{path}
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
		Expect(st.Nodes[0].MTUCurve).To(Equal(v1alpha1.BeyondNoise), "the ranges do not overlap")
		for _, ev := range st.Nodes[0].Evidence {
			Expect(ev.NegotiatedOffloads).To(Equal(ptr(v1alpha1.AllOffloads(v1alpha1.OffloadOn))), "the evidence lists what each candidate's path negotiated")
			Expect(ev.OffloadMismatch).To(BeEmpty())
		}
		Expect(st.Applied).To(BeNil(), "Recommend applies nothing")
		Eventually(sweepObjects(net)).Should(BeZero(), "the sweep deletes what it made")
	})

	It("removes another node's sweep objects that a reconcile from a stale read left, so their subnets do not hold the sweep up", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates})
		Eventually(sweepObjects(net)).ShouldNot(BeZero(), "the sweep of the network's node began")
		n := getNetwork(net)
		// What a reconcile that chose another node and lost the status
		// write leaves: that node's candidate attachment, on the subnet the
		// sweep's first candidate takes.
		ghost := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "tune-0ther0ther-c0", Namespace: sweepNS,
			Labels: map[string]string{tuning.NetworkLabel: net}},
			Spec: v1alpha1.FastPathAttachmentSpec{NetworkRef: &v1alpha1.NetworkReference{Name: net}, VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "ghost"}},
				Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "198.18.0.0/24"}}}}
		Expect(controllerutil.SetControllerReference(n, ghost, k8s.Scheme())).To(Succeed())
		Expect(k8s.Create(ctx, ghost)).To(Succeed())
		runSweep(net, node, func(mtu int32, n int) outcome { return outcome{mbps: int64(mtu), sd: "0.300"} })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonRecommended))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(ghost), &v1alpha1.FastPathAttachment{}))).To(BeTrue(), "the other node's attachment is gone")
		Eventually(sweepObjects(net)).Should(BeZero())
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

	It("never recommends a candidate whose path has an offload silently off, however fast; the evidence names the offload, asked and negotiated", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates})
		groOff := v1alpha1.AllOffloads(v1alpha1.OffloadOn)
		groOff.GRO = v1alpha1.OffloadOff
		runSweep(net, node, func(mtu int32, n int) outcome {
			o := outcome{mbps: map[int32]int64{1500: 10000, 9000: 12000, 65520: 30000}[mtu] + int64(n)*10, sd: "0.3"}
			if mtu == 65520 && n == 1 {
				// Asked for every offload On, the path came up without GRO
				// in the second repetition: the fastest figure of the sweep.
				o.negotiated = &groOff
			}
			return o
		})
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonRecommended))
		st := getNetwork(net).Status.Tuning
		Expect(st.Nodes[0].Recommended.MTU).To(Equal(int32(9000)))
		ev := st.Nodes[0].Evidence
		Expect(ev[2].MTU).To(Equal(int32(65520)))
		Expect(ev[2].OffloadMismatch).To(Equal("repetition 2: gro asked On, negotiated Off"))
		Expect(ev[2].NegotiatedOffloads).To(Equal(&groOff))
		Expect(ev[2].Failed).To(BeEmpty())
		Expect(ev[2].MedianMbps).To(Equal(int64(30010)), "its figures stay in the evidence")
		Expect(ev[0].NegotiatedOffloads).To(Equal(ptr(v1alpha1.AllOffloads(v1alpha1.OffloadOn))))
		Expect(st.Nodes[0].Message).To(ContainSubstring("1 candidate(s) left out: their path negotiated other offloads"))
	})

	It("recommends nothing where the benchmarks report no negotiated offloads: an unverified path is not a recommendation", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: &v1alpha1.TuningCandidates{MTUs: []int32{9000}}})
		runSweep(net, node, func(int32, int) outcome { return outcome{mbps: 12000, sd: "0.3", unreported: true} })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonAllCandidatesFailed))
		st := getNetwork(net).Status.Tuning
		Expect(st.Nodes[0].Recommended).To(BeNil())
		Expect(st.Nodes[0].Evidence[0].OffloadMismatch).To(ContainSubstring("reported no negotiated offloads"))
		c := meta.FindStatusCondition(getNetwork(net).Status.Conditions, v1alpha1.TuningReadyCondition)
		Expect(c.Message).To(ContainSubstring("offloadMismatch"))
	})

	It("says when the MTU curve is flat within noise and then recommends the smallest MTU", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningRecommend, Candidates: candidates})
		// Each MTU's three repetitions spread over ±300 Mbit/s around
		// medians 200 apart: every range overlaps every other.
		runSweep(net, node, func(mtu int32, n int) outcome {
			return outcome{mbps: map[int32]int64{1500: 14000, 9000: 14200, 65520: 14100}[mtu] + int64(n-1)*300, sd: "0.3"}
		})
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonRecommended))
		st := getNetwork(net).Status.Tuning
		Expect(st.Nodes[0].Recommended.MTU).To(Equal(int32(1500)), "the smallest MTU, not the fastest median (9000)")
		Expect(st.Nodes[0].MTUCurve).To(Equal(v1alpha1.WithinNoise))
		Expect(st.Nodes[0].MarginPercent).To(Equal(fmt.Sprintf("%.1f", float64(14000-14200)/14200*100)))
		Expect(st.Nodes[0].Message).To(And(ContainSubstring("MTU curve flat within noise"), ContainSubstring("the smallest, MTU 1500, is recommended"), ContainSubstring("less memory per ring")))
		c := meta.FindStatusCondition(getNetwork(net).Status.Conditions, v1alpha1.TuningReadyCondition)
		Expect(c.Message).To(ContainSubstring("the MTU curve is flat within noise on node(s) " + node + " (MTU 1500)"))
	})

	It("Apply: new attachments default to the winner's MTU, existing ones are listed as differing, and Off restores the default", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningApply, Candidates: candidates, Objective: v1alpha1.ObjectiveCPUPerByte})
		ns := "tenant-" + rand.String(5)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		subnets := 0
		attach := func(name string) {
			// One subnet each: overlapping subnets on one network are refused.
			subnets++
			Expect(k8s.Create(ctx, &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.FastPathAttachmentSpec{
				VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, NetworkRef: &v1alpha1.NetworkReference{Name: net},
				Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: fmt.Sprintf("10.250.%d.0/24", subnets)}}}})).To(Succeed())
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

		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.Tuning.Mode = v1alpha1.TuningOff })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonTuningOff))
		Eventually(nadMTU(ns, "new")).Should(Equal(9000), "Off brings the previous default back")
		Expect(getNetwork(net).Status.Tuning.Applied).To(BeNil())
	})

	It("Apply: new attachments default to the winner's offloads too, only in the keys they leave unset; existing ones are listed with the offloads that differ; Off restores spec.offloads", func() {
		const on, off = v1alpha1.OffloadOn, v1alpha1.OffloadOff
		// The second candidate also turns RX checksum offload off: a knob
		// the sweep carries like any other.
		noGSOGRORX := v1alpha1.Offloads{GSO: off, GRO: off, RXChecksum: off}
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningApply, Candidates: &v1alpha1.TuningCandidates{
			MTUs: []int32{9000, 65520}, Offloads: []v1alpha1.Offloads{{TSO: on}, noGSOGRORX}}})
		ns := "tenant-" + rand.String(5)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		subnets := 0
		attach := func(name string, o *v1alpha1.Offloads) {
			// One subnet each: overlapping subnets on one network are refused.
			subnets++
			Expect(k8s.Create(ctx, &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.FastPathAttachmentSpec{
				VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, NetworkRef: &v1alpha1.NetworkReference{Name: net},
				Network: &v1alpha1.NetworkSpec{Offloads: o, IPAM: v1alpha1.IPAMSpec{Subnet: fmt.Sprintf("10.250.%d.0/24", subnets)}}}})).To(Succeed())
		}
		allOn := nadOffloadsOf(true, true, true, true, true)
		attach("old", nil)
		Eventually(nadOffloads(ns, "old")).Should(Equal(allOn))

		// 65520 with GSO and GRO off is fastest; the same MTU with
		// every offload on comes second, so only the offloads decide.
		order := runSweepSettings(net, node, func(c v1alpha1.TuningSetting, _ int) outcome {
			mbps := int64(c.MTU)
			if c.Offloads.GRO == off {
				mbps += 5000
			}
			return outcome{mbps: mbps, sd: "0.300"}
		})
		Expect(order).To(HaveLen(4*3), "2 MTUs x 2 offload sets, 3 repetitions each")
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonApplied))
		st := getNetwork(net).Status.Tuning
		winner := v1alpha1.Offloads{TSO: on, GSO: off, GRO: off, TXChecksum: on, RXChecksum: off}
		Expect(st.Nodes[0].Recommended).To(Equal(&v1alpha1.TuningSetting{MTU: 65520, Offloads: &winner}))
		Expect(st.Applied).To(Equal(st.Nodes[0].Recommended))
		Expect(st.Differing).To(ConsistOf(And(HaveField("Name", "old"), HaveField("MTU", int32(9000)),
			HaveField("Offloads", Equal(&v1alpha1.Offloads{TSO: on, GSO: on, GRO: on, TXChecksum: on, RXChecksum: on})),
			HaveField("Restart", And(ContainSubstring("spec.network.mtu to 65520"), ContainSubstring("spec.network.offloads.gso to Off"),
				ContainSubstring("spec.network.offloads.gro to Off"), ContainSubstring("spec.network.offloads.rxChecksum to Off"), Not(ContainSubstring("offloads.tso")), Not(ContainSubstring("offloads.txChecksum")), ContainSubstring("restart"))))))
		c := meta.FindStatusCondition(getNetwork(net).Status.Conditions, v1alpha1.TuningReadyCondition)
		Expect(c.Message).To(ContainSubstring("MTU 65520 and offloads tso On, gso Off, gro Off, txChecksum On, rxChecksum Off"))

		Eventually(func() bool { return time.Now().After(st.AppliedAt.Time) }, "3s").Should(BeTrue())
		attach("new", nil)
		attach("own", &v1alpha1.Offloads{TSO: off, GRO: on})
		Eventually(nadMTU(ns, "new")).Should(Equal(65520))
		Eventually(nadOffloads(ns, "new")).Should(Equal(nadOffloadsOf(true, false, false, true, false)), "the winner's offloads")
		Eventually(nadOffloads(ns, "own")).Should(Equal(nadOffloadsOf(false, false, true, true, false)),
			"the attachment's own tso and gro stay; gso, which it leaves unset, is the winner's")
		Consistently(nadOffloads(ns, "old"), "300ms").Should(Equal(allOn), "an existing attachment is left alone")

		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.Tuning.Mode = v1alpha1.TuningOff })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonTuningOff))
		Eventually(nadOffloads(ns, "new")).Should(Equal(allOn), "Off brings spec.offloads back")
		Eventually(nadOffloads(ns, "own")).Should(Equal(nadOffloadsOf(false, true, true, true, true)))
		Expect(nadMTU(ns, "new")()).To(Equal(9000))
	})

	It("Apply under offloadPolicy Fixed applies the MTU only: the network's offloads stay the only ones", func() {
		net, node := createNetwork(&v1alpha1.NetworkTuning{Mode: v1alpha1.TuningApply, Candidates: candidates}, func(s *v1alpha1.FastPathNetworkSpec) {
			s.OffloadPolicy = v1alpha1.OffloadPolicyFixed
			s.Offloads = &v1alpha1.Offloads{GRO: v1alpha1.OffloadOff}
		})
		runSweep(net, node, func(mtu int32, _ int) outcome { return outcome{mbps: int64(mtu), sd: "0.3"} })
		Eventually(tuningReason(net)).Should(Equal(v1alpha1.ReasonApplied))
		st := getNetwork(net).Status.Tuning
		Expect(st.Applied.MTU).To(Equal(int32(65520)))
		Expect(st.Applied.Offloads).To(Equal(&v1alpha1.Offloads{TSO: v1alpha1.OffloadOn, GSO: v1alpha1.OffloadOn, GRO: v1alpha1.OffloadOff, TXChecksum: v1alpha1.OffloadOn, RXChecksum: v1alpha1.OffloadOn}))

		// Fixed since the sweep: the admin turns GRO back on. The applied set
		// (GRO Off) is no longer allowed, so it must not reach attachments,
		// nor make them differ.
		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.Offloads = nil })
		ns := "tenant-" + rand.String(5)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() bool { return time.Now().After(st.AppliedAt.Time) }, "3s").Should(BeTrue())
		Expect(k8s.Create(ctx, &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}, Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "new"}}, NetworkRef: &v1alpha1.NetworkReference{Name: net},
			Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}})).To(Succeed())
		Eventually(nadMTU(ns, "new")).Should(Equal(65520))
		Expect(nadOffloads(ns, "new")()).To(Equal(nadOffloadsOf(true, true, true, true, true)))
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

// nadOffloads reads the offloads of an attachment's NetworkAttachmentDefinition
// netconf (nil while it does not exist).
func nadOffloads(ns, name string) func() map[string]bool {
	return func() map[string]bool {
		nad := &nadv1.NetworkAttachmentDefinition{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, nad); err != nil {
			return nil
		}
		var conf struct {
			Offloads map[string]bool `json:"offloads"`
		}
		Expect(json.Unmarshal([]byte(strings.TrimSpace(nad.Spec.Config)), &conf)).To(Succeed())
		return conf.Offloads
	}
}

func nadOffloadsOf(tso, gso, gro, txChecksum, rxChecksum bool) map[string]bool {
	return map[string]bool{"tso": tso, "gso": gso, "gro": gro, "txChecksum": txChecksum, "rxChecksum": rxChecksum}
}

// updateNetwork changes FastPathNetwork name's spec as an admin would:
// read, change, write, again on a conflict (the controller may still be
// writing the status, and each write is a new resourceVersion).
func updateNetwork(name string, change func(*v1alpha1.FastPathNetwork)) {
	GinkgoHelper()
	Eventually(func() error {
		n := getNetwork(name)
		change(n)
		return k8s.Update(ctx, n)
	}).Should(Succeed())
}
