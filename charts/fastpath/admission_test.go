package fastpath_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// The chart's ValidatingAdmissionPolicies, rendered by helm and enforced by a
// real kube-apiserver (envtest), checked by impersonating the agent, the
// operator and a tenant.
func TestChartAdmissionPoliciesEnforce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })

	for _, doc := range strings.Split(helm(t, "template", "fp", ".", "--namespace", "fastpath-system", "--show-only", "templates/admission.yaml"), "\n---") {
		obj := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		if len(obj.Object) > 0 {
			g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), obj.GetName())
		}
	}
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	bindClusterRole(g, env, filepath.Join(root, "config", "rbac", "agent", "role.yaml"), "fastpath-agent")
	bindClusterRole(g, env, filepath.Join(root, "config", "rbac", "role.yaml"), "fastpath-operator")

	as := func(user string, extra map[string][]string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: extra}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	agentA := as("system:serviceaccount:fastpath-system:fastpath-agent", map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}})

	t.Run("an agent writes only its own node's FastPathNode", func(t *testing.T) {
		g := NewWithT(t)
		// The policy takes effect asynchronously after creation.
		g.Eventually(func() error {
			return agentA.Create(ctx, &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("fastpath-agent may write only the FastPathNode of its own node, not node-b")))
		g.Expect(agentA.Create(ctx, &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})).To(Succeed())

		other := &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}
		g.Expect(env.Client.Create(ctx, other)).To(Succeed(), "the admin may")
		other.Status.AgentVersion = "forged"
		g.Expect(agentA.Status().Update(ctx, other)).To(MatchError(ContainSubstring("not node-c")))
		g.Expect(agentA.Delete(ctx, other)).To(HaveOccurred())

		noNode := as("system:serviceaccount:fastpath-system:fastpath-agent", nil)
		g.Expect(noNode.Create(ctx, &fastpathv1alpha1.FastPathNode{ObjectMeta: metav1.ObjectMeta{Name: "node-d"}})).To(MatchError(ContainSubstring("own node")),
			"a token without a node name writes nothing")
	})

	t.Run("an agent changes only the vhost-user-vsock label of its own Node", func(t *testing.T) {
		g := NewWithT(t)
		for _, name := range []string{"node-a", "node-b"} {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
			g.Expect(env.Client.Create(ctx, n)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
		}
		label := func(c client.Client, name string, mutate func(*corev1.Node)) error {
			n := &corev1.Node{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return err
			}
			patch := client.MergeFrom(n.DeepCopy())
			mutate(n)
			return c.Patch(ctx, n, patch)
		}
		set := func(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }
		g.Eventually(func() error { return label(agentA, "node-b", set(fastpathv1alpha1.VhostUserVSOCKNodeLabel, "true")) }, 30*time.Second, 200*time.Millisecond).
			Should(MatchError(ContainSubstring("fastpath-agent may only label its own Node, not UPDATE Node node-b")))
		g.Expect(label(agentA, "node-a", set(fastpathv1alpha1.VhostUserVSOCKNodeLabel, "true"))).To(Succeed())
		g.Expect(label(agentA, "node-a", func(n *corev1.Node) { delete(n.Labels, fastpathv1alpha1.VhostUserVSOCKNodeLabel) })).To(Succeed())
		onlyLabel := ContainSubstring("may change only the label fastpath.io/vhost-user-vsock")
		g.Expect(label(agentA, "node-a", set("node-role.kubernetes.io/control-plane", ""))).To(MatchError(onlyLabel), "another label")
		g.Expect(label(agentA, "node-a", set("kubernetes.io/hostname", "elsewhere"))).To(MatchError(onlyLabel), "an existing label")
		g.Expect(label(agentA, "node-a", set(fastpathv1alpha1.VhostUserVSOCKNodeLabel, "maybe"))).To(MatchError(onlyLabel), "another value")
		g.Expect(label(agentA, "node-a", func(n *corev1.Node) { n.Spec.Unschedulable = true })).To(MatchError(onlyLabel), "the spec")
		g.Expect(label(agentA, "node-a", func(n *corev1.Node) { n.Annotations = map[string]string{"x": "y"} })).To(MatchError(onlyLabel), "annotations")
		g.Expect(agentA.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})).To(HaveOccurred())
		n := &corev1.Node{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "node-a"}, n)).To(Succeed())
		g.Expect(n.Labels).To(Equal(map[string]string{"kubernetes.io/hostname": "node-a"}), "nothing the policy refused was written")
		g.Expect(n.Spec.Unschedulable).To(BeFalse())
	})

	t.Run("only virt-controller creates Pods that request the agent's devices", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-dev-req")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edit"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "tenant"}, {Kind: rbacv1.UserKind, Name: "system:serviceaccount:kube-system:replicaset-controller"}}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vap-dev-req-virt-controller"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "system:serviceaccount:kubevirt:kubevirt-controller"}}})).To(Succeed())
		pod := func(name string, res corev1.ResourceList, init bool) *corev1.Pod {
			c := corev1.Container{Name: "compute", Image: "virt-launcher", Resources: corev1.ResourceRequirements{Limits: res, Requests: res}}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "x"}}}}
			if init {
				p.Spec.InitContainers = []corev1.Container{c}
			} else {
				p.Spec.Containers = append(p.Spec.Containers, c)
			}
			return p
		}
		macvtap := corev1.ResourceList{corev1.ResourceName(fastpathv1alpha1.MacvtapResourceName("fplow0")): resource.MustParse("1")}
		sibling := corev1.ResourceList{corev1.ResourceName(fastpathv1alpha1.SiblingResourceName): resource.MustParse("1")}
		tenant := as("tenant", nil)
		refused := ContainSubstring("only KubeVirt's virt-controller (system:serviceaccount:kubevirt:kubevirt-controller) creates Pods that request macvtap.fastpath.io or vsock.fastpath.io devices, not tenant")
		g.Eventually(func() error { return tenant.Create(ctx, pod("macvtap", macvtap, false)) }, 30*time.Second, 200*time.Millisecond).Should(MatchError(refused))
		g.Expect(tenant.Create(ctx, pod("sibling", sibling, false))).To(MatchError(refused))
		g.Expect(tenant.Create(ctx, pod("sibling-init", sibling, true))).To(MatchError(refused), "an init container's request counts too")
		g.Expect(as("system:serviceaccount:kube-system:replicaset-controller", nil).Create(ctx, pod("rs", macvtap, false))).
			To(MatchError(ContainSubstring("not system:serviceaccount:kube-system:replicaset-controller")), "a workload controller acting for a tenant")
		g.Expect(tenant.Create(ctx, pod("plain", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}, false))).To(Succeed(), "other pods are not ours to police")
		g.Expect(as("system:serviceaccount:kubevirt:kubevirt-controller", nil).Create(ctx, pod("launcher", sibling, false))).To(Succeed())
	})

	t.Run("VMs request the agent's devices only as the operator wired them", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-vm-dev")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "tenant"}}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vap-vm-dev-operator"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fastpath-system", Name: "fastpath-operator"},
				{Kind: rbacv1.UserKind, Name: "system:serviceaccount:kubevirt:kubevirt-controller"}}})).To(Succeed())
		tenant := as("tenant", nil)
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		vm := func(name string, limits map[string]any) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
				"metadata": map[string]any{"namespace": ns, "name": name},
				"spec": map[string]any{"runStrategy": "Always", "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "db"}},
					"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}, "memory": map[string]any{"guest": "1Gi"}}}}}}}
			if limits != nil {
				g.Expect(unstructured.SetNestedMap(u.Object, limits, "spec", "template", "spec", "domain", "resources", "limits")).To(Succeed())
			}
			return u
		}
		macvtap := fastpathv1alpha1.MacvtapResourceName("fplow0")
		refusedMacvtap := ContainSubstring("spec.template.spec.domain.resources names " + macvtap + ": a VirtualMachine never requests macvtap.fastpath.io devices itself")
		refusedSibling := ContainSubstring("only fastpath-operator requests vsock.fastpath.io devices for a VirtualMachine")
		// The policy takes effect asynchronously after creation.
		g.Eventually(func() error {
			return tenant.Create(ctx, vm("all-macvtaps", map[string]any{macvtap: "128"}), client.DryRunAll)
		},
			30*time.Second, 200*time.Millisecond).Should(MatchError(refusedMacvtap))
		g.Expect(operator.Create(ctx, vm("op-macvtaps", map[string]any{macvtap: "1"}), client.DryRunAll)).To(MatchError(refusedMacvtap), "not even the operator's")
		g.Expect(tenant.Create(ctx, vm("sibling", map[string]any{fastpathv1alpha1.SiblingResourceName: "64"}), client.DryRunAll)).To(MatchError(refusedSibling))
		forged := vm("forged", map[string]any{fastpathv1alpha1.SiblingResourceName: "1"})
		forged.SetAnnotations(map[string]string{wiring.RecordAnnotation: `{"attachment":"x","added":["siblingResource"]}`})
		g.Expect(tenant.Create(ctx, forged, client.DryRunAll)).To(MatchError(refusedSibling), "a tenant may write the record annotation too")
		g.Expect(as("system:serviceaccount:kubevirt:kubevirt-controller", nil).Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
				"metadata": map[string]any{"namespace": ns, "name": "vc"},
				"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"limits": map[string]any{fastpathv1alpha1.SiblingResourceName: "1"}}}}}},
			client.DryRunAll)).To(Succeed(), "virt-controller makes a wired VM's VMI")
		g.Expect(tenant.Create(ctx,
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
				"metadata": map[string]any{"namespace": ns, "name": "own"},
				"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"limits": map[string]any{macvtap: "128"}}}}}},
			client.DryRunAll)).To(MatchError(ContainSubstring("only KubeVirt's virt-controller (system:serviceaccount:kubevirt:kubevirt-controller) creates VirtualMachineInstances that request")))

		By := func(s string) { t.Log(s) }
		By("the operator wiring a Sibling VM: its limit and record are admitted, and the tenant may keep them")
		plain := vm("db-0", nil)
		g.Expect(tenant.Create(ctx, plain)).To(Succeed(), "a VM without our devices is not ours to police")
		wired := plain.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plain), wired)).To(Succeed())
		changed, err := wiring.Wire(wired.Object, wiring.Desired{Attachment: "link", SiblingVSOCK: true})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(changed).To(BeTrue())
		g.Expect(operator.Update(ctx, wired)).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plain), wired)).To(Succeed())
		g.Expect(unstructured.SetNestedField(wired.Object, "2Gi", "spec", "template", "spec", "domain", "memory", "guest")).To(Succeed())
		g.Expect(tenant.Update(ctx, wired)).To(Succeed(), "the tenant changes its VM and keeps what the operator wrote")
		more := wired.DeepCopy()
		g.Expect(unstructured.SetNestedField(more.Object, "64", "spec", "template", "spec", "domain", "resources", "limits", fastpathv1alpha1.SiblingResourceName)).To(Succeed())
		g.Expect(tenant.Update(ctx, more)).To(MatchError(refusedSibling), "but takes no more devices")
		noRecord := wired.DeepCopy()
		unstructured.RemoveNestedField(noRecord.Object, "metadata", "annotations", wiring.RecordAnnotation)
		g.Expect(tenant.Update(ctx, noRecord)).To(MatchError(refusedSibling), "nor keeps the devices without the operator's record")
		g.Expect(wiring.Unwire(wired.Object)).To(BeTrue())
		g.Expect(tenant.Update(ctx, wired)).To(Succeed(), "removing them is always allowed")
	})

	t.Run("the operator writes outside its namespace only the objects it made", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-op")
		g.Expect(err).NotTo(HaveOccurred())
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		mine := map[string]string{"app.kubernetes.io/managed-by": "fastpath-operator"}
		tenantRB := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admins"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}}
		g.Expect(env.Client.Create(ctx, tenantRB)).To(Succeed(), "the tenant's own RoleBinding")
		tenantCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-config"}, Data: map[string]string{"k": "v"}}
		g.Expect(env.Client.Create(ctx, tenantCM)).To(Succeed())

		refused := ContainSubstring("fastpath-operator may")
		// The policy takes effect asynchronously after creation.
		g.Eventually(func() error {
			rb := tenantRB.DeepCopy()
			rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "mallory"})
			return operator.Update(ctx, rb)
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(And(refused, ContainSubstring("UPDATE only objects it made"), ContainSubstring("rolebindings "+ns+"/tenant-admins"))))
		adopt := tenantCM.DeepCopy()
		adopt.Labels = mine
		g.Expect(operator.Update(ctx, adopt)).To(MatchError(refused), "labelling a tenant's object does not make it the operator's")
		tenantPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		g.Expect(env.Client.Create(ctx, tenantPod)).To(Succeed())
		g.Expect(operator.Delete(ctx, tenantPod)).To(MatchError(And(refused, ContainSubstring("DELETE only objects it made"))))
		g.Expect(operator.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}})).To(MatchError(refused))

		made := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench-results", Labels: mine}}
		g.Expect(operator.Create(ctx, made)).To(Succeed())
		made.Data = map[string]string{"result": "1"}
		g.Expect(operator.Update(ctx, made)).To(Succeed())
		no := false
		runner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner", Labels: mine}, Spec: corev1.PodSpec{AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "c", Image: "ghcr.io/fastpath-io/fastpath-bench:0.1.0", Command: []string{"netserver", "-D", "-p", "12865"}}}}}
		g.Expect(operator.Create(ctx, runner)).To(Succeed())
		g.Expect(operator.Delete(ctx, runner)).To(Succeed())

		got := &rbacv1.RoleBinding{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenantRB), got)).To(Succeed())
		g.Expect(got.Subjects).To(Equal(tenantRB.Subjects), "nothing refused was written")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(tenantPod), &corev1.Pod{})).To(Succeed())
	})

	t.Run("the operator's benchmark pods run only the runner image, its command and its ServiceAccount", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-runner")
		g.Expect(err).NotTo(HaveOccurred())
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		chart := map[string]any{}
		data, err := os.ReadFile("Chart.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.Unmarshal(data, &chart)).To(Succeed())
		image := "ghcr.io/fastpath-io/fastpath-bench:" + chart["appVersion"].(string)
		bench := &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quick"},
			Spec: fastpathv1alpha1.DefaultBenchmarkSpec(fastpathv1alpha1.FastPathBenchmarkSpec{
				AttachmentRef: fastpathv1alpha1.LocalObjectReference{Name: "db-link"}, Mode: fastpathv1alpha1.BenchmarkModeVM,
				Client: fastpathv1alpha1.BenchmarkEndpoint{VM: "db-1"}, Server: fastpathv1alpha1.BenchmarkEndpoint{VM: "db-0"},
				SSHKeySecretRef: &fastpathv1alpha1.LocalObjectReference{Name: "bench-ssh"}, SSHUser: "cloud",
			})}
		g.Expect(env.Client.Create(ctx, bench)).To(Succeed())
		p := benchjob.Params{Name: bench.Name, Namespace: ns, Generation: 1, Spec: bench.Spec, Image: image, NetworkAttachment: ns + "/db-link"}
		job, err := benchjob.RunnerJob(p, benchjob.Endpoints{FastPath: []string{"10.250.0.3"}, Baseline: []string{"10.244.0.7"}, SSHClients: []string{"10.244.0.8"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(controllerutil.SetControllerReference(bench, job, env.Scheme)).To(Succeed())
		podSpec := bench.Spec.DeepCopy()
		podSpec.Mode, podSpec.SSHKeySecretRef = fastpathv1alpha1.BenchmarkModePod, nil
		pp := p
		pp.Spec = fastpathv1alpha1.DefaultBenchmarkSpec(*podSpec)
		pods, err := benchjob.ServerPods(pp)
		g.Expect(err).NotTo(HaveOccurred())
		server := pods[0]
		g.Expect(controllerutil.SetControllerReference(bench, server, env.Scheme)).To(Succeed())

		refused := func(mutate func(*batchv1.Job), want string) {
			j := job.DeepCopy()
			mutate(j)
			g.Expect(operator.Create(ctx, j, client.DryRunAll)).To(MatchError(ContainSubstring(want)), want)
		}
		// The policy takes effect asynchronously after creation.
		g.Eventually(func() error {
			j := job.DeepCopy()
			j.Spec.Template.Spec.Containers[0].Image = "evil.example.com/shell:1"
			return operator.Create(ctx, j, client.DryRunAll)
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("fastpath-operator runs only the runner image " + image + " in jobs, not runner: evil.example.com/shell:1")))
		refused(func(j *batchv1.Job) {
			j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"fastpath-bench"}}}
		}, "not init: busybox")
		refused(func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "cat /ssh/*"} }, "fastpath-operator runs only fastpath-bench in jobs, not runner: sh -c cat /ssh/*")
		refused(func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Command = nil }, "not runner: (the image entrypoint)")
		refused(func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = "tenant-admin" },
			"only as its benchmark's ServiceAccount <benchmark>-runner, with the FastPathBenchmark as its controller, not ServiceAccount tenant-admin")
		refused(func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = "" }, "not the default ServiceAccount")
		refused(func(j *batchv1.Job) { j.OwnerReferences = nil }, "with the FastPathBenchmark as its controller")
		refused(func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true }, "no host namespace")
		refused(func(j *batchv1.Job) {
			j.Spec.Template.Spec.Volumes = append(j.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "only secret and projected volumes")
		g.Expect(operator.Create(ctx, job.DeepCopy(), client.DryRunAll)).To(Succeed(), "the runner Job as api/benchjob renders it")

		g.Expect(operator.Create(ctx, server.DeepCopy(), client.DryRunAll)).To(Succeed(), "the netserver Pod as api/benchjob renders it")
		evil := server.DeepCopy()
		evil.Spec.ServiceAccountName, evil.Spec.AutomountServiceAccountToken = "quick-runner", nil
		g.Expect(operator.Create(ctx, evil, client.DryRunAll)).To(MatchError(ContainSubstring("runs a netserver Pod without a ServiceAccount token")))
		evil = server.DeepCopy()
		evil.Spec.Containers[0].Command = []string{"netserver", "-D", "-p", "22"}
		g.Expect(operator.Create(ctx, evil, client.DryRunAll)).To(MatchError(ContainSubstring("runs only netserver -D -p 12865 in pods")))
		g.Expect(server.Spec.Containers[0].Command).To(Equal([]string{"netserver", "-D", "-p", strconv.Itoa(benchjob.NetserverPort)}), "the chart's command is api/benchjob's")
	})

	t.Run("the operator changes only its two binding plugin entries of the KubeVirt CR", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}})).To(Succeed())
		for _, doc := range strings.Split(helm(t, "template", "fp", ".", "--namespace", "fastpath-system", "--show-only", "templates/bindingplugin.yaml"), "\n---") {
			obj := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
			if k := obj.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
				g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), obj.GetName())
			}
		}
		kv := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"namespace": "kubevirt", "name": "kubevirt", "labels": map[string]any{"team": "virt"}},
			"spec": map[string]any{
				"imageRegistry": "quay.io/kubevirt",
				"configuration": map[string]any{
					"developerConfiguration": map[string]any{"featureGates": []any{"Snapshot"}},
					"network":                map[string]any{"binding": map[string]any{"passt": map[string]any{"sidecarImage": "passt:1"}}},
				},
			},
		}}
		g.Expect(env.Client.Create(ctx, kv)).To(Succeed())
		key := client.ObjectKeyFromObject(kv)
		before := kv.DeepCopy()
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		merge := func(patch string) error {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
			obj.SetNamespace(key.Namespace)
			obj.SetName(key.Name)
			return operator.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		only := "fastpath-operator may change only spec.configuration.network.binding.fastpath and spec.configuration.network.binding.fastpath-macvtap of KubeVirt kubevirt, not "
		// The policy takes effect asynchronously after creation.
		g.Eventually(func() error {
			return merge(`{"spec":{"configuration":{"developerConfiguration":{"featureGates":["Snapshot","Sidecar"]}}}}`)
		}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(only + "spec.configuration.developerConfiguration")))
		for patch, field := range map[string]string{
			`{"spec":{"imageRegistry":"evil.example.com"}}`:                                                          "spec.imageRegistry",
			`{"spec":{"customizeComponents":{"patches":[]}}}`:                                                        "spec.customizeComponents",
			`{"spec":{"configuration":{"network":{"binding":{"passt":{"sidecarImage":"evil:1"}}}}}}`:                 "spec.configuration.network.binding.passt",
			`{"spec":{"configuration":{"network":{"binding":{"passt":null}}}}}`:                                      "spec.configuration.network.binding.passt",
			`{"spec":{"configuration":{"network":{"permitBridgeInterfaceOnPodNetwork":true}}}}`:                      "spec.configuration.network.permitBridgeInterfaceOnPodNetwork",
			`{"metadata":{"labels":{"team":"fastpath"}}}`:                                                            "metadata.labels",
			`{"metadata":{"annotations":{"kubevirt.io/x":"y"}}}`:                                                     "metadata.annotations",
			`{"spec":{"configuration":{"network":{"binding":{"fastpath":{"sidecarImage":"h:1"}}}},"imageTag":"v9"}}`: "spec.imageTag",
		} {
			g.Expect(merge(patch)).To(MatchError(ContainSubstring(only+field)), patch)
		}
		// RBAC already refuses a delete; the policy refuses it on its own too.
		g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "vap-kubevirt-delete"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"}, Verbs: []string{"delete"}}}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vap-kubevirt-delete"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vap-kubevirt-delete"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fastpath-system", Name: "fastpath-operator"}}})).To(Succeed())
		g.Eventually(func() error { return operator.Delete(ctx, kv.DeepCopy()) }, 30*time.Second, 200*time.Millisecond).
			Should(MatchError(ContainSubstring("fastpath-operator may only update KubeVirt kubevirt, not DELETE it")))

		plugins, err := kubevirtcr.Plugins(kubevirtcr.Names{Bridge: "fastpath", Macvtap: "fastpath-macvtap"}, "registry.example.com/fastpath-domain-hook:v1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kubevirtcr.Register(ctx, operator, key, plugins)).To(Succeed(), "the binding edit is admitted")
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(kubevirtcr.Registered(got, plugins)).To(BeTrue())
		g.Expect(got.GetLabels()).To(Equal(map[string]string{"team": "virt"}), "nothing refused was written")
		gates, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "configuration", "developerConfiguration", "featureGates")
		g.Expect(gates).To(Equal([]string{"Snapshot"}))
		g.Expect(kubevirtcr.Unregister(ctx, operator, key, "fastpath", "fastpath-macvtap")).To(Succeed(), "and so is its removal")
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Object["spec"]).To(Equal(before.Object["spec"]))

		// Unregister drops the maps it leaves empty: that is admitted too.
		bare := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
			"metadata": map[string]any{"namespace": "kubevirt", "name": "kubevirt"}, "spec": map[string]any{"imageRegistry": "quay.io/kubevirt"}}}
		g.Expect(env.Client.Delete(ctx, kv)).To(Succeed())
		g.Expect(env.Client.Create(ctx, bare)).To(Succeed())
		g.Expect(kubevirtcr.Register(ctx, operator, key, plugins)).To(Succeed())
		g.Expect(kubevirtcr.Unregister(ctx, operator, key, "fastpath", "fastpath-macvtap")).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Object["spec"]).To(Equal(map[string]any{"imageRegistry": "quay.io/kubevirt"}))
	})

	t.Run("only the operator writes fastpath NADs, each controlled by a FastPathAttachment", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap")
		g.Expect(err).NotTo(HaveOccurred())
		tenant := nadWriter(g, env, as, ns)
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		nad := func(name, config string, owned bool) *nadv1.NetworkAttachmentDefinition {
			n := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
			if owned {
				yes := true
				n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "fastpath.io/v1alpha1", Kind: "FastPathAttachment", Name: name, UID: "0000", Controller: &yes}}
			}
			return n
		}
		fp := `{"cniVersion":"1.0.0","name":"x","type":"fastpath","bridge":"cni0","stateDir":"/etc/cni/net.d"}`
		g.Eventually(func() error { return tenant.Create(ctx, nad("forged", fp, true)) }, 30*time.Second, 200*time.Millisecond).
			Should(MatchError(ContainSubstring("only fastpath-operator writes NetworkAttachmentDefinitions for the fastpath plugin")))
		escaped := `{"cniVersion":"1.0.0","name":"x","type":"\u0066astpath"}`
		g.Expect(tenant.Create(ctx, nad("escaped", escaped, false))).To(MatchError(ContainSubstring("only fastpath-operator")))
		g.Expect(tenant.Create(ctx, nad("bridge", `{"cniVersion":"1.0.0","name":"b","type":"bridge"}`, false))).To(Succeed(), "other plugins are not ours to police")

		g.Expect(operator.Create(ctx, nad("unowned", fp, false))).To(MatchError(ContainSubstring("must be controlled by a FastPathAttachment")))
		g.Expect(operator.Create(ctx, nad("owned", fp, true))).To(Succeed())
	})

	t.Run("a NAD of any plugin naming a FastPathNetwork's bridge or lower device is the operator's, controlled by a FastPathAttachment", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-dev")
		g.Expect(err).NotTo(HaveOccurred())
		tenant := nadWriter(g, env, as, ns)
		operator := as("system:serviceaccount:fastpath-system:fastpath-operator", nil)
		for _, n := range []*fastpathv1alpha1.FastPathNetwork{
			{ObjectMeta: metav1.ObjectMeta{Name: "vap-bridge"}, Spec: fastpathv1alpha1.FastPathNetworkSpec{Bridge: "fp.br0"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "vap-macvtap"}, Spec: fastpathv1alpha1.FastPathNetworkSpec{Datapath: fastpathv1alpha1.DatapathMacvtap, Bridge: "fplow0"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "vap-ovs"}, Spec: fastpathv1alpha1.FastPathNetworkSpec{Datapath: fastpathv1alpha1.DatapathOVS, Bridge: "br-fpovs"}},
		} {
			g.Expect(env.Client.Create(ctx, n)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
		}
		nad := func(name, config string) *nadv1.NetworkAttachmentDefinition {
			return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
		}
		controlled := func(n *nadv1.NetworkAttachmentDefinition) *nadv1.NetworkAttachmentDefinition {
			yes := true
			n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "fastpath.io/v1alpha1", Kind: "FastPathAttachment", Name: n.Name, UID: "0000", Controller: &yes}}
			return n
		}
		onBridge := `{"cniVersion":"1.0.0","name":"b","type":"bridge","bridge":"fp.br0","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`
		// The policy and its parameters (the FastPathNetworks) take effect
		// asynchronously; a dry run is admitted like a create and stores nothing.
		g.Eventually(func() error { return tenant.Create(ctx, nad("plain-bridge", onBridge), client.DryRunAll) }, time.Minute, 200*time.Millisecond).
			Should(MatchError(And(ContainSubstring(`names "fp.br0", the bridge of FastPathNetwork vap-bridge`), ContainSubstring("create a FastPathAttachment instead"))))

		for name, config := range map[string]string{
			"ws-bridge":   "{ \"cniVersion\" : \"1.0.0\" ,\n\t\"type\":\"bridge\",\n\t\"bridge\"\t:\r\n  \"fp.br0\"\n}",
			"ovs":         `{"cniVersion":"1.0.0","name":"o","type":"ovs", "bridge" :"fp.br0"}`,
			"tap":         `{"cniVersion":"1.0.0","name":"t","type":"tap","bridge":  "fp.br0"}`,
			"conflist":    `{"cniVersion":"1.0.0","name":"c","plugins":[{"type":"bridge","bridge":"fp.br0"},{"type":"tuning"}]}`,
			"macvlan":     `{"cniVersion":"1.0.0","name":"m","type":"macvlan","master":"fplow0","mode":"bridge"}`,
			"macvtap":     `{"cniVersion":"1.0.0","name":"v","type":"macvtap","master": "fplow0"}`,
			"host-device": `{"cniVersion":"1.0.0","name":"h","type":"host-device","device":"fplow0"}`,
			"vlan":        `{"cniVersion":"1.0.0","name":"l","type":"vlan","master":"fp.br0","vlanId":7}`,
		} {
			g.Expect(tenant.Create(ctx, nad(name, config))).To(MatchError(ContainSubstring("of FastPathNetwork vap-")), name)
		}
		// Every device the agent makes for each network, by the agent's own
		// naming function (a Macvtap network's lower device and its peer),
		// in every CNI plugin that takes a device, alone and in a conflist.
		for _, n := range []struct{ network, datapath, bridge string }{
			{"vap-bridge", wellknown.DatapathLinuxBridge, "fp.br0"},
			{"vap-macvtap", wellknown.DatapathMacvtap, "fplow0"},
			{"vap-ovs", wellknown.DatapathOVS, "br-fpovs"},
		} {
			for _, dev := range wellknown.NetworkLinkNames(n.datapath, n.bridge) {
				for _, config := range deviceConfigs(dev) {
					g.Eventually(func() error { return tenant.Create(ctx, nad("hostile", config), client.DryRunAll) }, time.Minute, 200*time.Millisecond).
						Should(MatchError(And(ContainSubstring(dev), ContainSubstring("create a FastPathAttachment instead"))), "%s: %s", n.network, config)
				}
			}
		}
		g.Expect(tenant.Create(ctx, nad("peer", `{"cniVersion":"1.0.0","name":"p","type":"macvlan","master":"`+wellknown.LowerPeerName("fplow0")+`"}`))).
			To(MatchError(ContainSubstring(`names "`+wellknown.LowerPeerName("fplow0")+`", a link Fastpath makes on its nodes (fpl<12 hex digits>: the peer of a macvtap lower device`)),
				"the peer of the lower device reaches every Macvtap VM of the network")
		// fastpath-nad-owner refuses these (any \u escape), fastpath-nad-devices relies on it.
		g.Expect(tenant.Create(ctx, nad("escaped", `{"cniVersion":"1.0.0","name":"e","type":"bridge","bridge":"fp.br\u0030"}`))).
			To(MatchError(ContainSubstring("only fastpath-operator")), "an escape may spell a bridge name")
		g.Expect(tenant.Create(ctx, nad("nul", `{"cniVersion":"1.0.0","name":"e","type":"bridge","bridge":"fp.br0\u0000x"}`))).
			To(MatchError(ContainSubstring("only fastpath-operator")), "the kernel reads an interface name up to its first NUL")
		g.Expect(tenant.Create(ctx, controlled(nad("forged", onBridge)))).To(MatchError(ContainSubstring("of FastPathNetwork vap-bridge")),
			"a tenant may write an ownerReference, so only the operator's controlled NADs pass")
		g.Expect(operator.Create(ctx, nad("uncontrolled", onBridge))).To(MatchError(ContainSubstring("of FastPathNetwork vap-bridge")))
		g.Expect(operator.Create(ctx, controlled(nad("controlled", onBridge)))).To(Succeed())

		other := nad("other-bridge", `{"cniVersion":"1.0.0","name":"o","type":"bridge","bridge":"br-tenant","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`)
		g.Expect(tenant.Create(ctx, other)).To(Succeed(), "a bridge no FastPathNetwork names is not ours to police")
		g.Expect(tenant.Create(ctx, nad("similar", `{"cniVersion":"1.0.0","name":"fp.br00","type":"macvlan","master":"xfplow0"}`))).To(Succeed(),
			"names are matched whole: fp.br00 and xfplow0 are other devices")
		other.Spec.Config = onBridge
		g.Expect(tenant.Update(ctx, other)).To(MatchError(ContainSubstring("of FastPathNetwork vap-bridge")), "nor can an update move a NAD onto the bridge")

		g.Expect(operator.Create(ctx, controlled(nad("controlled-peer", `{"cniVersion":"1.0.0","name":"p","type":"macvlan","master":"`+wellknown.LowerPeerName("fplow0")+`"}`)), client.DryRunAll)).
			To(Succeed(), "the operator's controlled NADs are exempt, as from fastpath-nad-devices")

		g.Expect(env.Client.Delete(ctx, &fastpathv1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: "vap-bridge"}})).To(Succeed())
		g.Eventually(func() error { return tenant.Update(ctx, other, client.DryRunAll) }, time.Minute, 200*time.Millisecond).Should(Succeed(),
			"the parameters are the networks as they are now: a bridge no network names any more is free")
	})

	t.Run("a NAD naming a link Fastpath derives the name of is refused, with or without a network", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := env.NewNamespace(ctx, "vap-derived")
		g.Expect(err).NotTo(HaveOccurred())
		tenant := nadWriter(g, env, as, ns)
		nad := func(config string) *nadv1.NetworkAttachmentDefinition {
			return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "n"}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
		}
		// The pattern in the chart is the table's.
		g.Expect(helm(t, "template", "fp", ".", "--namespace", "fastpath-system", "--show-only", "templates/admission.yaml")).
			To(ContainSubstring("object.spec.config.find('" + wellknown.DerivedLinkPattern() + "')"))
		derived := []string{
			wellknown.LowerPeerName("nolongeranetwork"),
			wellknown.HostVethName("9f0c2a1d6e5b4c3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a", "net1"),
			wellknown.TempLinkName([4]byte{1, 2, 3, 4}),
		}
		for _, dev := range derived {
			kind, ok := wellknown.DerivedLinkKind(dev)
			g.Expect(ok).To(BeTrue(), dev)
			for _, config := range deviceConfigs(dev) {
				g.Eventually(func() error { return tenant.Create(ctx, nad(config), client.DryRunAll) }, time.Minute, 200*time.Millisecond).
					Should(MatchError(And(ContainSubstring(`names "`+dev+`", a link Fastpath makes on its nodes`), ContainSubstring(kind.Prefix+"<"))), config)
			}
		}
		for _, harmless := range []string{
			`{"cniVersion":"1.0.0","name":"m","type":"macvlan","master":"eth0","mode":"bridge"}`,
			`{"cniVersion":"1.0.0","name":"h","type":"host-device","device":"fpl0123"}`,
			`{"cniVersion":"1.0.0","name":"h","type":"host-device","device":"fpl0123456789AB"}`,
			`{"cniVersion":"1.0.0","name":"c","plugins":[{"type":"bridge","bridge":"br-tenant"},{"type":"tuning","mac":"02:00:00:00:00:01"}]}`,
		} {
			g.Expect(tenant.Create(ctx, nad(harmless), client.DryRunAll)).To(Succeed(), harmless)
		}
	})
}

