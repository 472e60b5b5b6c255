package benchmark_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

const (
	running   = fastpathv1alpha1.BenchmarkRunning
	pending   = fastpathv1alpha1.BenchmarkPending
	succeeded = fastpathv1alpha1.BenchmarkSucceeded
	failed    = fastpathv1alpha1.BenchmarkFailed
)

// startPodRun creates a Ready attachment and b, plays kubelet and Multus for
// the netserver pods (fast path 10.250.0.1x, pod network 10.244.0.1x per pair)
// and returns the runner Job.
func startPodRun(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark) *batchv1.Job {
	createReadyAttachment(ctx, b.Namespace, b.Spec.AttachmentRef.Name)
	Expect(k8s.Create(ctx, b)).To(Succeed())
	return followPodRun(ctx, b)
}

// followPodRun plays kubelet and Multus for b's netserver pods, as
// startPodRun, once b exists.
func followPodRun(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark) *batchv1.Job {
	pairs := 1
	if b.Spec.Pairs != nil {
		pairs = int(*b.Spec.Pairs)
	}
	paths := 2
	if b.Spec.Baseline == fastpathv1alpha1.BaselineNone {
		paths = 1
	}
	Eventually(serverPods(ctx, b.Namespace, b.Name)).Should(HaveLen(pairs * paths))
	for _, pod := range serverPods(ctx, b.Namespace, b.Name)() {
		pair := pod.Labels[benchjob.LabelPair]
		switch pod.Labels[benchjob.LabelPath] {
		case benchjob.PathFastPath:
			playKubeletAndMultus(ctx, &pod, b.Namespace+"/"+b.Spec.AttachmentRef.Name, "10.244.0.2"+pair, "10.250.0.1"+pair)
		default:
			playKubeletAndMultus(ctx, &pod, "", "10.244.0.1"+pair, "")
		}
	}
	return runnerJob(ctx, b.Namespace, b.Name, b.Generation)
}

