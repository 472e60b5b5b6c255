package benchjob

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Params is what every rendered object depends on.
type Params struct {
	// Name and Namespace of the FastPathBenchmark.
	Name, Namespace string
	// Generation is the benchmark's metadata.generation this run is for.
	Generation int64
	// Spec is the benchmark spec after v1alpha1.DefaultBenchmarkSpec.
	Spec fastpathv1alpha1.FastPathBenchmarkSpec
	// Image is the runner image: it has fastpath-bench, netperf, netserver and
	// an OpenSSH client (the operator's --runner-image flag).
	Image string
	// PullPolicy of Image; empty leaves the Kubernetes default.
	PullPolicy corev1.PullPolicy
	// NetworkAttachment is the attachment's NetworkAttachmentDefinition as
	// "<namespace>/<name>" (Pod mode: the pods' Multus annotation).
	NetworkAttachment string
	// MTU of the fast path in bytes (the attachment's effective MTU); 0 when
	// unknown.
	MTU int32
}

// Endpoints are the addresses the controller observed, one per pair.
type Endpoints struct {
	// FastPath[i] is pair i+1's server on the fast network.
	FastPath []string
	// Baseline[i] is pair i+1's server on the pod network; empty with baseline None.
	Baseline []string
	// SSHClients[i] is pair i+1's client VM pod-network address (VM mode only).
	SSHClients []string
	// VSock is the vsock path (VM mode with VSOCK_* tests only): the relay
	// port and service port of the server VM's vsock service, and the server
	// VMs' pod-network addresses.
	VSock *RunnerVSock
	// HostCPU (VM mode) is the node agent's host CPU endpoint and the
	// launcher pods; nil when unknown (the runner then measures no host CPU).
	HostCPU *RunnerHostCPU
}

// Resource requests of the rendered containers. There are deliberately no
// limits: a CPU limit throttles netperf and the benchmark would measure the
// limit, not the datapath.
var (
	runnerRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("64Mi"),
	}
	netserverRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	}
)

// Time budget of a Job (activeDeadlineSeconds): every run's duration plus
// runOverhead (netperf control connection, SSH login), plus jobSlack for
// scheduling and image pulls.
const (
	runOverhead = 5 * time.Second
	jobSlack    = 10 * time.Minute
)

// PairCounts are the pair counts each point is measured at: {1} for pairs 1,
// {1, N} for pairs N > 1 (scale-out beside the single pair).
func PairCounts(spec fastpathv1alpha1.FastPathBenchmarkSpec) []int32 {
	n := int32(1)
	if spec.Pairs != nil {
		n = *spec.Pairs
	}
	if n <= 1 {
		return []int32{1}
	}
	return []int32{1, n}
}

// MaxPairs is spec.pairs (1 when unset): the number of servers per path.
func MaxPairs(spec fastpathv1alpha1.FastPathBenchmarkSpec) int {
	if spec.Pairs == nil || *spec.Pairs < 1 {
		return 1
	}
	return int(*spec.Pairs)
}

// IsVSockTest reports whether t is one of the vsock tests (VSOCK_STREAM,
// VSOCK_RR), which run on PathVSock only.
func IsVSockTest(t fastpathv1alpha1.BenchmarkTest) bool {
	return t == fastpathv1alpha1.TestVSOCKStream || t == fastpathv1alpha1.TestVSOCKRR
}

// HasIPTests and HasVSockTests report whether the spec runs TCP (netperf)
// tests, on PathFastPath and PathBaseline, and vsock tests, on PathVSock.
func HasIPTests(spec fastpathv1alpha1.FastPathBenchmarkSpec) bool {
	return slices.ContainsFunc(spec.Tests, func(t fastpathv1alpha1.BenchmarkTest) bool { return !IsVSockTest(t) })
}

// HasVSockTests: see HasIPTests.
func HasVSockTests(spec fastpathv1alpha1.FastPathBenchmarkSpec) bool {
	return slices.ContainsFunc(spec.Tests, IsVSockTest)
}

