package attachment_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// installTenantRoles installs config/rbac/tenant/roles.yaml, the aggregated
// ClusterRoles the chart ships, once per suite.
var tenantRolesInstalled bool

func installTenantRoles() {
	GinkgoHelper()
	if tenantRolesInstalled {
		return
	}
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "tenant", "roles.yaml"))
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, doc := range strings.Split(string(data), "\n---") {
		role := &rbacv1.ClusterRole{}
		Expect(yaml.Unmarshal([]byte(doc), role)).To(Succeed())
		if role.Name == "" {
			continue
		}
		Expect(env.Client.Create(ctx, role)).To(Succeed())
		n++
	}
	Expect(n).To(Equal(2))
	for _, r := range []string{"admin", "edit", "view"} {
		aggregate(r)
	}
	tenantRolesInstalled = true
}

// aggregate fills the rules of an aggregated ClusterRole (admin, edit, view)
// from the ClusterRoles its aggregationRule selects. This emulates
// kube-controller-manager's clusterrole-aggregation controller, which envtest
// does not run; the selection itself (the labels of the roles) is the real one.
func aggregate(name string) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, role)).To(Succeed())
	Expect(role.AggregationRule).NotTo(BeNil(), "ClusterRole %s is not aggregated", name)
	var rules []rbacv1.PolicyRule
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		Expect(err).NotTo(HaveOccurred())
		list := &rbacv1.ClusterRoleList{}
		Expect(env.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: s})).To(Succeed())
		for _, r := range list.Items {
			if r.Name != name {
				rules = append(rules, r.Rules...)
			}
		}
	}
	role.Rules = rules
	Expect(env.Client.Update(ctx, role)).To(Succeed())
}

// tenantClient returns a client acting as ServiceAccount ns/tenant, bound to
// the namespace's default `edit` ClusterRole (as a namespace admin would bind it).
func tenantClient(ns string) (client.Client, string) {
	GinkgoHelper()
	installTenantRoles()
	Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
	})).To(Succeed())
	user := "system:serviceaccount:" + ns + ":tenant"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c, user
}

// canI is `kubectl auth can-i --as=<user>` through a SubjectAccessReview.
func canI(user, verb, resource, subresource, ns string) bool {
	GinkgoHelper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: v1alpha1.GroupVersion.Group, Resource: resource, Subresource: subresource,
		},
	}}
	Expect(env.Client.Create(ctx, sar)).To(Succeed())
	return sar.Status.Allowed
}

