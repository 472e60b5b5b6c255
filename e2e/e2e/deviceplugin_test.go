package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
)

// vmDevicePolicy is the chart's ValidatingAdmissionPolicyBinding that
// refuses VirtualMachines requesting the agent's devices unless
// fastpath-operator wired them (charts/fastpath/templates/admission.yaml).
const vmDevicePolicy = "fastpath-vm-device-requests"

// Issue 39, item 2, the second line of defence on the real cluster: the
// agent's device plugins check who holds their devices themselves
// (internal/node/deviceplugin, verifyLauncher), so a VirtualMachine the
// operator did not wire gets no macvtap device and no vhost-user socket even
// where admission let it through (a cluster whose admin removed or never
// installed the chart's policies). The spec sets the VM policy's binding to
// Audit for its duration, so that such a VM reaches kubelet, and sets it back
// to Deny, checked, before any other spec runs.
var _ = Describe("The device plugins' own check, with the VM admission policy set aside", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() || !env.KubeVirt() {
			notRun(NoKubeVirt + "; or the local stack, which runs neither kubelet's device plugins nor admission policies")
		}
		setBindingActions(ctx, vmDevicePolicy, admissionv1.Audit)
		DeferCleanup(func(ctx SpecContext) {
			setBindingActions(ctx, vmDevicePolicy, admissionv1.Deny)
			// Deny is in force again once a VM that needs it is refused
			// (the API server's policy cache follows the binding).
			probe := unwiredVM("dp-deny-probe", fastpathv1alpha1.SiblingResourceName)
			eventually(ctx, func(g Gomega) {
				err := env.Client().Create(ctx, probe, client.DryRunAll)
				g.Expect(err).To(MatchError(ContainSubstring(vmDevicePolicy)))
			}, time.Minute).Should(Succeed())
		}, NodeTimeout(2*time.Minute))
	}, NodeTimeout(2*time.Minute))

	It("refuses a macvtap device to the launcher of a VM the operator did not wire", func(ctx SpecContext) {
		c := env.Client()
		network := &fastpathv1alpha1.FastPathNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-dp-" + ns},
			Spec:       fastpathv1alpha1.FastPathNetworkSpec{Datapath: fastpathv1alpha1.DatapathMacvtap, Bridge: "fpdpm0"},
		}
		Expect(c.Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c.Delete(ctx, network))).To(Succeed()) })
		res := corev1.ResourceName(fastpathv1alpha1.MacvtapResourceDomain + "/" + network.Spec.Bridge)
		eventually(ctx, func(g Gomega) {
			nodes := &corev1.NodeList{}
			g.Expect(c.List(ctx, nodes)).To(Succeed())
			g.Expect(nodes.Items).To(ContainElement(HaveField("Status.Allocatable", HaveKey(res))), "no node offers %s yet", res)
		}, 2*time.Minute).Should(Succeed())

		vm := unwiredVM("dp-macvtap", res)
		createAdmitted(ctx, vm)
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, nil, vm.Name) }, NodeTimeout(4*time.Minute))

		// kubelet allocated a tap device, asked the plugin's
		// PreStartContainer, and reports its refusal on the launcher pod.
		ev := launcherEvent(ctx, vm.Name, "refused "+string(res)+" device tap")
		Expect(ev.Message).To(ContainSubstring("carries no wiring record"), "the refusal says why")
		pod := launcherPod(ctx, vm.Name)
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == "compute" {
				Expect(s.State.Running).To(BeNil(), "the compute container of %s runs with a refused macvtap device", pod.Name)
			}
		}
		AddReportEntry("refused by the macvtap device plugin", firstLine(ev.Message))
	})

	It("links no vhost-user socket into the launcher of a VM the operator did not wire for Sibling", func(ctx SpecContext) {
		c := env.Client()
		nodes := &corev1.NodeList{}
		Expect(c.List(ctx, nodes)).To(Succeed())
		offered := false
		for _, n := range nodes.Items {
			if q, ok := n.Status.Allocatable[fastpathv1alpha1.SiblingResourceName]; ok && !q.IsZero() {
				offered = true
			}
		}
		if !offered {
			notRun("no node offers " + fastpathv1alpha1.SiblingResourceName + ": the chart's vsock backend (agent.vsock.sibling) is off on this cluster")
		}
		vm := unwiredVM("dp-sibling", fastpathv1alpha1.SiblingResourceName)
		createAdmitted(ctx, vm)
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, nil, vm.Name) }, NodeTimeout(4*time.Minute))

		// A sibling slot holds no device node: the container starts, with
		// its socket directory left empty and a Warning saying why.
		ev := launcherEvent(ctx, vm.Name, "no vhost-user socket")
		Expect(ev.Reason).To(Equal(deviceplugin.EventSiblingSocketNotLinked))
		Expect(ev.Message).To(ContainSubstring("carries no wiring record"), "the Warning says why")
		eventually(ctx, func(g Gomega) {
			out, err := env.LauncherExec(ctx, nsKey(vm.Name), "ls -A /var/run/fastpath/vsock")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(strings.TrimSpace(out)).To(BeEmpty(), "a socket was linked into the launcher of unwired VM %s", vm.Name)
		}, 5*time.Minute).Should(Succeed())
		AddReportEntry("refused by the sibling device plugin", firstLine(ev.Message))
	})
})

