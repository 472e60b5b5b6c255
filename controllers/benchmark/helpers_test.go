package benchmark_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/jobrunner"
)

func ptr[T any](v T) *T { return &v }

// fixture is a results document as the runner prints it: a Pod-mode run, four
// TCP_STREAM and two TCP_RR points, fast path (MTU 9000) beside the pod
// network, three repetitions each. Best fast path 13520.4 Mbps at 256 KiB /
// 64 KiB, 4590.2 Mbps on the baseline there.
func fixture() string {
	data, err := os.ReadFile("summary/testdata/results-pod.json")
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

func newNamespace(ctx context.Context) string {
	ns, err := env.NewNamespace(ctx, "fpb")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// createReadyAttachment creates a FastPathAttachment with a network and writes
// the status the attachment controller would: Ready, its NAD, MTU 9000 and the
// selected VMs.
func createReadyAttachment(ctx context.Context, ns, name string, vms ...string) *fastpathv1alpha1.FastPathAttachment {
	return createAttachment(ctx, ns, name, true, vms...)
}

// createAttachment creates a FastPathAttachment whose status is Ready or not.
func createAttachment(ctx context.Context, ns, name string, ready bool, vms ...string) *fastpathv1alpha1.FastPathAttachment {
	a := &fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Network:    &fastpathv1alpha1.NetworkSpec{IPAM: fastpathv1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
		},
	}
	Expect(k8s.Create(ctx, a)).To(Succeed())
	setAttachmentReady(ctx, a, ready, vms...)
	return a
}

// setAttachmentReady writes Ready and NetworkAttachmentReady both True or both
// False.
func setAttachmentReady(ctx context.Context, a *fastpathv1alpha1.FastPathAttachment, ready bool, vms ...string) {
	setAttachmentConditions(ctx, a, ready, ready, vms...)
}

// setAttachmentConditions writes the attachment's status: Ready, the NAD's
// NetworkAttachmentReady, its NAD, MTU 9000 and the selected VMs.
func setAttachmentConditions(ctx context.Context, a *fastpathv1alpha1.FastPathAttachment, ready, nadReady bool, vms ...string) {
	st := metav1.ConditionTrue
	reason, msg := fastpathv1alpha1.ReasonReady, "Everything is in place"
	if !ready {
		st, reason, msg = metav1.ConditionFalse, fastpathv1alpha1.ReasonNotReady, "VMsWired is False: 1 VM restart required"
	}
	meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: fastpathv1alpha1.ReadyCondition, Status: st, Reason: reason, Message: msg})
	st, reason, msg = metav1.ConditionTrue, fastpathv1alpha1.ReasonNADCreated, "NetworkAttachmentDefinition is up to date"
	if !nadReady {
		st, reason, msg = metav1.ConditionFalse, fastpathv1alpha1.ReasonNADConflict, "a NetworkAttachmentDefinition of that name exists and is not ours"
	}
	meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: fastpathv1alpha1.NetworkAttachmentReadyCondition, Status: st, Reason: reason, Message: msg})
	a.Status.NetworkAttachmentDefinition = a.Namespace + "/" + a.Name
	a.Status.MTU = 9000
	a.Status.VMs = nil
	for _, vm := range vms {
		a.Status.VMs = append(a.Status.VMs, fastpathv1alpha1.VMStatus{Name: vm, Wired: true})
	}
	Expect(k8s.Status().Update(ctx, a)).To(Succeed())
}

func podBenchmark(ns, name, attachment string) *fastpathv1alpha1.FastPathBenchmark {
	return &fastpathv1alpha1.FastPathBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fastpathv1alpha1.FastPathBenchmarkSpec{
			AttachmentRef: fastpathv1alpha1.LocalObjectReference{Name: attachment},
			Mode:          fastpathv1alpha1.BenchmarkModePod,
			Tests:         []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream, fastpathv1alpha1.TestTCPRR},
			SocketSizes:   []int32{65536, 262144},
			MessageSizes:  []int32{16384, 65536},
			Sessions:      []int32{1},
			Duration:      &metav1.Duration{Duration: 5e9},
			Repetitions:   ptr(int32(3)),
		},
	}
}

func getBenchmark(ctx context.Context, ns, name string) func() *fastpathv1alpha1.FastPathBenchmark {
	return func() *fastpathv1alpha1.FastPathBenchmark {
		b := &fastpathv1alpha1.FastPathBenchmark{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, b)).To(Succeed())
		return b
	}
}

// haveCondition matches a benchmark whose condition t has status s and reason.
func haveCondition(t string, s metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(b *fastpathv1alpha1.FastPathBenchmark) *metav1.Condition {
		return meta.FindStatusCondition(b.Status.Conditions, t)
	}, And(Not(BeNil()), WithTransform(func(c *metav1.Condition) string {
		return fmt.Sprintf("%s/%s", c.Status, c.Reason)
	}, Equal(fmt.Sprintf("%s/%s", s, reason)))))
}

func havePhase(p fastpathv1alpha1.BenchmarkPhase) OmegaMatcher {
	return WithTransform(func(b *fastpathv1alpha1.FastPathBenchmark) fastpathv1alpha1.BenchmarkPhase { return b.Status.Phase }, Equal(p))
}

func conditionMessage(b *fastpathv1alpha1.FastPathBenchmark, t string) string {
	c := meta.FindStatusCondition(b.Status.Conditions, t)
	if c == nil {
		return ""
	}
	return c.Message
}