var _ = Describe("FastPathBenchmark in Pod mode", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("creates netserver pods on the fast network and the pod network, then a runner Job with their addresses", func() {
		b := podBenchmark(ns, "quick", "db-link")
		createReadyAttachment(ctx, ns, "db-link")
		Expect(k8s.Create(ctx, b)).To(Succeed())

		By("creating one netserver pod per path, the fast-path one attached to the NAD")
		Eventually(serverPods(ctx, ns, "quick")).Should(HaveLen(2))
		pods := map[string]corev1.Pod{}
		for _, p := range serverPods(ctx, ns, "quick")() {
			pods[p.Labels[benchjob.LabelPath]] = p
			Expect(metav1.IsControlledBy(&p, getBenchmark(ctx, ns, "quick")())).To(BeTrue())
			Expect(p.Spec.Containers[0].Image).To(Equal(runnerImage))
			Expect(p.Spec.Containers[0].Command).To(Equal([]string{"netserver", "-D", "-p", "12865"}))
			Expect(p.Spec.Affinity.PodAffinity).NotTo(BeNil(), "client and servers share a node")
		}
		Expect(pods[benchjob.PathFastPath].Annotations).To(HaveKeyWithValue("k8s.v1.cni.cncf.io/networks", ns+"/db-link"))
		Expect(pods[benchjob.PathBaseline].Annotations).NotTo(HaveKey("k8s.v1.cni.cncf.io/networks"))

		By("staying Pending with EndpointNotFound until the pods have addresses, without a Job")
		Eventually(getBenchmark(ctx, ns, "quick")).Should(And(havePhase(pending), haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonEndpointNotFound)))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: benchjob.JobName("quick", 1)}, &batchv1.Job{})).To(Satisfy(apierrors.IsNotFound))

		fast, base := pods[benchjob.PathFastPath], pods[benchjob.PathBaseline]
		playKubeletAndMultus(ctx, &fast, ns+"/db-link", "10.244.0.21", "10.250.0.3")
		Consistently(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: benchjob.JobName("quick", 1)}, &batchv1.Job{})
		}, 500*time.Millisecond).Should(Satisfy(apierrors.IsNotFound), "the baseline server has no address yet")
		Expect(conditionMessage(getBenchmark(ctx, ns, "quick")(), fastpathv1alpha1.RunningCondition)).To(ContainSubstring("quick-netserver-baseline-1 is not Ready"))
		playKubeletAndMultus(ctx, &base, "", "10.244.0.7", "")

		By("creating the runner Job with both addresses, on the fast network, under the runner's ServiceAccount")
		job := runnerJob(ctx, ns, "quick", 1)
		Expect(metav1.IsControlledBy(job, getBenchmark(ctx, ns, "quick")())).To(BeTrue())
		Expect(*job.Spec.BackoffLimit).To(BeZero())
		tmpl := job.Spec.Template
		Expect(tmpl.Annotations).To(HaveKeyWithValue("k8s.v1.cni.cncf.io/networks", ns+"/db-link"))
		Expect(tmpl.Spec.ServiceAccountName).To(Equal("quick-runner"))
		c := tmpl.Spec.Containers[0]
		Expect(c.Image).To(Equal(runnerImage))
		Expect(c.Command).To(Equal([]string{"fastpath-bench"}))
		Expect(c.Args[0]).To(Equal("run"))
		Expect(flagValues(c.Args, "--path")).To(Equal([]string{"fastpath=10.250.0.3", "baseline=10.244.0.7"}))
		Expect(flagValues(c.Args, "--tests")).To(Equal([]string{"TCP_STREAM,TCP_RR"}))
		Expect(flagValues(c.Args, "--socket-sizes")).To(Equal([]string{"65536,262144"}))
		Expect(flagValues(c.Args, "--message-sizes")).To(Equal([]string{"16384,65536"}))
		Expect(flagValues(c.Args, "--duration")).To(Equal([]string{"5s"}))
		Expect(flagValues(c.Args, "--mtu")).To(Equal([]string{"fastpath=9000"}))
		Expect(flagValues(c.Args, "--results-configmap")).To(Equal([]string{ns + "/quick-results"}))
		Expect(flagValues(c.Args, "--run-id")).To(Equal([]string{"quick-run-1"}))
		Expect(c.Args).NotTo(ContainElement("--ssh-clients"))

		By("giving the runner write access to its ConfigMap only")
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "quick-results"}, cm)).To(Succeed())
		Expect(cm.Data).To(BeEmpty())
		role := &rbacv1.Role{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "quick-runner"}, role)).To(Succeed())
		Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"quick-results"}, Verbs: []string{"get", "update", "patch"}}))
		rb := &rbacv1.RoleBinding{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "quick-runner"}, rb)).To(Succeed())
		Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "quick-runner", Namespace: ns}))
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "quick-runner"}, &corev1.ServiceAccount{})).To(Succeed())

		By("reporting Running with the Job and the ConfigMap in status")
		Eventually(getBenchmark(ctx, ns, "quick")).Should(And(havePhase(running), haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonJobCreated)))
		b = getBenchmark(ctx, ns, "quick")()
		Expect(b.Status.JobName).To(Equal("quick-run-1"))
		Expect(b.Status.ResultsConfigMap).To(Equal("quick-results"))
		Expect(b.Status.StartTime).NotTo(BeNil())
		Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
		Expect(conditionMessage(b, fastpathv1alpha1.RunningCondition)).To(ContainSubstring("6 points × 3 repetitions on fastpath, baseline (36 runs)"))
		Eventually(eventReasons(ctx, ns, "quick")).Should(ContainElements("Normal/EndpointNotFound", "Normal/JobCreated"))

		By("reporting JobRunning once the Job has an active pod")
		job.Status.Active = 1
		job.Status.StartTime = ptr(metav1.Now())
		Expect(k8s.Status().Update(ctx, job)).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "quick")).Should(haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonJobRunning))
	})

	It("summarises the runner's results into status and succeeds when the criteria are met", func() {
		b := podBenchmark(ns, "pass", "db-link")
		b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(10000)), MinSpeedupPercent: ptr(int32(150))}
		job := startPodRun(ctx, b)

		By("letting the runner write its results with its own ServiceAccount")
		_, err := runnerSink(ns, "pass", job.Name).Write(ctx, fixtureDoc(), nil)
		Expect(err).NotTo(HaveOccurred())

		Eventually(getBenchmark(ctx, ns, "pass")).Should(And(havePhase(succeeded),
			haveCondition(fastpathv1alpha1.SucceededCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonCriteriaMet),
			haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonCriteriaMet),
			haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonCriteriaMet)))
		b = getBenchmark(ctx, ns, "pass")()
		Expect(b.Status.BestGbps).To(Equal("13.52"))
		Expect(b.Status.Speedup).To(Equal("2.95x"))
		Expect(b.Status.CompletionTime).NotTo(BeNil())
		Expect(conditionMessage(b, fastpathv1alpha1.SucceededCondition)).To(Equal(
			"best fast path 13.52 Gbps at TCP_STREAM sock=256KiB msg=64KiB sessions=1 pairs=1, 2.95x the baseline: minThroughputMbps 10000 met, minSpeedupPercent 150 met"))
		Expect(b.Status.Points).To(HaveLen(6))
		Expect(b.Status.Points[3]).To(Equal(fastpathv1alpha1.BenchmarkPoint{
			Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 262144, MessageBytes: 65536, Sessions: 1, Pairs: 1,
			FastPathMbps: 13520, BaselineMbps: 4590, SpeedupPercent: 295,
		}))
		Expect(b.Status.Points[4].FastPathLatency.Duration).To(Equal(24100 * time.Nanosecond))
		Expect(b.Status.Paths).To(HaveLen(2))
		Expect(b.Status.Paths[0].Path).To(Equal("fastpath"))
		Expect(b.Status.Paths[0].BestThroughputMbps).To(Equal(int64(13520)))

		By("deleting the netserver pods and keeping the Job for its logs")
		Eventually(serverPods(ctx, ns, "pass")).Should(BeEmpty())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})).To(Succeed())

		By("recording the transition and exporting the gauges")
		Eventually(eventReasons(ctx, ns, "pass")).Should(ContainElement("Normal/CriteriaMet"))
		Eventually(func() float64 {
			v, _ := gauge("fastpath_benchmark_succeeded", map[string]string{"namespace": ns, "benchmark": "pass"})
			return v
		}).Should(Equal(1.0))
		v, ok := gauge("fastpath_benchmark_throughput_mbps", map[string]string{"namespace": ns, "benchmark": "pass", "path": "fastpath"})
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(13520.0))
		v, ok = gauge("fastpath_benchmark_throughput_mbps", map[string]string{"namespace": ns, "benchmark": "pass", "path": "baseline"})
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(4590.0))
		v, ok = gauge("fastpath_benchmark_speedup_ratio", map[string]string{"namespace": ns, "benchmark": "pass"})
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(2.95))
		v, ok = gauge("fastpath_benchmark_latency_microseconds", map[string]string{"namespace": ns, "benchmark": "pass", "path": "fastpath"})
		Expect(ok).To(BeTrue())
		Expect(v).To(BeNumerically("~", 23.9, 1e-9))

		By("removing the gauges when the benchmark is deleted")
		Expect(k8s.Delete(ctx, b)).To(Succeed())
		Eventually(func() bool {
			_, ok := gauge("fastpath_benchmark_succeeded", map[string]string{"namespace": ns, "benchmark": "pass"})
			return ok
		}).Should(BeFalse())
	})

	It("fails with ThresholdNotMet and the numbers when a criterion is missed", func() {
		b := podBenchmark(ns, "strict", "db-link")
		b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MinThroughputMbps: ptr(int64(20000)), MinSpeedupPercent: ptr(int32(300))}
		job := startPodRun(ctx, b)
		writeOutcome(ctx, ns, "strict", job.Name, map[string]string{benchjob.ResultsKey: fixture()})

		Eventually(getBenchmark(ctx, ns, "strict")).Should(And(havePhase(failed),
			haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonThresholdNotMet),
			haveCondition(fastpathv1alpha1.SucceededCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonThresholdNotMet)))
		b = getBenchmark(ctx, ns, "strict")()
		Expect(conditionMessage(b, fastpathv1alpha1.FailedCondition)).To(ContainSubstring("minThroughputMbps 20000 not met (13520 Mbps), minSpeedupPercent 300 not met (294.5%)"))
		Expect(b.Status.BestGbps).To(Equal("13.52"), "the summary is kept on failure")
		Eventually(eventReasons(ctx, ns, "strict")).Should(ContainElement("Warning/ThresholdNotMet"))
		Eventually(func() (float64, error) {
			v, ok := gauge("fastpath_benchmark_succeeded", map[string]string{"namespace": ns, "benchmark": "strict"})
			if !ok {
				return -1, nil
			}
			return v, nil
		}).Should(Equal(0.0))
	})

	It("fails with the runner's reason when the runner reports an error", func() {
		job := startPodRun(ctx, podBenchmark(ns, "noserver", "db-link"))
		runErr := fmt.Errorf("failed to measure path fastpath at TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1, repetition 1 (1 of 1 sessions failed): %w", &netperf.RunError{
			Endpoint: "10.250.0.11:12865", Executor: "local", Command: []string{"netperf", "-H", "10.250.0.11", "-t", "TCP_STREAM"},
			Err: fmt.Errorf("%w: establish control: are you sure there is a netserver listening on 10.250.0.11 at port 12865?", netperf.ErrNetserverUnreachable),
		})
		data, err := runnerSink(ns, "noserver", job.Name).Write(ctx, results.Document{}, runErr)
		Expect(err).NotTo(HaveOccurred())
		Expect(*data[benchjob.ErrorReasonKey]).To(Equal(benchjob.ErrorReasonNetserverUnreachable))
		Eventually(getBenchmark(ctx, ns, "noserver")).Should(And(havePhase(failed),
			haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonNetserverUnreachable)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "noserver")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("10.250.0.11:12865"))
		Expect(getBenchmark(ctx, ns, "noserver")().Status.CompletionTime).NotTo(BeNil())
		Eventually(serverPods(ctx, ns, "noserver")).Should(BeEmpty())
		Eventually(eventReasons(ctx, ns, "noserver")).Should(ContainElement("Warning/NetserverUnreachable"))
	})

	It("fails with ResultsInvalid for results that do not validate, and RunnerFailed for an unknown reason", func() {
		job := startPodRun(ctx, podBenchmark(ns, "garbled", "db-link"))
		writeOutcome(ctx, ns, "garbled", job.Name, map[string]string{benchjob.ResultsKey: `{"machine":{},"runs":[{"path":"fastpath","test":"TCP_STREAM","sessions":1,"pairs":1,"throughputMbps":0,"samples":[{"repetition":1}]}]}`})
		Eventually(getBenchmark(ctx, ns, "garbled")).Should(haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonResultsInvalid))
		Expect(conditionMessage(getBenchmark(ctx, ns, "garbled")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("throughputMbps must be positive"))

		job = startPodRun(ctx, podBenchmark(ns, "sshfail", "db-link2"))
		writeOutcome(ctx, ns, "sshfail", job.Name, map[string]string{benchjob.ErrorKey: "ssh: connect to host 10.244.1.5 port 22: Connection refused", benchjob.ErrorReasonKey: "SSHFailed"})
		Eventually(getBenchmark(ctx, ns, "sshfail")).Should(haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonRunnerFailed))
		Expect(conditionMessage(getBenchmark(ctx, ns, "sshfail")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("SSHFailed: ssh: connect to host"))
	})

	It("fails when the Job fails without writing results, quoting how the runner ended", func() {
		job := startPodRun(ctx, podBenchmark(ns, "crashed", "db-link"))
		// The runner's pod as the Job controller and kubelet leave it: the
		// runner died before writing its error, and kubelet kept its log's
		// tail as the termination message (FallbackToLogsOnError).
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-x7k2p", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: benchjob.RunnerContainer, Image: "img"}}},
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		pod.Status.Phase = corev1.PodFailed
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: benchjob.RunnerContainer, Image: "img", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: strings.Repeat("x", 2000) + "\npanic: netperf: unexpected EOF"},
		}}}
		Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		now := metav1.Now()
		job.Status.StartTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}
		job.Status.Failed = 1
		Expect(k8s.Status().Update(ctx, job)).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "crashed")).Should(haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonRunnerFailed))
		msg := conditionMessage(getBenchmark(ctx, ns, "crashed")(), fastpathv1alpha1.FailedCondition)
		Expect(msg).To(ContainSubstring("failed (BackoffLimitExceeded: Job has reached the specified backoff limit) without writing results"))
		Expect(msg).To(ContainSubstring("its runner container in pod " + pod.Name + " exited 2 (Error): …xxx"))
		Expect(msg).To(HaveSuffix("\npanic: netperf: unexpected EOF"), "the tail, where the error is")
		Expect(len(msg)).To(BeNumerically("<", 1500), "at most 1 KiB of the runner's output")
	})

	It("lets the runner's ServiceAccount write its results ConfigMap and nothing else", func() {
		job := startPodRun(ctx, podBenchmark(ns, "rbac", "db-link"))
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
		Expect(k8s.Create(ctx, other)).To(Succeed())
		runner := runnerClient(ns, "rbac")

		_, err := runner.ConfigMaps(ns).Get(ctx, "other", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		_, err = runner.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		_, err = runner.Secrets(ns).Get(ctx, "any", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		_, err = runner.Pods(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

		_, err = runner.ConfigMaps(ns).Get(ctx, "rbac-results", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = runnerSink(ns, "rbac", job.Name).Write(ctx, fixtureDoc(), nil)
		Expect(err).NotTo(HaveOccurred())
		Eventually(getBenchmark(ctx, ns, "rbac")).Should(havePhase(succeeded))
	})

	It("runs pairs at once: a netserver pod per pair and path, and the runner measures 1 and N pairs", func() {
		b := podBenchmark(ns, "scale", "db-link")
		b.Spec.Pairs = ptr(int32(2))
		job := startPodRun(ctx, b)
		args := job.Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--pairs")).To(Equal([]string{"1,2"}))
		Expect(flagValues(args, "--path")).To(Equal([]string{"fastpath=10.250.0.11,10.250.0.12", "baseline=10.244.0.11,10.244.0.12"}))
	})

	It("does not re-run a finished benchmark, re-runs a new generation, and ignores results of another run", func() {
		job := startPodRun(ctx, podBenchmark(ns, "again", "db-link"))
		writeOutcome(ctx, ns, "again", job.Name, map[string]string{benchjob.ResultsKey: fixture()})
		Eventually(getBenchmark(ctx, ns, "again")).Should(havePhase(succeeded))
		Eventually(serverPods(ctx, ns, "again")).Should(BeEmpty())
		first := getBenchmark(ctx, ns, "again")()

		By("doing nothing more while the spec is unchanged")
		Consistently(serverPods(ctx, ns, "again"), 500*time.Millisecond).Should(BeEmpty())
		Expect(getBenchmark(ctx, ns, "again")().Status.CompletionTime).To(Equal(first.Status.CompletionTime))

		By("starting generation 2 on a spec change: new pods and Job, the old Job deleted, the summary reset")
		b := getBenchmark(ctx, ns, "again")()
		b.Spec.Repetitions = ptr(int32(1))
		Expect(k8s.Update(ctx, b)).To(Succeed())
		Expect(b.Generation).To(Equal(int64(2)))
		Eventually(serverPods(ctx, ns, "again")).Should(HaveLen(2))
		Eventually(getBenchmark(ctx, ns, "again")).Should(And(havePhase(pending),
			WithTransform(func(b *fastpathv1alpha1.FastPathBenchmark) string { return b.Status.BestGbps }, BeEmpty())))
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}) }).Should(Satisfy(apierrors.IsNotFound))
		for _, pod := range serverPods(ctx, ns, "again")() {
			Expect(pod.Labels).To(HaveKeyWithValue(benchjob.LabelGeneration, "2"))
			if pod.Labels[benchjob.LabelPath] == benchjob.PathFastPath {
				playKubeletAndMultus(ctx, &pod, ns+"/db-link", "10.244.0.31", "10.250.0.31")
			} else {
				playKubeletAndMultus(ctx, &pod, "", "10.244.0.32", "")
			}
		}
		job2 := runnerJob(ctx, ns, "again", 2)
		Expect(flagValues(job2.Spec.Template.Spec.Containers[0].Args, "--repetitions")).To(Equal([]string{"1"}))
		Eventually(getBenchmark(ctx, ns, "again")).Should(havePhase(running))

		By("ignoring an outcome written by the runner of generation 1")
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "again-results"}, cm)).To(Succeed())
		Expect(cm.Data).To(BeEmpty(), "the previous run's results were cleared")
		writeOutcome(ctx, ns, "again", job.Name, map[string]string{benchjob.ErrorKey: "late", benchjob.ErrorReasonKey: "RunnerFailed"})
		Consistently(getBenchmark(ctx, ns, "again"), 500*time.Millisecond).Should(havePhase(running))

		writeOutcome(ctx, ns, "again", job2.Name, map[string]string{benchjob.ResultsKey: fixture(), benchjob.ErrorKey: "", benchjob.ErrorReasonKey: ""})
		Eventually(getBenchmark(ctx, ns, "again")).Should(And(havePhase(succeeded), WithTransform(func(b *fastpathv1alpha1.FastPathBenchmark) int64 { return b.Status.ObservedGeneration }, Equal(int64(2)))))
	})
})