// Paths lists the paths a benchmark measures: with TCP tests PathFastPath,
// and PathBaseline unless spec.baseline is None; with vsock tests PathVSock.
func Paths(spec fastpathv1alpha1.FastPathBenchmarkSpec) []string {
	var out []string
	if HasIPTests(spec) {
		out = append(out, PathFastPath)
		if spec.Baseline != fastpathv1alpha1.BaselineNone {
			out = append(out, PathBaseline)
		}
	}
	if HasVSockTests(spec) {
		out = append(out, PathVSock)
	}
	return out
}

// PointCount is the number of matrix points of a defaulted spec, over all
// tests (each measured on the paths of its kind). Vsock tests have one
// socket size (vsockbench sets none).
func PointCount(spec fastpathv1alpha1.FastPathBenchmarkSpec) int {
	n := 0
	for _, t := range spec.Tests {
		n += pointsOf(spec, t)
	}
	return n
}

func pointsOf(spec fastpathv1alpha1.FastPathBenchmarkSpec, t fastpathv1alpha1.BenchmarkTest) int {
	per := len(spec.Sessions) * len(PairCounts(spec))
	if !IsVSockTest(t) {
		per *= len(spec.SocketSizes)
	}
	if results.IsRR(string(t)) || t == fastpathv1alpha1.TestUDPStream {
		return per // one RR size (RRMessageBytes), one UDP size (1472 bytes)
	}
	return per * len(spec.MessageSizes)
}

// RunCount is the number of measurements of a defaulted spec: every point
// on every path of its kind, times the repetitions.
func RunCount(spec fastpathv1alpha1.FastPathBenchmarkSpec) int {
	ipPaths := len(Paths(spec))
	if HasVSockTests(spec) {
		ipPaths--
	}
	n := 0
	for _, t := range spec.Tests {
		paths := ipPaths
		if IsVSockTest(t) {
			paths = 1
		}
		n += pointsOf(spec, t) * paths
	}
	return n * int(*spec.Repetitions)
}

// Deadline is the Job's activeDeadlineSeconds for a defaulted spec: every run
// (RunCount) at its whole-second duration plus a per-run overhead, plus
// slack for scheduling, image pulls and copying the runner into the guests.
func Deadline(spec fastpathv1alpha1.FastPathBenchmarkSpec) time.Duration {
	return time.Duration(RunCount(spec))*(WholeSeconds(spec.Duration.Duration)+runOverhead) + jobSlack
}

// PodNode is the node the Pod-mode pods are pinned to: spec.server.node or
// spec.client.node ("" when neither is set: the pods are co-located by pod
// affinity wherever the scheduler puts the first). Both set and different is
// an error: the fast network is node-local, so the pods could not reach each
// other over it.
func PodNode(spec fastpathv1alpha1.FastPathBenchmarkSpec) (string, error) {
	c, s := spec.Client.Node, spec.Server.Node
	if c != "" && s != "" && c != s {
		return "", fmt.Errorf("spec.client.node %s and spec.server.node %s differ: the fast network is node-local, so client and server must share a node", c, s)
	}
	if s != "" {
		return s, nil
	}
	return c, nil
}