// unwiredVM is newVM running, with a limit of one res, no attachment
// selecting it (label app=unwired-<name>) and no access credentials (their
// Secret comes with the samples, which this spec does not apply).
func unwiredVM(name string, res corev1.ResourceName) *kubevirtv1.VirtualMachine {
	vm := newVM(name, "unwired-"+name, "")
	vm.Spec.Template.Spec.AccessCredentials = nil
	always := kubevirtv1.RunStrategyAlways
	vm.Spec.RunStrategy = &always
	vm.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{res: resource.MustParse("1")}
	return vm
}

// createAdmitted creates vm as the suite's admin, retrying while the VM
// policy still refuses it (its binding was just set to Audit).
func createAdmitted(ctx SpecContext, vm *kubevirtv1.VirtualMachine) {
	GinkgoHelper()
	eventually(ctx, func() error { return env.Client().Create(ctx, vm.DeepCopy()) }, time.Minute).Should(Succeed())
}

// setBindingActions sets the validationActions of the
// ValidatingAdmissionPolicyBinding name.
func setBindingActions(ctx SpecContext, name string, a admissionv1.ValidationAction) {
	GinkgoHelper()
	eventually(ctx, func(g Gomega) {
		b := &admissionv1.ValidatingAdmissionPolicyBinding{}
		g.Expect(env.Client().Get(ctx, client.ObjectKey{Name: name}, b)).To(Succeed())
		b.Spec.ValidationActions = []admissionv1.ValidationAction{a}
		g.Expect(env.Client().Update(ctx, b)).To(Succeed())
	}, time.Minute).Should(Succeed())
}

// launcherPod returns the virt-launcher pod of VM name's VMI.
func launcherPod(ctx SpecContext, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{}
	eventually(ctx, func(g Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(env.Client().Get(ctx, nsKey(name), vmi)).To(Succeed())
		pods := &corev1.PodList{}
		g.Expect(env.Client().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		*pod = pods.Items[0]
	}, 3*time.Minute).Should(Succeed())
	return pod
}

// launcherEvent waits for an Event on VM name's virt-launcher pod whose
// message contains want, and returns it.
func launcherEvent(ctx SpecContext, name, want string) corev1.Event {
	GinkgoHelper()
	pod := launcherPod(ctx, name)
	var ev corev1.Event
	eventually(ctx, func(g Gomega) {
		evs := &corev1.EventList{}
		g.Expect(env.Client().List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		var seen []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != pod.Name {
				continue
			}
			if strings.Contains(e.Message, want) {
				ev = e
				return
			}
			seen = append(seen, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, firstLine(e.Message)))
		}
		g.Expect(seen).To(ContainElement(ContainSubstring(want)), "no Event on pod %s says %q", pod.Name, want)
	}, 4*time.Minute).Should(Succeed())
	return ev
}
