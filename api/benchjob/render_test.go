package benchjob_test

import (
	"strings"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestNamesFitKubernetesLimits(t *testing.T) {
	long := strings.Repeat("a", 60) + "-" + strings.Repeat("b", 192) // 253 characters
	long2 := strings.Repeat("a", 60) + "-" + strings.Repeat("c", 192)
	for _, tc := range []struct {
		name, bench string
		same        bool
	}{
		{"short names are kept", "quick", true},
		{"long names are cut and hashed", long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			job := benchjob.JobName(tc.bench, 12)
			g.Expect(validation.IsDNS1123Subdomain(job)).To(gomega.BeEmpty())
			g.Expect(validation.IsValidLabelValue(job)).To(gomega.BeEmpty())
			g.Expect(job).To(gomega.HaveSuffix("-run-12"))
			for _, n := range []string{benchjob.ResultsConfigMapName(tc.bench), benchjob.RunnerName(tc.bench), benchjob.ServerPodName(tc.bench, benchjob.PathBaseline, 64)} {
				g.Expect(validation.IsDNS1123Subdomain(n)).To(gomega.BeEmpty(), n)
			}
			g.Expect(validation.IsValidLabelValue(benchjob.LabelValue(tc.bench))).To(gomega.BeEmpty())
			if tc.same {
				g.Expect(job).To(gomega.Equal(tc.bench + "-run-12"))
				g.Expect(benchjob.LabelValue(tc.bench)).To(gomega.Equal(tc.bench))
			} else {
				g.Expect(benchjob.LabelValue(tc.bench)).NotTo(gomega.Equal(benchjob.LabelValue(long2)), "different long names stay different")
				g.Expect(benchjob.JobName(tc.bench, 1)).NotTo(gomega.Equal(benchjob.JobName(long2, 1)))
			}
		})
	}
	// A cut that ends in '-' or '.' is trimmed, so the name stays a valid subdomain.
	dotted := strings.Repeat("a", 40) + "." + strings.Repeat("b", 30)
	gomega.NewWithT(t).Expect(validation.IsDNS1123Subdomain(benchjob.JobName(dotted, 1))).To(gomega.BeEmpty())
}

func TestServerPods(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*benchjob.Params)
		wantNames []string
		node      string
	}{
		{
			name:      "one pair with baseline, co-located by pod affinity",
			mutate:    func(*benchjob.Params) {},
			wantNames: []string{"quick-netserver-fastpath-1", "quick-netserver-baseline-1"},
		},
		{
			name: "three pairs without baseline, pinned to the server node",
			mutate: func(p *benchjob.Params) {
				p.Spec.Pairs, p.Spec.Baseline, p.Spec.Server.Node = ptr(int32(3)), fastpathv1alpha1.BaselineNone, "node-a"
			},
			wantNames: []string{"quick-netserver-fastpath-1", "quick-netserver-fastpath-2", "quick-netserver-fastpath-3"},
			node:      "node-a",
		},
		{
			name:      "the client node pins both sides",
			mutate:    func(p *benchjob.Params) { p.Spec.Client.Node = "node-b" },
			wantNames: []string{"quick-netserver-fastpath-1", "quick-netserver-baseline-1"},
			node:      "node-b",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			p := podParams()
			tc.mutate(&p)
			pods, err := benchjob.ServerPods(p)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			var names []string
			for _, pod := range pods {
				names = append(names, pod.Name)
				g.Expect(pod.Namespace).To(gomega.Equal("apps"))
				g.Expect(pod.Labels).To(gomega.HaveKeyWithValue(benchjob.LabelBenchmark, "quick"))
				g.Expect(pod.Labels).To(gomega.HaveKeyWithValue(benchjob.LabelGeneration, "2"))
				c := pod.Spec.Containers[0]
				g.Expect(c.Image).To(gomega.Equal("fastpath/bench:dev"))
				g.Expect(c.Command).To(gomega.Equal([]string{"netserver", "-D", "-p", "12865"}))
				g.Expect(c.ReadinessProbe.TCPSocket.Port.IntValue()).To(gomega.Equal(12865))
				g.Expect(c.Resources.Limits).To(gomega.BeEmpty(), "a CPU limit would throttle netperf")
				if pod.Labels[benchjob.LabelPath] == benchjob.PathFastPath {
					g.Expect(pod.Annotations).To(gomega.HaveKeyWithValue("k8s.v1.cni.cncf.io/networks", "apps/db-link"))
				} else {
					g.Expect(pod.Annotations).NotTo(gomega.HaveKey("k8s.v1.cni.cncf.io/networks"))
				}
				if tc.node != "" {
					terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
					g.Expect(terms[0].MatchFields[0].Values).To(gomega.Equal([]string{tc.node}))
					g.Expect(pod.Spec.Affinity.PodAffinity).To(gomega.BeNil())
				} else {
					term := pod.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
					g.Expect(term.TopologyKey).To(gomega.Equal(corev1.LabelHostname))
					// The pod matches its own term, so the first one scheduled starts the group.
					for k, v := range term.LabelSelector.MatchLabels {
						g.Expect(pod.Labels).To(gomega.HaveKeyWithValue(k, v))
					}
				}
			}
			g.Expect(names).To(gomega.Equal(tc.wantNames))
		})
	}
}