// deviceConfigs returns NAD configs that put dev under the device key of
// every CNI plugin that takes one (bridge, tap and ovs: bridge; macvlan,
// ipvlan, vlan and macvtap: master; host-device: device), alone and as the
// second plugin of a conflist.
func deviceConfigs(dev string) []string {
	var out []string
	for _, p := range []struct{ typ, key string }{
		{"bridge", "bridge"}, {"tap", "bridge"}, {"ovs", "bridge"},
		{"macvlan", "master"}, {"ipvlan", "master"}, {"vlan", "master"}, {"macvtap", "master"},
		{"host-device", "device"},
	} {
		plugin := fmt.Sprintf(`{"type":%q, %q: %q}`, p.typ, p.key, dev)
		out = append(out,
			fmt.Sprintf(`{"cniVersion":"1.0.0","name":"x","type":%q,%q:%q}`, p.typ, p.key, dev),
			fmt.Sprintf(`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"tuning"},%s]}`, plugin))
	}
	return out
}

// nadWriter returns a client for the ServiceAccount tenant of namespace ns,
// which RBAC allows to create, update and get NetworkAttachmentDefinitions
// there: what the admission policies refuse is theirs alone to refuse.
func nadWriter(g *WithT, env *testenv.Env, as func(string, map[string][]string) client.Client, ns string) client.Client {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nads"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"create", "update", "get"}}},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nads"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
	})).To(Succeed())
	return as("system:serviceaccount:"+ns+":tenant", nil)
}

func bindClusterRole(g *WithT, env *testenv.Env, path, sa string) {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), role)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", role.Name, sa)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fastpath-system", Name: sa}},
	})).To(Succeed())
}