var _ = Describe("FastPathBenchmark in VM mode", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	vmBenchmark := func(name string) *fastpathv1alpha1.FastPathBenchmark {
		b := podBenchmark(ns, name, "db-link")
		b.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
		b.Spec.Client.VM, b.Spec.Server.VM = "db-1", "db-0"
		b.Spec.SSHKeySecretRef = &fastpathv1alpha1.LocalObjectReference{Name: "bench-ssh"}
		return b
	}
	createKey := func() {
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-ssh", Namespace: ns},
			Data:       map[string][]byte{"ssh-privatekey": []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n...\n")},
		})).To(Succeed())
	}

	It("creates a runner Job that reaches the client VM over SSH, with the addresses from the VMI status and the key mounted", func() {
		createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		createKey()
		Expect(k8s.Create(ctx, vmBenchmark("vmq"))).To(Succeed())

		job := runnerJob(ctx, ns, "vmq", 1)
		tmpl := job.Spec.Template
		args := tmpl.Spec.Containers[0].Args
		Expect(flagValues(args, "--path")).To(Equal([]string{"fastpath=10.250.0.10", "baseline=10.244.1.10"}), "the server VM's fast-path and pod-network addresses")
		Expect(flagValues(args, "--ssh-clients")).To(Equal([]string{"10.244.1.11"}), "the client VM's pod-network address")
		Expect(flagValues(args, "--ssh-user")).To(Equal([]string{"fedora"}))
		Expect(flagValues(args, "--ssh-key")).To(Equal([]string{"/etc/fastpath-bench/ssh/ssh-privatekey"}))
		Expect(tmpl.Spec.Volumes).To(HaveLen(1))
		Expect(tmpl.Spec.Volumes[0].Secret.SecretName).To(Equal("bench-ssh"))
		Expect(*tmpl.Spec.Volumes[0].Secret.DefaultMode).To(Equal(int32(0o400)))
		Expect(tmpl.Spec.Containers[0].VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: "ssh-key", MountPath: "/etc/fastpath-bench/ssh", ReadOnly: true}))
		Expect(tmpl.Annotations).NotTo(HaveKey("k8s.v1.cni.cncf.io/networks"))
		Expect(serverPods(ctx, ns, "vmq")()).To(BeEmpty(), "the VMs run netserver themselves")
		Eventually(getBenchmark(ctx, ns, "vmq")).Should(havePhase(running))

		writeOutcome(ctx, ns, "vmq", job.Name, map[string]string{benchjob.ResultsKey: fixture()})
		Eventually(getBenchmark(ctx, ns, "vmq")).Should(And(havePhase(succeeded), haveCondition(fastpathv1alpha1.SucceededCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonCriteriaMet)))
	})

	It("reads host CPU on the VMs' node: the agent at the launchers' host IP, their UIDs per pair, and the figures into status", func() {
		createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		server := createLauncher(ctx, ns, "db-0", "192.168.10.5")
		client := createLauncher(ctx, ns, "db-1", "192.168.10.5")
		createKey()
		Expect(k8s.Create(ctx, vmBenchmark("vmhost"))).To(Succeed())

		job := runnerJob(ctx, ns, "vmhost", 1)
		args := job.Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--host-cpu-agent")).To(Equal([]string{"192.168.10.5:9446"}), "the agent of the node the launchers run on")
		Expect(flagValues(args, "--launcher-pods")).To(Equal([]string{string(client) + "/" + string(server)}), "client, then server")
		Expect(job.Spec.Template.Spec.Containers[0].Env).To(BeEmpty(), "nothing from the downward API: the runner Job policy is unchanged")

		data, err := os.ReadFile("../../api/benchjob/results/testdata/hostcpu-results.json")
		Expect(err).NotTo(HaveOccurred())
		writeOutcome(ctx, ns, "vmhost", job.Name, map[string]string{benchjob.ResultsKey: string(data)})
		Eventually(func(g Gomega) {
			b := getBenchmark(ctx, ns, "vmhost")()
			g.Expect(b.Status.Points).To(HaveLen(1))
			p := b.Status.Points[0]
			g.Expect([]string{p.FastPathHostCPUSecondsPerGB, p.BaselineHostCPUSecondsPerGB, p.FastPathGbpsPerHostCore, p.BaselineGbpsPerHostCore}).
				To(Equal([]string{"28.633", "49.587", "0.279", "0.161"}))
		}).Should(Succeed())
	})

	It("measures no host CPU when a launcher pod is not found", func() {
		createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		createLauncher(ctx, ns, "db-0", "192.168.10.5")
		createKey()
		Expect(k8s.Create(ctx, vmBenchmark("vmnohost"))).To(Succeed())
		args := runnerJob(ctx, ns, "vmnohost", 1).Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--ssh-clients")).To(Equal([]string{"10.244.1.11"}))
		Expect(flagValues(args, "--host-cpu-agent")).To(BeEmpty())
		Expect(flagValues(args, "--launcher-pods")).To(BeEmpty())
	})

	It("runs VSOCK tests from the client VM through the relay port of the server VM's vsock service", func() {
		a := createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		createKey()
		b := vmBenchmark("vmvsock")
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream, fastpathv1alpha1.TestVSOCKStream, fastpathv1alpha1.TestVSOCKRR}
		Expect(k8s.Create(ctx, b)).To(Succeed())

		By("waiting while no vsock service targets the server VM")
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmvsock")(), fastpathv1alpha1.RunningCondition)
		}).Should(ContainSubstring("no vsock service of FastPathAttachment db-link with a relay port or a sibling CID targets the server VM db-0"))
		Expect(getBenchmark(ctx, ns, "vmvsock")().Status.Phase).To(Equal(pending))

		By("running once the attachment routes a service to it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{{Name: "db", VM: "db-0", Port: 5432, RelayPort: 20001, AllowedCIDs: []int64{4}}}
		Expect(k8s.Status().Update(ctx, a)).To(Succeed())
		job := runnerJob(ctx, ns, "vmvsock", 1)
		args := job.Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--tests")).To(Equal([]string{"TCP_STREAM,VSOCK_STREAM,VSOCK_RR"}))
		Expect(flagValues(args, "--path")).To(Equal([]string{"fastpath=10.250.0.10", "baseline=10.244.1.10"}))
		Expect(flagValues(args, "--vsock-path")).To(Equal([]string{"fastpath-vsock=2:20001"}), "the client dials its host, CID 2, on the relay port")
		Expect(flagValues(args, "--ssh-servers")).To(Equal([]string{"10.244.1.10"}), "the runner starts vsock-server in the server VM")
		Expect(flagValues(args, "--vsock-server-port")).To(Equal([]string{"5432"}))
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmvsock")(), fastpathv1alpha1.RunningCondition)
		}).Should(ContainSubstring("on fastpath, baseline, fastpath-vsock"))

		By("reporting the vsock path beside the others")
		doc := fixtureDoc()
		var runs []results.Run
		for _, r := range doc.Runs {
			if r.Path == benchjob.PathFastPath && r.Test == results.TCPStream && r.Pairs == 1 {
				v := r
				v.Path, v.Test, v.SocketBytes, v.MTU = benchjob.PathVSock, results.VSockStream, 0, 0
				v.ThroughputMbps = 3210
				runs = append(runs, v)
				break
			}
		}
		Expect(runs).To(HaveLen(1))
		doc.Runs = append(doc.Runs, runs...)
		var buf bytes.Buffer
		Expect(results.Encode(&buf, doc)).To(Succeed())
		writeOutcome(ctx, ns, "vmvsock", job.Name, map[string]string{benchjob.ResultsKey: buf.String()})
		Eventually(getBenchmark(ctx, ns, "vmvsock")).Should(havePhase(succeeded))
		st := getBenchmark(ctx, ns, "vmvsock")().Status
		Expect(st.Paths).To(ContainElement(fastpathv1alpha1.PathSummary{Path: benchjob.PathVSock, BestThroughputMbps: 3210}))
		Expect(st.Points).To(ContainElement(HaveField("Test", fastpathv1alpha1.TestVSOCKStream)))
	})

	It("runs VSOCK tests from the client VM straight to the server VM's CID in vsock mode Sibling", func() {
		a := createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		createKey()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		a.Status.VSOCKServices = []fastpathv1alpha1.VSOCKServiceStatus{{Name: "db", VM: "db-0", Port: 5432, Mode: fastpathv1alpha1.VSOCKModeSibling,
			TargetCID: ptr[int64](3), Address: "3:5432", AllowedCIDs: []int64{4}}}
		Expect(k8s.Status().Update(ctx, a)).To(Succeed())
		b := vmBenchmark("vmsib")
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestVSOCKStream}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		args := runnerJob(ctx, ns, "vmsib", 1).Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--vsock-path")).To(Equal([]string{"fastpath-vsock=3:5432"}), "no relay: the client dials db-0's CID in the vhost-user group")
		Expect(flagValues(args, "--vsock-server-port")).To(Equal([]string{"5432"}))
	})

	It("waits with EndpointNotFound for unselected or stopped VMs and with SSHKeyMissing for the key", func() {
		a := createReadyAttachment(ctx, ns, "db-link", "db-0")
		Expect(k8s.Create(ctx, vmBenchmark("vmw"))).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "vmw")).Should(haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonEndpointNotFound))
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmw")(), fastpathv1alpha1.RunningCondition)
		}).Should(And(
			ContainSubstring("VM db-1 (client of pair 1) is not selected by FastPathAttachment db-link"),
			ContainSubstring("VM db-0 (server of pair 1) has no VirtualMachineInstance")))

		setAttachmentReady(ctx, a, true, "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmw")(), fastpathv1alpha1.RunningCondition)
		}).Should(
			Equal("Waiting for endpoints: VMI db-0 (server of pair 1) reports no address on interface fp-db-link"))

		vmi := getVMI(ctx, ns, "db-0")
		vmi.Status.Interfaces = append(vmi.Status.Interfaces, fastIface("db-link", "10.250.0.10"))
		Expect(k8s.Status().Update(ctx, vmi)).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "vmw")).Should(And(havePhase(pending), haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonSSHKeyMissing)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "vmw")(), fastpathv1alpha1.RunningCondition)).To(ContainSubstring("Secret bench-ssh (spec.sshKeySecretRef) not found"))

		By("starting once the Secret appears (Secrets are polled, not watched)")
		createKey()
		runnerJob(ctx, ns, "vmw", 1)
		Eventually(getBenchmark(ctx, ns, "vmw")).Should(havePhase(running))
	})

	It("fails at once with VMsApart when a pair's VMs run on different nodes, and creates no Job", func() {
		createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.2.11", "10.250.0.11")
		vmi := getVMI(ctx, ns, "db-1")
		vmi.Status.NodeName = "node-b"
		Expect(k8s.Status().Update(ctx, vmi)).To(Succeed())
		createKey()
		Expect(k8s.Create(ctx, vmBenchmark("apart"))).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "apart")).Should(And(havePhase(fastpathv1alpha1.BenchmarkFailed),
			haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonVMsApart)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "apart")(), fastpathv1alpha1.FailedCondition)).To(And(
			ContainSubstring("client VM db-1 runs on node node-b and server VM db-0 on node node-a"),
			ContainSubstring("placement Required")))
		Consistently(func() ([]batchv1.Job, error) {
			l := &batchv1.JobList{}
			err := k8s.List(ctx, l, client.InNamespace(ns))
			return l.Items, err
		}, "2s").Should(BeEmpty())
	})

	It("asks for 2N VMs for N pairs: the API rejects fewer, additionalPairs supplies them", func() {
		b := vmBenchmark("vmpairs")
		b.Spec.Pairs = ptr(int32(2))
		err := k8s.Create(ctx, b)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.pairs in VM mode needs that many client/server VM pairs"))
		p := podBenchmark(ns, "podpairs", "db-link")
		p.Spec.AdditionalPairs = []fastpathv1alpha1.BenchmarkPair{{Client: "db-3", Server: "db-2"}}
		err = k8s.Create(ctx, p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.additionalPairs is for VM mode only"))

		createReadyAttachment(ctx, ns, "db-link", "db-0", "db-1", "db-2", "db-3")
		createVMI(ctx, ns, "db-0", "db-link", "10.244.1.10", "10.250.0.10")
		createVMI(ctx, ns, "db-1", "db-link", "10.244.1.11", "10.250.0.11")
		createVMI(ctx, ns, "db-2", "db-link", "10.244.1.12", "10.250.0.12")
		createVMI(ctx, ns, "db-3", "db-link", "10.244.1.13", "10.250.0.13")
		createKey()
		b = vmBenchmark("vmpairs")
		b.Spec.Pairs = ptr(int32(2))
		b.Spec.AdditionalPairs = []fastpathv1alpha1.BenchmarkPair{{Client: "db-3", Server: "db-2"}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		args := runnerJob(ctx, ns, "vmpairs", 1).Spec.Template.Spec.Containers[0].Args
		Expect(flagValues(args, "--pairs")).To(Equal([]string{"1,2"}))
		Expect(flagValues(args, "--path")).To(Equal([]string{"fastpath=10.250.0.10,10.250.0.12", "baseline=10.244.1.10,10.244.1.12"}))
		Expect(flagValues(args, "--ssh-clients")).To(Equal([]string{"10.244.1.11,10.244.1.13"}))
	})
})