func TestServerPodsRejectsDifferentNodes(t *testing.T) {
	g := gomega.NewWithT(t)
	p := podParams()
	p.Spec.Client.Node, p.Spec.Server.Node = "a", "b"
	_, err := benchjob.ServerPods(p)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("node-local")))
	_, err = benchjob.RunnerJob(p, benchjob.Endpoints{FastPath: []string{"x"}, Baseline: []string{"y"}})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("node-local")))
}

func TestRunnerJobPodMode(t *testing.T) {
	g := gomega.NewWithT(t)
	job, err := benchjob.RunnerJob(podParams(), benchjob.Endpoints{FastPath: []string{"10.250.0.3"}, Baseline: []string{"10.244.0.7"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(job.Name).To(gomega.Equal("quick-run-2"))
	g.Expect(*job.Spec.BackoffLimit).To(gomega.BeZero())
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(gomega.Equal(int64(20*3*2*65 + 600)))
	tmpl := job.Spec.Template
	g.Expect(tmpl.Annotations).To(gomega.HaveKeyWithValue("k8s.v1.cni.cncf.io/networks", "apps/db-link"))
	g.Expect(tmpl.Labels).To(gomega.HaveKeyWithValue(benchjob.LabelGeneration, "2"))
	g.Expect(tmpl.Spec.ServiceAccountName).To(gomega.Equal("quick-runner"))
	g.Expect(tmpl.Spec.RestartPolicy).To(gomega.Equal(corev1.RestartPolicyNever))
	g.Expect(tmpl.Spec.Affinity.PodAffinity).NotTo(gomega.BeNil(), "the runner joins the netserver pods' node")
	g.Expect(tmpl.Spec.Volumes).To(gomega.BeEmpty())
	c := tmpl.Spec.Containers[0]
	g.Expect(c.Command).To(gomega.Equal([]string{"fastpath-bench"}))
	g.Expect(c.Args).To(gomega.ContainElements("fastpath=10.250.0.3", "baseline=10.244.0.7"))
	g.Expect(c.Args).NotTo(gomega.ContainElement("--ssh-clients"))
}

func TestRunnerJobVMMode(t *testing.T) {
	g := gomega.NewWithT(t)
	job, err := benchjob.RunnerJob(vmParams(), benchjob.Endpoints{
		FastPath: []string{"10.250.0.3", "10.250.0.4"}, Baseline: []string{"10.244.1.7", "10.244.1.8"}, SSHClients: []string{"10.244.1.5", "10.244.1.9"},
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	tmpl := job.Spec.Template
	g.Expect(tmpl.Annotations).NotTo(gomega.HaveKey("k8s.v1.cni.cncf.io/networks"), "VM mode reaches the VMs over the pod network")
	g.Expect(tmpl.Spec.Affinity).To(gomega.BeNil())
	g.Expect(tmpl.Spec.Volumes).To(gomega.HaveLen(1))
	sec := tmpl.Spec.Volumes[0].Secret
	g.Expect(sec.SecretName).To(gomega.Equal("bench-ssh"))
	g.Expect(*sec.DefaultMode).To(gomega.Equal(int32(0o400)))
	g.Expect(tmpl.Spec.SecurityContext.FSGroup).To(gomega.HaveValue(gomega.Equal(benchjob.RunnerGID)), "the key's group, so the non-root runner can read it")
	g.Expect(sec.Items).To(gomega.Equal([]corev1.KeyToPath{{Key: "ssh-privatekey", Path: "ssh-privatekey"}}))
	m := tmpl.Spec.Containers[0].VolumeMounts
	g.Expect(m).To(gomega.HaveLen(1))
	g.Expect(m[0].MountPath).To(gomega.Equal(benchjob.SSHKeyDir))
	g.Expect(m[0].ReadOnly).To(gomega.BeTrue())
	g.Expect(tmpl.Spec.Containers[0].Args).To(gomega.ContainElements("--ssh-key", benchjob.SSHKeyDir+"/ssh-privatekey", "10.244.1.5,10.244.1.9"))

	p := vmParams()
	p.Spec.SSHKeySecretRef = nil
	_, err = benchjob.RunnerJob(p, benchjob.Endpoints{FastPath: []string{"a", "b"}, Baseline: []string{"c", "d"}, SSHClients: []string{"e", "f"}})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("sshKeySecretRef")))
}

func TestRunnerRBACAllowsOnlyTheResultsConfigMap(t *testing.T) {
	g := gomega.NewWithT(t)
	sa, role, rb := benchjob.RunnerRBAC("quick", "apps")
	g.Expect(sa.Name).To(gomega.Equal("quick-runner"))
	g.Expect(role.Rules).To(gomega.HaveLen(1))
	g.Expect(role.Rules[0].Resources).To(gomega.Equal([]string{"configmaps"}))
	g.Expect(role.Rules[0].ResourceNames).To(gomega.Equal([]string{"quick-results"}))
	g.Expect(role.Rules[0].Verbs).To(gomega.ConsistOf("get", "update", "patch"))
	g.Expect(rb.RoleRef.Name).To(gomega.Equal(role.Name))
	g.Expect(rb.Subjects[0].Name).To(gomega.Equal(sa.Name))
	g.Expect(rb.Subjects[0].Namespace).To(gomega.Equal("apps"))
	cm := benchjob.ResultsConfigMap("quick", "apps")
	g.Expect(cm.Name).To(gomega.Equal("quick-results"))
	g.Expect(cm.Data).To(gomega.BeEmpty())
}