func serverPods(ctx context.Context, ns, bench string) func() []corev1.Pod {
	return func() []corev1.Pod {
		var pods corev1.PodList
		Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{benchjob.LabelBenchmark: bench})).To(Succeed())
		return pods.Items
	}
}

// playKubeletAndMultus writes what kubelet and Multus would on a netserver
// pod: Running and Ready with a pod IP, and (fast-path pods) the
// network-status annotation with the address on the attachment's network.
func playKubeletAndMultus(ctx context.Context, pod *corev1.Pod, nad, podIP, fastIP string) {
	if fastIP != "" {
		status := []map[string]any{
			{"name": "kindnet", "interface": "eth0", "ips": []string{podIP}, "default": true, "dns": map[string]any{}},
			{"name": nad, "interface": "net1", "ips": []string{fastIP}, "mtu": 9000, "dns": map[string]any{}},
		}
		raw, err := json.Marshal(status)
		Expect(err).NotTo(HaveOccurred())
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Annotations["k8s.v1.cni.cncf.io/network-status"] = string(raw)
		Expect(k8s.Patch(ctx, pod, patch)).To(Succeed())
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = podIP
	pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
}

// runnerJob waits for the benchmark's runner Job of the given generation.
func runnerJob(ctx context.Context, ns, bench string, generation int64) *batchv1.Job {
	job := &batchv1.Job{}
	Eventually(func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: benchjob.JobName(bench, generation)}, job)
	}).Should(Succeed())
	return job
}

// writeOutcome plays the runner: it writes data and the run ID into the
// results ConfigMap in one patch, as the contract says.
func writeOutcome(ctx context.Context, ns, bench, runID string, data map[string]string) {
	cm := &corev1.ConfigMap{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: benchjob.ResultsConfigMapName(bench)}, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[benchjob.RunIDKey] = runID
	for k, v := range data {
		cm.Data[k] = v
	}
	Expect(k8s.Patch(ctx, cm, patch)).To(Succeed())
}

// flagValues returns every value given to flag in args ("--flag value").
func flagValues(args []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

// eventReasons lists the reasons of the Events recorded for a benchmark.
func eventReasons(ctx context.Context, ns, name string) func() []string {
	return func() []string {
		var evs corev1.EventList
		Expect(k8s.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "FastPathBenchmark" && e.InvolvedObject.Name == name {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}

// gauge reads a series of a gauge from controller-runtime's registry; ok is
// false when the series does not exist.
func gauge(name string, labels map[string]string) (float64, bool) {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// createVMI creates a VMI for a VM and writes the status virt-handler would:
// interfaces "default" (pod network) and, when fastIP is set, the
// attachment's "fp-<attachment>".
func createVMI(ctx context.Context, ns, name, attachment, podIP, fastIP string) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	Expect(k8s.Create(ctx, vmi)).To(Succeed())
	vmi.Status.NodeName = "node-a"
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: podIP, IPs: []string{podIP}}}
	if fastIP != "" {
		vmi.Status.Interfaces = append(vmi.Status.Interfaces, kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: fastpathv1alpha1.NetworkName(attachment), IP: fastIP, IPs: []string{fastIP}})
	}
	Expect(k8s.Status().Update(ctx, vmi)).To(Succeed())
}

// createLauncher creates the running virt-launcher pod of VMI name on its
// node with hostIP, labelled as KubeVirt labels it, and lists it in the
// VMI's status.activePods as virt-controller would. It returns its UID.
func createLauncher(ctx context.Context, ns, name, hostIP string) types.UID {
	vmi := getVMI(ctx, ns, name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + name + "-x7k2p", Namespace: ns, Labels: map[string]string{kubevirtv1.AppLabel: "virt-launcher", kubevirtv1.CreatedByLabel: string(vmi.UID)}},
		Spec:       corev1.PodSpec{NodeName: vmi.Status.NodeName, Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}},
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase, pod.Status.HostIP = corev1.PodRunning, hostIP
	Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	vmi.Status.ActivePods = map[types.UID]string{pod.UID: vmi.Status.NodeName}
	Expect(k8s.Status().Update(ctx, vmi)).To(Succeed())
	return pod.UID
}

func getVMI(ctx context.Context, ns, name string) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vmi)).To(Succeed())
	return vmi
}

func fastIface(attachment, ip string) kubevirtv1.VirtualMachineInstanceNetworkInterface {
	return kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: fastpathv1alpha1.NetworkName(attachment), IP: ip, IPs: []string{ip}}
}

// runnerClient is a core/v1 client that acts as the runner Job's
// ServiceAccount (impersonated; envtest's apiserver authorizes with RBAC), so
// only the Role the controller created lets it write.
func runnerClient(ns, benchmark string) *corev1client.CoreV1Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(ns, benchjob.RunnerName(benchmark))}
	c, err := corev1client.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// runnerSink is the runner's own ConfigMap writer (bench), as
// `fastpath-bench run --results-configmap <ns>/<benchmark>-results --run-id <runID>`
// builds it, with the runner's permissions.
func runnerSink(ns, benchmark, runID string) jobrunner.ConfigMapSink {
	return jobrunner.ConfigMapSink{
		Client: runnerClient(ns, benchmark), Namespace: ns, Name: benchjob.ResultsConfigMapName(benchmark), RunID: runID,
		Backoff: wait.Backoff{Steps: 1},
	}
}

// fixtureDoc is fixture() decoded, as the runner holds it before writing.
func fixtureDoc() results.Document {
	doc, err := results.Decode(strings.NewReader(fixture()))
	Expect(err).NotTo(HaveOccurred())
	return doc
}
