package attachment_test

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
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

// hookedVM is a VM body (see vmTemplates) whose template carries the user's
// own hooks.kubevirt.io/hookSidecars value.
func hookedVM(value string) string {
	GinkgoHelper()
	quoted, err := json.Marshal(value)
	Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"%%[1]s","labels":%%[2]s},
 "spec":{"runStrategy":"Halted","template":{"metadata":{"annotations":{"hooks.kubevirt.io/hookSidecars":%s,"team":"a"}},
  "spec":{"domain":{"devices":{}}}}}}`, quoted)
}

var _ = Describe("An operator with a domain hook image", Serial, func() {
	const hookImage = "registry.example.com/fastpath/fastpath-domain-hook:test"

	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		SetDefaultConsistentlyDuration(quiet)
		SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
		// This spec's operator has --domain-hook-image; the suite's gets its
		// own options back afterwards.
		stopManager()
		opts := suiteOptions()
		opts.DomainHookImage = hookImage
		stopManager = startManagerWith(env.Config, opts)
		DeferCleanup(func() {
			stopManager()
			stopManager = startManager(env.Config)
		})
	})

	It("appends its hook sidecar to every wired VM and restores the annotation byte for byte when the attachment goes", func() {
		ns := newNamespace()
		userHooks := "[\n  {\"args\": [\"--version\", \"v1alpha2\"], \"image\": \"registry.example.com/smbios-hook:v1\"}\n]"
		createVM(ns, "db-0", busyVM, map[string]string{"app": "db"})    // "[]"
		createVM(ns, "db-1", minimalVM, map[string]string{"app": "db"}) // no annotations at all
		createVM(ns, "db-2", hookedVM(userHooks), map[string]string{"app": "db"})
		original := map[string]string{}
		for _, n := range []string{"db-0", "db-1", "db-2"} {
			original[n] = specJSON(ns, n)
		}
		att := newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network("10.250.0.0/24")})

		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("True/" + v1alpha1.ReasonWired))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(Equal(
			"3 of 3 selected VMs wired, with the domain hook sidecar " + hookImage + " in hooks.kubevirt.io/hookSidecars"))
		entry := `{"args":["--version","v1alpha3"],"image":"` + hookImage + `"}`
		Expect(templateAnnotation(ns, "db-0", wiring.HookSidecarsAnnotation)).To(Equal("[" + entry + "]"))
		Expect(templateAnnotation(ns, "db-1", wiring.HookSidecarsAnnotation)).To(Equal("[" + entry + "]"))
		Expect(templateAnnotation(ns, "db-2", wiring.HookSidecarsAnnotation)).To(Equal(
			"[\n  {\"args\": [\"--version\", \"v1alpha2\"], \"image\": \"registry.example.com/smbios-hook:v1\"}," + entry + "\n]"))
		Expect(templateAnnotation(ns, "db-2", "team")).To(Equal("a"))

		By("a running VMI started before the hook was attached")
		createVMI(ns, vmi{name: "db-0", node: "node-h-" + ns, cid: ptr(uint32(3)), wired: true, attachment: "db-link", mac: "02:fa:00:00:00:03", ip: "10.250.0.3"})
		Eventually(func() string { return vmStatus(ns, "db-link", "db-0")().Message }).Should(Equal(
			"restart the VM to apply the fast path: the running VMI lacks domain hook sidecar " + hookImage))
		Expect(vmStatus(ns, "db-link", "db-0")().RestartRequired).To(BeTrue())

		By("a VM whose annotation is not a JSON list of hook sidecars")
		bad := createVM(ns, "db-3", hookedVM(`[{"image": "registry.example.com/smbios-hook:v1"}`), map[string]string{"app": "db"})
		badRV := resourceVersions(bad)
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonVMConflict))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(HavePrefix(
			`VM db-3: spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"] is not a JSON list of KubeVirt hook sidecars (`))
		Consistently(func() []string { return resourceVersions(bad) }).Should(Equal(badRV), "the user's VM is not touched")

		By("deleting the attachment")
		Expect(env.Client.Delete(ctx, att)).To(Succeed())
		Eventually(isGone(att)).Should(BeTrue())
		for name, spec := range original {
			Expect(specJSON(ns, name)).To(Equal(spec), "VM %s", name)
		}
		Expect(templateAnnotation(ns, "db-0", wiring.HookSidecarsAnnotation)).To(Equal("[]"))
		Expect(templateAnnotation(ns, "db-1", wiring.HookSidecarsAnnotation)).To(Equal("<absent>"))
		Expect(templateAnnotation(ns, "db-2", wiring.HookSidecarsAnnotation)).To(Equal(userHooks))
		Expect(resourceVersions(bad)).To(Equal(badRV))
	})
})