var _ = Describe("Admin-owned FastPathNetworks", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
	})

	It("reports the VMs of a placement None attachment apart Colocated=False with both nodes, without counting it against Ready", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		createVM(ns, "db-1", busyVM, map[string]string{"app": "db"})
		net := createNetwork("none-"+ns, v1alpha1.FastPathNetworkSpec{Bridge: "fp-none"})
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Placement: v1alpha1.PlacementNone,
			NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(uniqueSubnet())})
		Eventually(vmOwner(ns, "db-0")).Should(Equal("link"))
		Eventually(vmOwner(ns, "db-1")).Should(Equal("link"))
		createVMI(ns, vmi{name: "db-0", node: "node-a", wired: true, attachment: "link"})
		Eventually(conditionOf(ns, "link", v1alpha1.ColocatedCondition)).Should(Equal("True/" + v1alpha1.ReasonPlacementNone))
		createVMI(ns, vmi{name: "db-1", node: "node-b", wired: true, attachment: "link"})
		Eventually(conditionOf(ns, "link", v1alpha1.ColocatedCondition)).Should(Equal("False/" + v1alpha1.ReasonNotColocated))
		Expect(conditionMessage(ns, "link", v1alpha1.ColocatedCondition)).To(And(ContainSubstring("db-0 on node-a"), ContainSubstring("db-1 on node-b")))
		Consistently(func() string { return conditionMessage(ns, "link", v1alpha1.ReadyCondition) }, "2s").ShouldNot(ContainSubstring(v1alpha1.ColocatedCondition))
	})

	It("lets a tenant with the namespace's edit role manage attachments, never networks, nodes or status", func() {
		ns := newNamespace()
		tenant, user := tenantClient(ns)
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})

		By("creating an attachment on the default network (aggregate-to-edit)")
		Eventually(func() error {
			return tenant.Create(ctx, &v1alpha1.FastPathAttachment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-link"},
				Spec:       v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())},
			})
		}).Should(Succeed())
		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))

		By("being refused a FastPathNetwork")
		err := tenant.Create(ctx, &v1alpha1.FastPathNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + ns},
			Spec:       v1alpha1.FastPathNetworkSpec{Bridge: "cni0", NamespaceSelector: metav1.LabelSelector{}},
		})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "tenant created a FastPathNetwork: %v", err)

		By("being refused a bridge named in the attachment, with the field named")
		err = tenant.Create(ctx, &v1alpha1.FastPathAttachment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-bridge"},
			Spec: v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: &v1alpha1.NetworkSpec{
				Bridge: "cni0", IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}},
		})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.network.bridge"))

		By("kubectl auth can-i --as=" + user)
		Expect(canI(user, "create", "fastpathattachments", "", ns)).To(BeTrue())
		Expect(canI(user, "create", "fastpathbenchmarks", "", ns)).To(BeTrue())
		for _, r := range []struct{ verb, resource, sub, ns string }{
			{"create", "fastpathnetworks", "", ""},
			{"update", "fastpathnetworks", "", ""},
			{"update", "fastpathnodes", "status", ""},
			{"create", "fastpathnodes", "", ""},
			{"update", "fastpathattachments", "status", ns},
			{"patch", "fastpathbenchmarks", "status", ns},
		} {
			Expect(canI(user, r.verb, r.resource, r.sub, r.ns)).To(BeFalse(), "%s %s/%s", r.verb, r.resource, r.sub)
		}
	})

	It("renders the network's portSecurity into the NAD: Disabled as false, Enabled (the default) as the plugin's default", func() {
		ns := newNamespace()
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		net := createNetwork("ps-"+ns, v1alpha1.FastPathNetworkSpec{
			Bridge: "fp-ps", PortSecurity: v1alpha1.PortSecurityDisabled,
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		})
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(uniqueSubnet())})
		nadConfig := func() string {
			nad, err := getNAD(ns, "db-link")
			if err != nil {
				return err.Error()
			}
			return nad.Spec.Config
		}
		Eventually(nadConfig).Should(ContainSubstring(`"portSecurity":false`))

		By("the admin enabling it")
		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.PortSecurity = v1alpha1.PortSecurityEnabled })
		Eventually(nadConfig).Should(And(ContainSubstring(`"bridge":"fp-ps"`), Not(ContainSubstring(`portSecurity`))))
	})

	It("gives a new attachment on a network in tuning mode Apply the applied MTU and offloads in its NAD and VM tuning, except the keys it sets; Off takes them back", func() {
		ns := newNamespace()
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		net := createNetwork("tuned-"+ns, v1alpha1.FastPathNetworkSpec{
			Bridge: "fp-tuned", MTU: &v1alpha1.MTURange{Max: ptr(int32(65520)), Default: ptr(int32(9000))},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Tuning:            &v1alpha1.NetworkTuning{Mode: v1alpha1.TuningApply},
		})
		// The status the tuning controller leaves (it does not run in this
		// suite): applied a minute ago, so the attachment below is new.
		at := metav1.NewTime(time.Now().Add(-time.Minute))
		Eventually(func() error { // again on a conflict with the operator's status.inUse
			n := &v1alpha1.FastPathNetwork{}
			if err := env.Client.Get(ctx, types.NamespacedName{Name: net}, n); err != nil {
				return err
			}
			n.Status.Tuning = &v1alpha1.NetworkTuningStatus{AppliedAt: &at, Applied: &v1alpha1.TuningSetting{MTU: 65520,
				Offloads: &v1alpha1.Offloads{TSO: v1alpha1.OffloadOn, GSO: v1alpha1.OffloadOff, GRO: v1alpha1.OffloadOff, TXChecksum: v1alpha1.OffloadOn}}}
			return env.Client.Status().Update(ctx, n)
		}).Should(Succeed())
		spec := network(uniqueSubnet())
		spec.Offloads = &v1alpha1.Offloads{GRO: v1alpha1.OffloadOn}
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: spec})
		nadConfig := func() string {
			nad, err := getNAD(ns, "db-link")
			if err != nil {
				return err.Error()
			}
			return nad.Spec.Config
		}
		tuning := func() string {
			return templatePart(ns, "db-0", "metadata", "annotations", v1alpha1.TuningAnnotation)
		}
		Eventually(nadConfig).Should(And(ContainSubstring(`"mtu":65520`), ContainSubstring(`"offloads":{"tso":true,"gso":false,"gro":true,"txChecksum":true,"rxChecksum":true}`)),
			"gso from the applied set; gro, which the attachment sets, its own")
		Eventually(tuning).Should(And(ContainSubstring(`\"mtu\":65520`),
			ContainSubstring(`\"offloads\":{\"tso\":\"On\",\"gso\":\"Off\",\"gro\":\"On\",\"txChecksum\":\"On\",\"rxChecksum\":\"On\"}`)))

		By("the admin setting tuning mode Off")
		updateNetwork(net, func(n *v1alpha1.FastPathNetwork) { n.Spec.Tuning.Mode = v1alpha1.TuningOff })
		Eventually(nadConfig).Should(And(ContainSubstring(`"mtu":9000`), ContainSubstring(`"offloads":{"tso":true,"gso":true,"gro":true,"txChecksum":true,"rxChecksum":true}`)))
		Eventually(tuning).Should(And(ContainSubstring(`\"mtu\":9000`),
			ContainSubstring(`\"offloads\":{\"tso\":\"On\",\"gso\":\"On\",\"gro\":\"On\",\"txChecksum\":\"On\",\"rxChecksum\":\"On\"}`)))
	})

	It("revokes the fast path of running VMs when the network stops admitting their namespace", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		createVM(ns, "db-1", minimalVM, map[string]string{"app": "db"})
		original := map[string]string{"db-0": specJSON(ns, "db-0"), "db-1": specJSON(ns, "db-1")}
		nsObj := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["team"] = ns
		Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		net := createNetwork("revoke-"+ns, v1alpha1.FastPathNetworkSpec{
			Bridge: "fp-rev", NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": ns}},
		})
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(uniqueSubnet())})
		Eventually(conditionOf(ns, "link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Eventually(vmOwner(ns, "db-0")).Should(Equal("link"))
		Eventually(vmOwner(ns, "db-1")).Should(Equal("link"))
		// db-0 runs with the fast-path interface; db-1 is stopped.
		createVMI(ns, vmi{name: "db-0", node: "node-rev", wired: true, attachment: "link"})
		running := &kubevirtv1.VirtualMachineInstance{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-0"}, running)).To(Succeed())

		By("the admin taking the namespace off the network")
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj)).To(Succeed())
		delete(nsObj.Labels, "team")
		Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		Eventually(conditionOf(ns, "link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNetworkRefused))
		Eventually(isGone(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "link"}})).Should(BeTrue())
		Eventually(isGone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}})).Should(BeTrue(),
			"the running VMI that carried the fast path is stopped")
		for name, spec := range original {
			Eventually(func() string { return specJSON(ns, name) }).Should(Equal(spec), "VM %s unwired byte for byte", name)
		}
		Eventually(objectEventReasons(ns, "VirtualMachine", "db-0")).Should(ContainElement("Warning/" + v1alpha1.ReasonRevoked))
		Expect(objectEventReasons(ns, "VirtualMachine", "db-1")()).NotTo(ContainElement("Warning/"+v1alpha1.ReasonRevoked), "a stopped VM is not restarted")

		By("a VMI that starts without the fast path afterwards is left alone")
		createVMI(ns, vmi{name: "db-0", node: "node-rev"})
		Consistently(isGone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}}), 2*time.Second).Should(BeFalse())

		By("the admin admitting the namespace again: the VMs are wired again")
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["team"] = ns
		Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		Eventually(vmOwner(ns, "db-0")).Should(Equal("link"))
		Eventually(conditionOf(ns, "link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
	})

	It("keeps a used network's bridge, restarts running VMs still on an old bridge, and revokes them when the network is deleted", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		original := specJSON(ns, "db-0")
		old := createNetwork("old-"+ns, v1alpha1.FastPathNetworkSpec{Bridge: "fp-old"})
		moved := createNetwork("new-"+ns, v1alpha1.FastPathNetworkSpec{Bridge: "fp-new"})
		newAttachment(ns, "link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
			NetworkRef: &v1alpha1.NetworkReference{Name: old}, Network: network(uniqueSubnet())})
		Eventually(vmOwner(ns, "db-0")).Should(Equal("link"))
		Eventually(func() string { return getAttachment(ns, "link").Status.Bridge }).Should(Equal("fp-old"))
		Expect(getAttachment(ns, "link").Status.Network).To(Equal(old))
		Eventually(inUse(old)).Should(BeTrue())
		createVMI(ns, vmi{name: "db-0", node: "node-move", wired: true, attachment: "link"})

		By("the admin changing the bridge of the network in use: refused")
		Expect(setBridge(old, "fp-other")).To(MatchError(ContainSubstring(
			"spec.bridge cannot change while FastPathAttachments use the network (status.inUse)")))

		By("the attachment moving to another network: the running VMI on the old bridge restarts, still wired")
		updateAttachment(ns, "link", func(att *v1alpha1.FastPathAttachment) { att.Spec.NetworkRef.Name = moved })
		Eventually(isGone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}})).Should(BeTrue(),
			"the running VMI on the old bridge is stopped")
		Eventually(objectEventReasons(ns, "VirtualMachine", "db-0")).Should(ContainElement("Warning/" + v1alpha1.ReasonRevoked))
		Expect(vmOwner(ns, "db-0")()).To(Equal("link"), "the VM stays wired: it restarts onto the new bridge")
		Eventually(func() string { return getAttachment(ns, "link").Status.Bridge }).Should(Equal("fp-new"))
		Eventually(func() (string, error) { n, err := getNAD(ns, "link"); return n.Spec.Config, err }).Should(ContainSubstring(`"bridge":"fp-new"`))
		Eventually(inUse(old)).Should(BeFalse())
		Eventually(inUse(moved)).Should(BeTrue())
		Expect(setBridge(old, "fp-other")).To(Succeed(), "an unused network's bridge may change")

		By("a VMI that starts on the new bridge is left alone")
		createVMI(ns, vmi{name: "db-0", node: "node-move", wired: true, attachment: "link"})
		Consistently(isGone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}}), 2*time.Second).Should(BeFalse())

		By("the admin deleting the network")
		Expect(env.Client.Delete(ctx, &v1alpha1.FastPathNetwork{ObjectMeta: metav1.ObjectMeta{Name: moved}})).To(Succeed())
		Eventually(isGone(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-0"}})).Should(BeTrue(),
			"the running VMI on the deleted network's bridge is stopped")
		Eventually(func() string { return specJSON(ns, "db-0") }).Should(Equal(original), "the VM is unwired byte for byte")
		Eventually(conditionOf(ns, "link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNetworkRefused))
		Expect(getAttachment(ns, "link").Status.Bridge).To(BeEmpty())
		Eventually(isGone(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "link"}})).Should(BeTrue())
	})

	It("refuses an attachment on a network outside its namespace's reach, naming the field, and follows the admin's changes", func() {
		ns := newNamespace()
		tenant, _ := tenantClient(ns)
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		net := createNetwork("team-"+ns, v1alpha1.FastPathNetworkSpec{
			Bridge: "fp-team", MTU: &v1alpha1.MTURange{Max: ptr(int32(9000))},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": ns}},
		})
		Eventually(func() error {
			return tenant.Create(ctx, &v1alpha1.FastPathAttachment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-link"},
				Spec: v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"),
					NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(uniqueSubnet())},
			})
		}).Should(Succeed())

		Eventually(conditionOf(ns, "db-link", v1alpha1.ReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonInvalidSpec))
		Expect(conditionMessage(ns, "db-link", v1alpha1.ReadyCondition)).To(And(ContainSubstring("spec.networkRef"), ContainSubstring(net)))
		Expect(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonNetworkRefused))
		Eventually(eventReasons(ns, "db-link")).Should(ContainElements("Warning/"+v1alpha1.ReasonInvalidSpec, "Warning/"+v1alpha1.ReasonNetworkRefused))
		_, err := getNAD(ns, "db-link")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused attachment has no NAD: %v", err)

		By("the admin admitting the namespace")
		nsObj := &corev1.Namespace{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["team"] = ns
		Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		nad, err := getNAD(ns, "db-link")
		Expect(err).NotTo(HaveOccurred())
		Expect(nad.Spec.Config).To(And(ContainSubstring(`"bridge":"fp-team"`), ContainSubstring(`"mtu":9000`)))

		By("an MTU outside the network's bounds: refused naming spec.network.mtu, and the NAD goes")
		Eventually(func() error {
			a := &v1alpha1.FastPathAttachment{}
			if err := tenant.Get(ctx, types.NamespacedName{Namespace: ns, Name: "db-link"}, a); err != nil {
				return err
			}
			a.Spec.Network.MTU = ptr(int32(65000))
			return tenant.Update(ctx, a)
		}).Should(Succeed())
		Eventually(conditionOf(ns, "db-link", v1alpha1.ReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonInvalidSpec))
		Expect(conditionMessage(ns, "db-link", v1alpha1.ReadyCondition)).To(ContainSubstring("spec.network.mtu 65000"))
		Eventually(isGone(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-link"}})).Should(BeTrue())

		By("a network that does not exist")
		updateAttachment(ns, "db-link", func(a *v1alpha1.FastPathAttachment) {
			a.Spec.Network.MTU = nil
			a.Spec.NetworkRef.Name = "no-such-network"
		})
		Eventually(func() string { return getAttachment(ns, "db-link").Status.Conditions[0].Message }).Should(Not(BeEmpty()))
		Eventually(func() string {
			a := getAttachment(ns, "db-link")
			for _, c := range a.Status.Conditions {
				if c.Type == v1alpha1.ReadyCondition && c.ObservedGeneration == a.Generation {
					return c.Message
				}
			}
			return ""
		}).Should(ContainSubstring("spec.networkRef.name: FastPathNetwork no-such-network does not exist"))
	})
	It("refuses a subnet overlapping an earlier attachment's on the same network, in any namespace, naming it, until that one goes", func() {
		first, second, outsider := newNamespace(), newNamespace(), newNamespace()
		label := "subnets-" + first
		for _, ns := range []string{first, second} {
			nsObj := &corev1.Namespace{}
			Expect(env.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj)).To(Succeed())
			nsObj.Labels[label] = "yes"
			Expect(env.Client.Update(ctx, nsObj)).To(Succeed())
		}
		net := createNetwork(label, v1alpha1.FastPathNetworkSpec{
			Bridge: "fp-subnets", NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
		})
		on := func(subnet string) v1alpha1.FastPathAttachmentSpec {
			return v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), NetworkRef: &v1alpha1.NetworkReference{Name: net}, Network: network(subnet)}
		}

		By("a namespace the network does not admit holds no subnet, even first")
		newAttachment(outsider, "squat", on("10.30.0.0/16"))
		Eventually(conditionOf(outsider, "squat", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonNetworkRefused))

		By("the first attachment keeps its subnet")
		old := newAttachment(first, "z-old", on("10.30.0.0/24"))
		Eventually(conditionOf(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		// creationTimestamp has one-second resolution and the later
		// attachment has the earlier name: wait until the API server's
		// second (this host's clock) has moved past z-old's, so that the
		// test fails if the name rather than the age decides.
		Eventually(func() time.Time { return time.Now().Truncate(time.Second) }).Should(BeTemporally(">", old.CreationTimestamp.Time))

		By("a later attachment in another namespace, overlapping it, is refused naming both")
		newAttachment(second, "a-new", on("10.30.0.128/25"))
		Eventually(conditionOf(second, "a-new", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonSubnetConflict))
		Expect(conditionOf(second, "a-new", v1alpha1.ReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonInvalidSpec))
		Expect(conditionMessage(second, "a-new", v1alpha1.NetworkAttachmentReadyCondition)).To(And(
			ContainSubstring("spec.network.ipam.subnet 10.30.0.128/25"), ContainSubstring("subnet 10.30.0.0/24"),
			ContainSubstring("FastPathAttachment "+first+"/z-old"), ContainSubstring("FastPathNetwork "+net)))
		Eventually(eventReasons(second, "a-new")).Should(ContainElement("Warning/" + v1alpha1.ReasonSubnetConflict))
		_, err := getNAD(second, "a-new")
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused attachment has no NAD: %v", err)
		Expect(conditionOf(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition)()).To(Equal("True/" + v1alpha1.ReasonNADCreated))

		By("a disjoint subnet on the network, and the same subnet on another network, are accepted")
		newAttachment(second, "disjoint", on("10.30.1.0/24"))
		Eventually(conditionOf(second, "disjoint", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		newAttachment(second, "elsewhere", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network("10.30.0.0/24")})
		Eventually(conditionOf(second, "elsewhere", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))

		By("an older attachment changing its subnet onto one a later attachment holds is refused, and the holder keeps it")
		Eventually(func(g Gomega) {
			got := &v1alpha1.FastPathAttachment{}
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: second, Name: "disjoint"}, got)).To(Succeed())
			g.Expect(got.Status.Subnet).To(Equal("10.30.1.0/24"))
		}).Should(Succeed())
		setSubnet := func(ns, name, subnet string) {
			Eventually(func() error {
				got := &v1alpha1.FastPathAttachment{}
				if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
					return err
				}
				got.Spec.Network.IPAM.Subnet = subnet
				return env.Client.Update(ctx, got)
			}).Should(Succeed())
		}
		setSubnet(first, "z-old", "10.30.1.0/25")
		Eventually(conditionOf(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonSubnetConflict))
		Expect(conditionMessage(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition)).To(And(
			ContainSubstring("FastPathAttachment "+second+"/disjoint"), ContainSubstring("which holds it on")))
		Consistently(conditionOf(second, "disjoint", v1alpha1.NetworkAttachmentReadyCondition), 3*time.Second).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		_, err = getNAD(second, "disjoint")
		Expect(err).NotTo(HaveOccurred(), "the holder keeps its NAD")

		By("its old subnet, released by the move, went to the later attachment that asked for it; coming back, the older one is refused")
		Eventually(conditionOf(second, "a-new", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		setSubnet(first, "z-old", "10.30.0.0/24")
		Eventually(func() string { return conditionMessage(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition) }).Should(And(
			ContainSubstring("FastPathAttachment "+second+"/a-new"), ContainSubstring("which holds it on")))
		Expect(conditionOf(first, "z-old", v1alpha1.NetworkAttachmentReadyCondition)()).To(Equal("False/" + v1alpha1.ReasonSubnetConflict))
		Consistently(conditionOf(second, "a-new", v1alpha1.NetworkAttachmentReadyCondition), 3*time.Second).Should(Equal("True/" + v1alpha1.ReasonNADCreated))

		By("the older attachment going changes nothing for the holder")
		Expect(env.Client.Delete(ctx, old)).To(Succeed())
		Consistently(conditionOf(second, "a-new", v1alpha1.NetworkAttachmentReadyCondition), 2*time.Second).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
	})
})

// setBridge changes a FastPathNetwork's spec.bridge as an admin would.
func setBridge(name, bridge string) error {
	for {
		net := &v1alpha1.FastPathNetwork{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, net); err != nil {
			return err
		}
		net.Spec.Bridge = bridge
		if err := env.Client.Update(ctx, net); !apierrors.IsConflict(err) {
			return err
		}
	}
}

// inUse returns a network's status.inUse.
func inUse(name string) func() bool {
	return func() bool {
		net := &v1alpha1.FastPathNetwork{}
		Expect(env.Client.Get(ctx, types.NamespacedName{Name: name}, net)).To(Succeed())
		return net.Status.InUse
	}
}
