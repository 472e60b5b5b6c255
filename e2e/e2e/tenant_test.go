package e2e

import (
	"fmt"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// Issue 39: what a tenant with the namespace's edit role tries against the
// node's devices, on the real cluster with the chart's admission policies.
// Each attempt is refused, naming what it asked for, and leaves nothing.
var _ = Describe("A tenant's attempts at the node's devices", Ordered, func() {
	var (
		tenant  client.Client
		network *fastpathv1alpha1.FastPathNetwork
	)

	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() || !env.KubeVirt() {
			notRun(NoKubeVirt + "; or the local stack, which runs no admission policies")
		}
		c := env.Client()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant", Namespace: ns}}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, sa))).To(Succeed())
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-edit", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, rb))).To(Succeed())
		// Multus aggregates nothing into edit; a cluster whose tenants
		// write their own NADs grants them like this (the case the
		// fastpath-nad-devices policy exists for).
		nadRole := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-nads", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"get", "list", "create", "update", "delete"}}},
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, nadRole))).To(Succeed())
		nadBinding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-nads", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nadRole.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, nadBinding))).To(Succeed())
		cfg, err := config.GetConfig()
		Expect(err).NotTo(HaveOccurred())
		cfg.Impersonate.UserName = fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa.Name)
		tenant, err = client.New(cfg, client.Options{Scheme: fpscheme.New()})
		Expect(err).NotTo(HaveOccurred())

		network = objs.Network.DeepCopy()
		network.ObjectMeta = metav1.ObjectMeta{Name: "e2e-tenant-" + ns}
		network.Spec.Bridge = "fptn0"
		Expect(c.Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Delete(ctx, network))).To(Succeed()) })
		// The tenant's edit role reaches VMs: KubeVirt aggregates its own
		// roles into edit. Proof that the refusals below are the policies',
		// not RBAC's: the tenant may create a plain VM.
		plain := newVM("tenant-plain", "tenant-plain", "")
		Expect(tenant.Create(ctx, plain)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, nil, plain.Name) }, NodeTimeout(4*time.Minute))
	}, NodeTimeout(2*time.Minute))

	// refused creates obj as the tenant, wants a Forbidden or Invalid error
	// whose message contains each of want, and checks nothing was created.
	refused := func(ctx SpecContext, obj client.Object, want ...string) {
		GinkgoHelper()
		err := tenant.Create(ctx, obj)
		Expect(err).To(HaveOccurred(), "%T %s was created", obj, obj.GetName())
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want Forbidden or Invalid: %v", err)
		for _, w := range want {
			Expect(err.Error()).To(ContainSubstring(w))
		}
		got := obj.DeepCopyObject().(client.Object)
		Expect(apierrors.IsNotFound(env.Client().Get(ctx, client.ObjectKeyFromObject(obj), got))).To(BeTrue(), "%T %s exists", obj, obj.GetName())
		AddReportEntry("refused", fmt.Sprintf("%T %s: %s", obj, obj.GetName(), firstLine(err.Error())))
	}
	vmWith := func(name string, res corev1.ResourceName) *kubevirtv1.VirtualMachine {
		vm := newVM(name, name, "")
		vm.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{res: resource.MustParse("1")}
		return vm
	}

	It("refuses a VM that requests a macvtap device of the node itself", func(ctx SpecContext) {
		refused(ctx, vmWith("tenant-macvtap", corev1.ResourceName(fastpathv1alpha1.MacvtapResourceDomain+"/"+network.Spec.Bridge)), "fastpath-vm-device-requests", "macvtap.fastpath.io/")
	})

	It("refuses a VM that requests a sibling vsock slot the operator did not wire", func(ctx SpecContext) {
		refused(ctx, vmWith("tenant-sibling", fastpathv1alpha1.SiblingResourceName), "fastpath-vm-device-requests", fastpathv1alpha1.SiblingResourceName)
	})

	It("refuses a VMI of its own that requests a sibling vsock slot", func(ctx SpecContext) {
		vm := vmWith("tenant-vmi", fastpathv1alpha1.SiblingResourceName)
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "tenant-vmi", Namespace: ns}, Spec: vm.Spec.Template.Spec}
		refused(ctx, vmi, "fastpath-vmi-device-requests")
	})

	It("refuses a Pod that requests a sibling vsock slot", func(ctx SpecContext) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-pod", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "localhost/fastpath-guest:local",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{fastpathv1alpha1.SiblingResourceName: resource.MustParse("1")}},
			}}},
		}
		refused(ctx, pod, "fastpath-device-requests")
	})

	It("refuses a NetworkAttachmentDefinition that puts a pod on a bridge the agent made", func(ctx SpecContext) {
		for _, t := range []string{"bridge", "macvlan"} {
			key := map[string]string{"bridge": "bridge", "macvlan": "master"}[t]
			nad := &nadv1.NetworkAttachmentDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + t, Namespace: ns},
				Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: fmt.Sprintf(`{"cniVersion":"1.0.0","name":"x","type":%q,%q:%q}`, t, key, network.Spec.Bridge)},
			}
			refused(ctx, nad, "fastpath-nad-devices", network.Spec.Bridge)
		}
	})

	It("refuses a benchmark whose sshUser would be an ssh option", func(ctx SpecContext) {
		b := objs.Benchmark.DeepCopy()
		b.ObjectMeta = metav1.ObjectMeta{Name: "tenant-ssh", Namespace: ns}
		b.Spec.SSHUser = "-oProxyCommand=touch /tmp/owned"
		b.Spec.SuccessCriteria.MinSpeedupPercent = ptr.To[int32](120)
		refused(ctx, b, "sshUser")
	})
})

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
