package attachment_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// templateAnnotation returns a VM template annotation, or "<absent>".
func templateAnnotation(ns, name, key string) string {
	GinkgoHelper()
	v, found, err := unstructured.NestedString(getVM(ns, name).Object, "spec", "template", "metadata", "annotations", key)
	Expect(err).NotTo(HaveOccurred())
	if !found {
		return "<absent>"
	}
	return v
}

// The migration of VMs an earlier Fastpath wired with the hook sidecar
// annotation is tested in internal/vm/wiring (legacyWire).
var _ = Describe("The network binding plugin", Serial, func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		SetDefaultConsistentlyDuration(quiet)
		SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
	})

	It("wires no VM while the KubeVirt CR does not register it, then wires through it with no hook annotation", func() {
		ns := newNamespace()
		Expect(kubevirtcr.Unregister(ctx, env.Client, kubevirtCR, wiring.DefaultBinding, wiring.DefaultMacvtapBinding)).To(Succeed())
		DeferCleanup(registerBindingPlugins)

		vm := createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		original := specJSON(ns, "db-0")
		rv := resourceVersions(vm)
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})

		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonBindingNotRegistered))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(Equal(
			`the network binding plugin "fastpath" is not registered: KubeVirt kubevirt/kubevirt has no spec.configuration.network.binding.fastpath; ` +
				"no VM is wired until it is (docs/install.md#the-binding-plugin)"))
		Eventually(eventReasons(ns, "db-link")).Should(ContainElement("Warning/" + v1alpha1.ReasonBindingNotRegistered))
		Consistently(func() []string { return resourceVersions(vm) }).Should(Equal(rv), "the VM is not touched")
		Expect(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)()).To(Equal("True/"+v1alpha1.ReasonNADCreated),
			"the NetworkAttachmentDefinition does not wait for the plugin")

		By("the admin registering the plugin: the watch on the KubeVirt CR wires the VM")
		registerBindingPlugins()
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(Equal(`1 of 1 selected VMs wired through the network binding plugin "fastpath"`))
		Expect(templatePart(ns, "db-0", "spec", "domain", "devices", "interfaces")).To(ContainSubstring(
			`{"binding":{"name":"fastpath"},"model":"virtio","name":"fp-db-link"}`))
		Expect(templateAnnotation(ns, "db-0", wiring.HookSidecarsAnnotation)).To(Equal("[]"), "the user's value, untouched")

		By("a plugin registered with the wrong domainAttachmentType")
		Expect(kubevirtcr.Register(ctx, env.Client, kubevirtCR, map[string]kubevirtv1.InterfaceBindingPlugin{
			wiring.DefaultBinding: {SidecarImage: suiteHookImage, DomainAttachmentType: kubevirtv1.Tap}})).To(Succeed())
		createVM(ns, "db-1", minimalVM, map[string]string{"app": "db"})
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonBindingNotRegistered))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(ContainSubstring(
			`spec.configuration.network.binding.fastpath.domainAttachmentType is "tap", want "managedTap"`))
		Expect(vmOwner(ns, "db-1")()).To(BeEmpty())
		Expect(vmOwner(ns, "db-0")()).To(Equal("db-link"), "wired VMs stay wired")
		registerBindingPlugins()
		Eventually(vmOwner(ns, "db-1")).Should(Equal("db-link"))

		By("deleting the attachment: the VM spec is back byte for byte")
		att := getAttachment(ns, "db-link")
		Expect(env.Client.Delete(ctx, att)).To(Succeed())
		Eventually(isGone(att)).Should(BeTrue())
		Expect(specJSON(ns, "db-0")).To(Equal(original))
	})

	It("warns while the KubeVirt CR enables the Sidecar feature gate", func() {
		ns := newNamespace()
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		Eventually(conditionOf(ns, "db-link", v1alpha1.SidecarGateOffCondition)).Should(Equal("True/" + v1alpha1.ReasonSidecarGateOff))

		gates := func(gates ...any) {
			GinkgoHelper()
			kv := &unstructured.Unstructured{}
			kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
			Expect(env.Client.Get(ctx, kubevirtCR, kv)).To(Succeed())
			if gates == nil {
				unstructured.RemoveNestedField(kv.Object, "spec", "configuration", "developerConfiguration")
			} else {
				Expect(unstructured.SetNestedSlice(kv.Object, gates, "spec", "configuration", "developerConfiguration", "featureGates")).To(Succeed())
			}
			Expect(env.Client.Update(ctx, kv)).To(Succeed())
		}
		gates("Snapshot", kubevirtcr.SidecarFeatureGate)
		DeferCleanup(func() { gates() })
		Eventually(conditionOf(ns, "db-link", v1alpha1.SidecarGateOffCondition)).Should(Equal("False/" + v1alpha1.ReasonSidecarGateOn))
		Expect(conditionMessage(ns, "db-link", v1alpha1.SidecarGateOffCondition)).To(HavePrefix(
			"KubeVirt kubevirt/kubevirt lists the feature gate Sidecar in spec.configuration.developerConfiguration.featureGates: " +
				"any user who may create a VirtualMachine may run any image as a sidecar in its virt-launcher Pod"))
		Eventually(eventReasons(ns, "db-link")).Should(ContainElement("Warning/" + v1alpha1.ReasonSidecarGateOn))
		Expect(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)()).To(Equal("True/"+v1alpha1.ReasonNADCreated),
			"a warning only: nothing else waits for it")

		gates("Snapshot")
		Eventually(conditionOf(ns, "db-link", v1alpha1.SidecarGateOffCondition)).Should(Equal("True/" + v1alpha1.ReasonSidecarGateOff))
	})

	It("asks for a restart of a VMI still running an earlier Fastpath's bridge binding", func() {
		ns := newNamespace()
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		createVMI(ns, vmi{name: "db-0", node: "node-u-" + ns, wired: true, bridgeBinding: true, attachment: "db-link", mac: "02:fa:00:00:00:07", ip: "10.250.0.7"})
		Eventually(func() string { return vmStatus(ns, "db-link", "db-0")().Message }).Should(Equal(
			`restart the VM to apply the fast path: the running VMI lacks the network binding plugin "fastpath" on interface fp-db-link`))
		Expect(vmStatus(ns, "db-link", "db-0")().RestartRequired).To(BeTrue())
	})

	It("refuses vsock mode Sibling without spec.network, whose binding carries the hook", func() {
		ns := newNamespace()
		att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sib"}, Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: selector("db"),
			VSOCK:      &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}}}}
		Expect(env.Client.Create(ctx, att)).To(MatchError(And(ContainSubstring("spec.vsock.mode"),
			ContainSubstring("spec.vsock.mode Sibling needs spec.network"))))
		att.Spec.VSOCK.Mode = v1alpha1.VSOCKModeRelay
		Expect(env.Client.Create(ctx, att)).To(Succeed(), "mode Relay uses KubeVirt's own vsock device")
	})
})