var _ = Describe("FastPathBenchmark preconditions", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("waits for a missing attachment, then for it to be Ready", func() {
		Expect(k8s.Create(ctx, podBenchmark(ns, "early", "later"))).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "early")).Should(And(havePhase(pending),
			haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonWaitingForAttachment)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "early")(), fastpathv1alpha1.RunningCondition)).To(Equal("FastPathAttachment later not found"))
		Eventually(eventReasons(ctx, ns, "early")).Should(ContainElement("Normal/WaitingForAttachment"))
		Expect(serverPods(ctx, ns, "early")()).To(BeEmpty())

		a := createAttachment(ctx, ns, "later", false)
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "early")(), fastpathv1alpha1.RunningCondition)
		}).Should(Equal("FastPathAttachment later is not NetworkAttachmentReady: a NetworkAttachmentDefinition of that name exists and is not ours"))
		Expect(serverPods(ctx, ns, "early")()).To(BeEmpty())

		By("starting Pod mode once the NAD is ready, even while the attachment is not Ready (it selects no VM)")
		setAttachmentConditions(ctx, a, false, true)
		Eventually(serverPods(ctx, ns, "early")).Should(HaveLen(2))
		Eventually(getBenchmark(ctx, ns, "early")).Should(haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonEndpointNotFound))
	})

	It("waits in VM mode until the attachment is Ready", func() {
		a := createAttachment(ctx, ns, "db-link", false, "db-0", "db-1")
		setAttachmentConditions(ctx, a, false, true, "db-0", "db-1")
		b := podBenchmark(ns, "vmready", "db-link")
		b.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
		b.Spec.Client.VM, b.Spec.Server.VM = "db-1", "db-0"
		b.Spec.SSHKeySecretRef = &fastpathv1alpha1.LocalObjectReference{Name: "bench-ssh"}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmready")(), fastpathv1alpha1.RunningCondition)
		}).Should(Equal("FastPathAttachment db-link is not Ready: VMsWired is False: 1 VM restart required"))
		Expect(getBenchmark(ctx, ns, "vmready")()).To(haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonWaitingForAttachment))

		setAttachmentReady(ctx, a, true, "db-0", "db-1")
		Eventually(func() string {
			return conditionMessage(getBenchmark(ctx, ns, "vmready")(), fastpathv1alpha1.RunningCondition)
		}).Should(ContainSubstring("VM db-1 (client of pair 1) has no VirtualMachineInstance"))
	})

	It("fails a spec it cannot run as Unsupported", func() {
		createReadyAttachment(ctx, ns, "db-link")
		b := podBenchmark(ns, "vsock", "db-link")
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream, fastpathv1alpha1.TestVSOCKStream}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		b = podBenchmark(ns, "vsockpairs", "db-link")
		b.Spec.Mode = fastpathv1alpha1.BenchmarkModeVM
		b.Spec.Client.VM, b.Spec.Server.VM = "db-1", "db-0"
		b.Spec.SSHKeySecretRef = &fastpathv1alpha1.LocalObjectReference{Name: "bench-ssh"}
		b.Spec.Tests = []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestVSOCKRR}
		b.Spec.Pairs = ptr(int32(2))
		b.Spec.AdditionalPairs = []fastpathv1alpha1.BenchmarkPair{{Client: "db-3", Server: "db-2"}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		b = podBenchmark(ns, "split", "db-link")
		b.Spec.Client.Node, b.Spec.Server.Node = "node-a", "node-b"
		Expect(k8s.Create(ctx, b)).To(Succeed())

		Eventually(getBenchmark(ctx, ns, "vsock")).Should(And(havePhase(failed), haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonUnsupported)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "vsock")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("VSOCK_STREAM and VSOCK_RR need spec.mode VM"))
		Eventually(getBenchmark(ctx, ns, "vsockpairs")).Should(haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonUnsupported))
		Expect(conditionMessage(getBenchmark(ctx, ns, "vsockpairs")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("spec.pairs must be 1, got 2"))
		Eventually(getBenchmark(ctx, ns, "split")).Should(haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonUnsupported))
		Expect(conditionMessage(getBenchmark(ctx, ns, "split")(), fastpathv1alpha1.FailedCondition)).To(ContainSubstring("node-local"))
		Expect(serverPods(ctx, ns, "vsock")()).To(BeEmpty())
		Expect(serverPods(ctx, ns, "split")()).To(BeEmpty())
	})
})