// RunnerArgsFor builds the runner's command line contract from a defaulted
// spec and the observed endpoints.
func RunnerArgsFor(p Params, ep Endpoints) RunnerArgs {
	a := RunnerArgs{
		SocketSizes:      p.Spec.SocketSizes,
		MessageSizes:     p.Spec.MessageSizes,
		RRSizes:          []int32{RRMessageBytes},
		Sessions:         p.Spec.Sessions,
		Pairs:            PairCounts(p.Spec),
		Duration:         p.Spec.Duration.Duration,
		Repetitions:      *p.Spec.Repetitions,
		ResultsConfigMap: p.Namespace + "/" + ResultsConfigMapName(p.Name),
		RunID:            JobName(p.Name, p.Generation),
	}
	for _, t := range p.Spec.Tests {
		a.Tests = append(a.Tests, string(t))
	}
	if HasIPTests(p.Spec) {
		a.Paths = append(a.Paths, RunnerPath{Name: PathFastPath, Servers: ep.FastPath, MTU: p.MTU})
		if p.Spec.Baseline != fastpathv1alpha1.BaselineNone {
			a.Paths = append(a.Paths, RunnerPath{Name: PathBaseline, Servers: ep.Baseline})
		}
	}
	if p.Spec.Mode == fastpathv1alpha1.BenchmarkModeVM {
		a.SSH = &RunnerSSH{Clients: ep.SSHClients, User: p.Spec.SSHUser, KeyFile: SSHKeyDir + "/" + SSHKeyFile}
		if HasVSockTests(p.Spec) {
			a.VSock = ep.VSock
		}
		a.HostCPU = ep.HostCPU
	}
	return a
}

// runLabels are the labels of a Job or pod of one run (one generation).
func runLabels(p Params, component string) map[string]string {
	l := Labels(p.Name, component)
	l[LabelGeneration] = strconv.FormatInt(p.Generation, 10)
	return l
}

// placement pins a Pod-mode pod: node affinity to node when set, else required
// pod affinity (topology kubernetes.io/hostname) to every pod of this run, so
// the first one scheduled decides the node for all (the scheduler lets a pod
// that matches its own affinity term start a group).
func placement(p Params, node string) *corev1.Affinity {
	if node != "" {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}}},
			},
		}}
	}
	return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				LabelBenchmark:  LabelValue(p.Name),
				LabelGeneration: strconv.FormatInt(p.Generation, 10),
			}},
			TopologyKey: corev1.LabelHostname,
		}},
	}}
}

