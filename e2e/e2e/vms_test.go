package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// The VMs and attachments of the specs that make their own (two nodes,
// upgrade), in the suite's namespace.

// newVM is the first sample VM renamed, labelled app=<app>, halted
// (started once the attachment has wired it), pinned to node unless "".
func newVM(name, app, node string) *kubevirtv1.VirtualMachine {
	vm := objs.VMs[0].DeepCopy()
	vm.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}}
	vm.Spec.Template.ObjectMeta.Labels = map[string]string{"app": app}
	halted := kubevirtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	vm.Spec.Running = nil
	if node != "" {
		vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	if kb := vm.Spec.Template.Spec.Domain.Firmware; kb != nil && kb.KernelBoot != nil {
		kb.KernelBoot.KernelArgs = strings.ReplaceAll(kb.KernelBoot.KernelArgs, "fp.vm="+objs.VMs[0].Name, "fp.vm="+name)
	}
	for i, v := range vm.Spec.Template.Spec.Volumes {
		if v.CloudInitNoCloud != nil {
			vm.Spec.Template.Spec.Volumes[i].CloudInitNoCloud.UserData = strings.ReplaceAll(v.CloudInitNoCloud.UserData, objs.VMs[0].Name, name)
		}
	}
	return vm
}

// newAttachment is the sample attachment renamed, selecting app=<app> on
// network, with subnet and placement, without vsock.
func newAttachment(name, app, network, subnet string, placement fastpathv1alpha1.Placement) *fastpathv1alpha1.FastPathAttachment {
	a := objs.Attachment.DeepCopy()
	a.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns}
	a.Spec.VMSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	a.Spec.Placement = placement
	a.Spec.NetworkRef = &fastpathv1alpha1.NetworkReference{Name: network}
	a.Spec.Network.IPAM.Subnet = subnet
	a.Spec.VSOCK = nil
	return a
}

func nsKey(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// setRunStrategy sets VM name's run strategy, retrying on conflicts.
func setRunStrategy(ctx SpecContext, name string, s kubevirtv1.VirtualMachineRunStrategy) {
	GinkgoHelper()
	eventually(ctx, func(g Gomega) {
		vm := &kubevirtv1.VirtualMachine{}
		g.Expect(env.Client().Get(ctx, nsKey(name), vm)).To(Succeed())
		vm.Spec.RunStrategy = &s
		g.Expect(env.Client().Update(ctx, vm)).To(Succeed())
	}, time.Minute).Should(Succeed())
}

// startWired creates the attachment and its halted VMs, waits until it
// has wired every VM, then starts them and waits until each runs.
func startWired(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, vms ...*kubevirtv1.VirtualMachine) {
	GinkgoHelper()
	c := env.Client()
	Expect(c.Create(ctx, a)).To(Succeed())
	for _, vm := range vms {
		Expect(c.Create(ctx, vm)).To(Succeed())
	}
	eventually(ctx, func(g Gomega) {
		got := &fastpathv1alpha1.FastPathAttachment{}
		g.Expect(c.Get(ctx, nsKey(a.Name), got)).To(Succeed())
		for _, vm := range vms {
			g.Expect(got.Status.VMs).To(ContainElement(And(HaveField("Name", vm.Name), HaveField("Wired", BeTrue()))))
		}
	}, 2*time.Minute).Should(Succeed())
	for _, vm := range vms {
		setRunStrategy(ctx, vm.Name, kubevirtv1.RunStrategyAlways)
	}
	for _, vm := range vms {
		eventually(ctx, func(g Gomega) {
			v := &kubevirtv1.VirtualMachineInstance{}
			g.Expect(c.Get(ctx, nsKey(vm.Name), v)).To(Succeed())
			g.Expect(v.Status.Phase).To(Equal(kubevirtv1.Running))
		}, 5*time.Minute).Should(Succeed())
	}
}

// removeVMs deletes the VMs (and the attachment, unless nil) and waits
// until their VMIs are gone.
func removeVMs(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, names ...string) {
	GinkgoHelper()
	c := env.Client()
	for _, n := range names {
		Expect(client.IgnoreNotFound(c.Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}))).To(Succeed())
	}
	if a != nil {
		Expect(client.IgnoreNotFound(c.Delete(ctx, a))).To(Succeed())
	}
	for _, n := range names {
		eventually(ctx, func(g Gomega) {
			err := c.Get(ctx, nsKey(n), &kubevirtv1.VirtualMachineInstance{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "VMI %s still there: %v", n, err)
		}, 3*time.Minute).Should(Succeed())
	}
}

// vmiDiagnosis is one line on VMI v for a failure message: its phase, its
// conditions and its launcher pods' containers (ready, state), so that the
// failure summary at the end of a CI log tells a guest that did not boot
// from a launcher container that stopped.
func vmiDiagnosis(ctx context.Context, v *kubevirtv1.VirtualMachineInstance) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s on %s; conditions", v.Status.Phase, v.Status.NodeName)
	for _, c := range v.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, "(%s)", c.Reason)
		}
	}
	pods := &corev1.PodList{}
	if err := env.Client().List(ctx, pods, client.InNamespace(v.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(v.UID)}); err != nil {
		return b.String() + "; launcher pods: " + err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "; pod %s %s:", p.Name, p.Status.Phase)
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			state := "waiting"
			switch {
			case cs.State.Running != nil:
				state = "running"
			case cs.State.Terminated != nil:
				state = fmt.Sprintf("exited %d (%s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason)
			case cs.State.Waiting != nil:
				state = "waiting (" + cs.State.Waiting.Reason + ")"
			}
			fmt.Fprintf(&b, " %s ready=%t %s restarts=%d", cs.Name, cs.Ready, state, cs.RestartCount)
		}
	}
	return b.String()
}

// vmiCondition reports whether VMI v has condition t True.
func vmiCondition(v *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) bool {
	for _, c := range v.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