var _ = Describe("FastPathBenchmark compared with an earlier run", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})
	// slower is the fixture with every fast-path repetition at f times its
	// throughput, as a runner would write it.
	slower := func(f float64) string {
		doc := fixtureDoc()
		for i := range doc.Runs {
			r := &doc.Runs[i]
			if r.Path != benchjob.PathFastPath {
				continue
			}
			for j := range r.Samples {
				r.Samples[j].ThroughputMbps *= f
			}
			r.Summarize()
		}
		var buf bytes.Buffer
		Expect(results.Encode(&buf, doc)).To(Succeed())
		return buf.String()
	}

	It("rejects maxRegressionPercent without compareTo, out of range, and compareTo naming both kinds", func() {
		for _, tc := range []struct {
			mutate func(*fastpathv1alpha1.FastPathBenchmark)
			want   string
		}{
			{func(b *fastpathv1alpha1.FastPathBenchmark) {
				b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(10))}
			}, "spec.successCriteria.maxRegressionPercent needs spec.compareTo: the run to compare with"},
			{func(b *fastpathv1alpha1.FastPathBenchmark) {
				b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{ConfigMap: "kept"}
				b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(0))}
			}, "spec.successCriteria.maxRegressionPercent must be between 1 and 100 (percent of the compared run's figure)"},
			{func(b *fastpathv1alpha1.FastPathBenchmark) {
				b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{ConfigMap: "kept"}
				b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(101))}
			}, "spec.successCriteria.maxRegressionPercent must be between 1 and 100"},
			{func(b *fastpathv1alpha1.FastPathBenchmark) {
				b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{ConfigMap: "kept", Benchmark: "ci-1"}
			}, "spec.compareTo needs exactly one of benchmark and configMap"},
			{func(b *fastpathv1alpha1.FastPathBenchmark) { b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{} }, "spec.compareTo needs exactly one of benchmark and configMap"},
		} {
			b := podBenchmark(ns, "invalid", "db-link")
			tc.mutate(b)
			err := k8s.Create(ctx, b)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(tc.want))
		}
	})

	It("waits for a kept results.json, fails a regression beyond the noise, and passes a run within the noise of the one before", func() {
		// Run 2 compares with the results.json a pipeline kept, which is
		// not there yet.
		b := podBenchmark(ns, "run-2", "link-2")
		b.Spec.CompareTo = &fastpathv1alpha1.CompareTo{ConfigMap: "kept"}
		b.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(10))}
		createReadyAttachment(ctx, ns, "link-2")
		Expect(k8s.Create(ctx, b)).To(Succeed())
		Eventually(getBenchmark(ctx, ns, "run-2")).Should(And(havePhase(pending),
			haveCondition(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, fastpathv1alpha1.ReasonWaitingForCompareTo)))
		Expect(conditionMessage(getBenchmark(ctx, ns, "run-2")(), fastpathv1alpha1.RunningCondition)).To(Equal("Waiting for spec.compareTo: ConfigMap " + ns + "/kept not found"))
		Consistently(serverPods(ctx, ns, "run-2"), "1s").Should(BeEmpty(), "nothing runs before the run to compare with is there")

		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}, Data: map[string]string{benchjob.ResultsKey: fixture()}})).To(Succeed())
		job := followPodRun(ctx, b)
		writeOutcome(ctx, ns, "run-2", job.Name, map[string]string{benchjob.ResultsKey: slower(0.7)})
		Eventually(getBenchmark(ctx, ns, "run-2")).Should(And(havePhase(failed),
			haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonThresholdNotMet)))
		b = getBenchmark(ctx, ns, "run-2")()
		Expect(conditionMessage(b, fastpathv1alpha1.FailedCondition)).To(ContainSubstring(
			"maxRegressionPercent 10 not met (30.0%: throughput 0.70x of the compared run's at fastpath TCP_STREAM sock=64KiB msg=16KiB sessions=1 pairs=1, beyond the noise)"))
		Expect(b.Status.ComparedTo).To(Equal("ConfigMap kept"))
		Expect(b.Status.Comparison).NotTo(BeEmpty())
		Expect(b.Status.Comparison[0]).To(Equal(fastpathv1alpha1.ComparedPoint{Path: "fastpath", Test: fastpathv1alpha1.TestTCPStream, SocketBytes: 65536, MessageBytes: 16384, Sessions: 1, Pairs: 1,
			Mbps: 5322, ComparedMbps: 7603, ThroughputRatio: "0.70", ThroughputNoise: fastpathv1alpha1.BeyondNoise}))

		// Run 3, as slow as run 2, compares with run 2: within the noise.
		b3 := podBenchmark(ns, "run-3", "link-3")
		b3.Spec.CompareTo = &fastpathv1alpha1.CompareTo{Benchmark: "run-2"}
		b3.Spec.SuccessCriteria = &fastpathv1alpha1.SuccessCriteria{MaxRegressionPercent: ptr(int32(10))}
		job = startPodRun(ctx, b3)
		writeOutcome(ctx, ns, "run-3", job.Name, map[string]string{benchjob.ResultsKey: slower(0.7)})
		Eventually(getBenchmark(ctx, ns, "run-3")).Should(havePhase(succeeded))
		b3 = getBenchmark(ctx, ns, "run-3")()
		Expect(conditionMessage(b3, fastpathv1alpha1.SucceededCondition)).To(ContainSubstring("maxRegressionPercent 10 met (no regression beyond the noise at 6 compared points)"))
		Expect(b3.Status.ComparedTo).To(Equal("FastPathBenchmark run-2 (run " + b.Status.JobName + ")"))
		for _, p := range b3.Status.Comparison {
			Expect(p.ThroughputNoise).To(Equal(fastpathv1alpha1.WithinNoise), "%+v", p)
			Expect(p.ThroughputRatio).To(Equal("1.00"))
		}
	})

	It("fails with CompareToInvalid when compareTo names itself or a ConfigMap without results.json", func() {
		createReadyAttachment(ctx, ns, "db-link")
		self := podBenchmark(ns, "self", "db-link")
		self.Spec.CompareTo = &fastpathv1alpha1.CompareTo{Benchmark: "self"}
		Expect(k8s.Create(ctx, self)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "empty"}, Data: map[string]string{"other": "x"}})).To(Succeed())
		empty := podBenchmark(ns, "empty", "db-link")
		empty.Spec.CompareTo = &fastpathv1alpha1.CompareTo{ConfigMap: "empty"}
		Expect(k8s.Create(ctx, empty)).To(Succeed())
		for name, want := range map[string]string{
			"self":  "spec.compareTo: spec.compareTo.benchmark names this benchmark itself: compare with an earlier run",
			"empty": "spec.compareTo: ConfigMap " + ns + "/empty has no key results.json",
		} {
			Eventually(getBenchmark(ctx, ns, name)).Should(And(havePhase(failed),
				haveCondition(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, fastpathv1alpha1.ReasonCompareToInvalid)))
			Expect(conditionMessage(getBenchmark(ctx, ns, name)(), fastpathv1alpha1.FailedCondition)).To(Equal(want))
			Expect(serverPods(ctx, ns, name)()).To(BeEmpty())
		}
	})
})