// RunnerGID is the group of the runner image's user (the Dockerfile's
// USER 65532:65532, distroless's nonroot).
const RunnerGID int64 = 65532

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// ServerPods renders the Pod-mode netserver pods of one run: for every pair
// 1..MaxPairs one on the fast network (Multus annotation
// k8s.v1.cni.cncf.io/networks: NetworkAttachment) and, unless baseline is None,
// one on the pod network only. Each runs `netserver -D -p 12865` and is ready
// when the control port accepts connections. The caller sets the owner.
func ServerPods(p Params) ([]*corev1.Pod, error) {
	node, err := PodNode(p.Spec)
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	for _, path := range Paths(p.Spec) {
		for pair := 1; pair <= MaxPairs(p.Spec); pair++ {
			l := runLabels(p, ComponentNetserver)
			l[LabelPath], l[LabelPair] = path, strconv.Itoa(pair)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: ServerPodName(p.Name, path, pair), Namespace: p.Namespace, Labels: l},
				Spec: corev1.PodSpec{
					Affinity:                      placement(p, node),
					RestartPolicy:                 corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptr(int64(1)),
					AutomountServiceAccountToken:  ptr(false),
					SecurityContext:               podSecurity(),
					Containers: []corev1.Container{{
						Name:            "netserver",
						Image:           p.Image,
						ImagePullPolicy: p.PullPolicy,
						Command:         []string{"netserver", "-D", "-p", strconv.Itoa(NetserverPort)},
						Ports:           []corev1.ContainerPort{{Name: "netperf", ContainerPort: NetserverPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(NetserverPort)}},
							PeriodSeconds: 2,
						},
						Resources:       corev1.ResourceRequirements{Requests: netserverRequests},
						SecurityContext: restrictedContainer(),
					}},
				},
			}
			if path == PathFastPath {
				pod.Annotations = map[string]string{nadv1.NetworkAttachmentAnnot: p.NetworkAttachment}
			}
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// RunnerJob renders the Job that runs `fastpath-bench` with RunnerArgsFor(p, ep).
// Pod mode: its pod is on the fast network and on the netserver pods' node.
// VM mode: its pod mounts the Secret spec.sshKeySecretRef at SSHKeyDir and
// runs anywhere; the key is root's, mode 0440, group RunnerGID (the pod's
// fsGroup), so the runner, which runs as RunnerGID's user, can read it and
// ssh accepts it (ssh refuses a key readable by others only when it owns
// it). No retries (backoffLimit 0: a failed benchmark is
// reported, not repeated) and activeDeadlineSeconds from Deadline. The caller
// sets the owner.
func RunnerJob(p Params, ep Endpoints) (*batchv1.Job, error) {
	args, err := RunnerArgsFor(p, ep).Args()
	if err != nil {
		return nil, err
	}
	labels := runLabels(p, ComponentRunner)
	pod := corev1.PodSpec{
		ServiceAccountName: RunnerName(p.Name),
		RestartPolicy:      corev1.RestartPolicyNever,
		SecurityContext:    podSecurity(),
		Containers: []corev1.Container{{
			Name:            RunnerContainer,
			Image:           p.Image,
			ImagePullPolicy: p.PullPolicy,
			Command:         []string{"fastpath-bench"},
			Args:            args,
			Resources:       corev1.ResourceRequirements{Requests: runnerRequests},
			SecurityContext: restrictedContainer(),
			// A runner that dies before it can write its error to the
			// results ConfigMap (killed, out of memory, a panic) still leaves
			// the tail of its log in the pod status, which the operator
			// quotes in the benchmark's condition.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}
	switch p.Spec.Mode {
	case fastpathv1alpha1.BenchmarkModePod:
		node, err := PodNode(p.Spec)
		if err != nil {
			return nil, err
		}
		tmpl.Annotations = map[string]string{nadv1.NetworkAttachmentAnnot: p.NetworkAttachment}
		tmpl.Spec.Affinity = placement(p, node)
	case fastpathv1alpha1.BenchmarkModeVM:
		if p.Spec.SSHKeySecretRef == nil {
			return nil, fmt.Errorf("failed to render runner job %s: VM mode needs spec.sshKeySecretRef", JobName(p.Name, p.Generation))
		}
		tmpl.Spec.Volumes = []corev1.Volume{{Name: "ssh-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  p.Spec.SSHKeySecretRef.Name,
			Items:       []corev1.KeyToPath{{Key: SSHKeyFile, Path: SSHKeyFile}},
			DefaultMode: ptr(int32(0o400)),
		}}}}
		// kubelet gives a volume's files the pod's fsGroup and adds group
		// read: without it the root-owned 0400 key is unreadable to the
		// runner (seen on a real kubelet: `Load key ...: Permission denied`).
		tmpl.Spec.SecurityContext.FSGroup = ptr(RunnerGID)
		tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "ssh-key", MountPath: SSHKeyDir, ReadOnly: true}}
	default:
		return nil, fmt.Errorf("failed to render runner job %s: unknown mode %q", JobName(p.Name, p.Generation), p.Spec.Mode)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: JobName(p.Name, p.Generation), Namespace: p.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr(int32(0)),
			ActiveDeadlineSeconds: ptr(int64(Deadline(p.Spec) / time.Second)),
			Template:              tmpl,
		},
	}, nil
}

// ResultsConfigMap renders the empty ConfigMap the runner writes its outcome to.
func ResultsConfigMap(name, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: ResultsConfigMapName(name), Namespace: namespace, Labels: Labels(name, ComponentResults),
	}}
}

// RunnerRBAC renders the runner's ServiceAccount, a Role allowing get, update
// and patch on the results ConfigMap only (resourceNames), and the RoleBinding
// between them, all named RunnerName(name).
func RunnerRBAC(name, namespace string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	n := RunnerName(name)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: namespace, Labels: Labels(name, ComponentRunner)}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: meta()}
	role := &rbacv1.Role{ObjectMeta: meta(), Rules: []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"configmaps"},
		ResourceNames: []string{ResultsConfigMapName(name)},
		Verbs:         []string{"get", "update", "patch"},
	}}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: meta(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: n},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: n, Namespace: namespace}},
	}
	return sa, role, rb
}

func ptr[T any](v T) *T { return &v }
