package bindingplugin_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/controllers/bindingplugin"
	vmbinding "github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
)

// newKubeVirtKey returns the key of a KubeVirt CR named kubevirtName in a
// namespace of the spec's own.
func newKubeVirtKey() types.NamespacedName {
	GinkgoHelper()
	ns, err := env.NewNamespace(ctx, "fpbp")
	Expect(err).NotTo(HaveOccurred())
	return types.NamespacedName{Namespace: ns, Name: kubevirtName}
}

// createKubeVirt creates the KubeVirt CR key with spec (JSON), as KubeVirt's
// install does, and deletes it when the spec ends.
func createKubeVirt(key types.NamespacedName, spec string) {
	GinkgoHelper()
	kv := &unstructured.Unstructured{}
	Expect(json.Unmarshal([]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","spec":`+spec+`}`), &kv.Object)).To(Succeed())
	kv.SetNamespace(key.Namespace)
	kv.SetName(key.Name)
	Expect(env.Client.Create(ctx, kv)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, kv))).To(Succeed())
	})
}

// getKubeVirt reads the KubeVirt CR key.
func getKubeVirt(key types.NamespacedName) *unstructured.Unstructured {
	GinkgoHelper()
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(vmbinding.KubeVirtGVK)
	Expect(env.Client.Get(ctx, key, kv)).To(Succeed())
	return kv
}

// registered reports whether the KubeVirt CR key carries the suite's plugins
// exactly.
func registered(key types.NamespacedName) func() bool {
	return func() bool { return vmbinding.Registered(getKubeVirt(key), plugins) }
}

// ourEntries returns which of the suite's plugin names the CR key has.
func ourEntries(key types.NamespacedName) func() []string {
	return func() []string {
		GinkgoHelper()
		binding, _, err := unstructured.NestedMap(getKubeVirt(key).Object, "spec", "configuration", "network", "binding")
		Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, n := range []string{names.Bridge, names.Macvtap} {
			if _, ok := binding[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
}

// specJSON returns the CR's spec as JSON.
func specJSON(key types.NamespacedName) func() string {
	return func() string {
		GinkgoHelper()
		b, err := json.Marshal(getKubeVirt(key).Object["spec"])
		Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
}

// resourceVersion returns the CR's resourceVersion: it changes with every write.
func resourceVersion(key types.NamespacedName) func() string {
	return func() string { return getKubeVirt(key).GetResourceVersion() }
}

// eventReasons lists type/reason of the Events about the CR key.
func eventReasons(key types.NamespacedName) func() []string {
	return func() []string {
		GinkgoHelper()
		events := &corev1.EventList{}
		Expect(env.Client.List(ctx, events, client.InNamespace(key.Namespace))).To(Succeed())
		var out []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "KubeVirt" && e.InvolvedObject.Name == key.Name {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}

// mergePatch patches the CR key as `kubectl patch --type merge` does.
func mergePatch(key types.NamespacedName, patch string) {
	GinkgoHelper()
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(vmbinding.KubeVirtGVK)
	kv.SetNamespace(key.Namespace)
	kv.SetName(key.Name)
	Expect(env.Client.Patch(ctx, kv, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// withOurs is spec (a JSON object without a network section) with the
// suite's plugins registered under spec.configuration.network.binding.
func withOurs(spec string) string {
	GinkgoHelper()
	var s map[string]any
	Expect(json.Unmarshal([]byte(spec), &s)).To(Succeed())
	entries := map[string]any{}
	for n, p := range plugins {
		entries[n] = p
	}
	Expect(unstructured.SetNestedField(s, runtimeJSON(entries), "configuration", "network", "binding")).To(Succeed())
	b, err := json.Marshal(s)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// runtimeJSON round-trips v through JSON, into the types unstructured holds.
func runtimeJSON(v any) map[string]any {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var out map[string]any
	Expect(json.Unmarshal(b, &out)).To(Succeed())
	return out
}

const (
	// userSpec is a KubeVirt CR's spec as its install writes it: no network section.
	userSpec = `{"configuration":{"developerConfiguration":{"featureGates":[]}},"workloadUpdateStrategy":{}}`
	// passtSpec has another binding plugin, which must stay.
	passtSpec = `{"configuration":{"network":{"binding":{"passt":{"sidecarImage":"quay.io/kubevirt/network-passt-binding:v1.5.0"}}}}}`
)

// The contract (docs/install.md#the-binding-plugin): the registrar writes
// both entries when the operator starts and when the KubeVirt CR is created,
// never when they are removed later, so that the chart's pre-delete hook
// (or an admin) removing them sticks while the operator still runs.
var _ = Describe("The binding plugin registrar", func() {
	It("registers both plugins when the KubeVirt CR is created while it runs, and keeps every other field", func() {
		key := newKubeVirtKey()
		startOperator(key)
		createKubeVirt(key, passtSpec)

		Eventually(registered(key)).Should(BeTrue())
		Expect(specJSON(key)()).To(MatchJSON(`{"configuration":{"network":{"binding":{
			"passt":{"sidecarImage":"quay.io/kubevirt/network-passt-binding:v1.5.0"},
			"fastpath":{"sidecarImage":"` + hookImage + `","domainAttachmentType":"managedTap","computeResourceOverhead":{"requests":{"memory":"40Mi"}}},
			"fastpath-macvtap":{"sidecarImage":"` + hookImage + `","domainAttachmentType":"tap","computeResourceOverhead":{"requests":{"memory":"40Mi"}}}}}}}`))
		Eventually(eventReasons(key)).Should(ConsistOf("Normal/" + bindingplugin.ReasonRegistered))
	})

	It("registers both plugins in a KubeVirt CR that exists when it starts, and rewrites an entry that differs", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, userSpec)
		startOperator(key)
		Eventually(registered(key)).Should(BeTrue())
		Expect(specJSON(key)()).To(MatchJSON(withOurs(userSpec)))

		By("an entry of an older image, in another CR, at the next start")
		other := newKubeVirtKey()
		createKubeVirt(other, `{"configuration":{"network":{"binding":{"fastpath":{"sidecarImage":"registry.example.com/old:1","domainAttachmentType":"managedTap"}}}}}`)
		startOperator(other)
		Eventually(registered(other)).Should(BeTrue())
		Expect(specJSON(other)()).To(MatchJSON(withOurs(`{}`)))
	})

	It("changes nothing at its start when both plugins are registered", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, withOurs(userSpec))
		rv := resourceVersion(key)()
		startOperator(key)
		Consistently(resourceVersion(key)).Should(Equal(rv))
		Expect(eventReasons(key)()).To(BeEmpty())
	})

	It("does not write back entries removed while it runs; its next start does", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, userSpec)
		stop := startOperator(key)
		Eventually(registered(key)).Should(BeTrue())

		By("the chart's pre-delete hook (Unregister): the CR is as it was before")
		Expect(vmbinding.Unregister(ctx, env.Client, key, names.Bridge, names.Macvtap)).To(Succeed())
		Expect(specJSON(key)()).To(MatchJSON(userSpec))
		Consistently(ourEntries(key)).Should(BeEmpty())

		By("another edit of the CR while it runs")
		mergePatch(key, `{"spec":{"configuration":{"developerConfiguration":{"featureGates":["Snapshot"]}}}}`)
		Consistently(ourEntries(key)).Should(BeEmpty())

		By("the operator's restart")
		stop()
		stop = startOperator(key)
		Eventually(registered(key)).Should(BeTrue())

		By("an admin removing them by hand, as docs/install.md says")
		mergePatch(key, `{"spec":{"configuration":{"network":{"binding":{"fastpath":null,"fastpath-macvtap":null}}}}}`)
		Consistently(ourEntries(key)).Should(BeEmpty())

		By("the next restart")
		stop()
		startOperator(key)
		Eventually(registered(key)).Should(BeTrue())
	})

	It("registers both plugins again when the KubeVirt CR is deleted and created again", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, userSpec)
		startOperator(key)
		Eventually(registered(key)).Should(BeTrue())
		Expect(vmbinding.Unregister(ctx, env.Client, key, names.Bridge, names.Macvtap)).To(Succeed())
		Consistently(ourEntries(key)).Should(BeEmpty())

		By("KubeVirt reinstalled")
		Expect(env.Client.Delete(ctx, getKubeVirt(key))).To(Succeed())
		Eventually(func() bool {
			err := env.Client.Get(ctx, key, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt"}})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		createKubeVirt(key, userSpec)
		Eventually(registered(key)).Should(BeTrue())
	})

	It("registers only in the KubeVirt CR it is told", func() {
		key := newKubeVirtKey()
		startOperator(key)
		other := types.NamespacedName{Namespace: key.Namespace, Name: "another"}
		createKubeVirt(other, userSpec)
		createKubeVirt(key, userSpec)
		Eventually(registered(key)).Should(BeTrue())
		Consistently(specJSON(other)).Should(MatchJSON(userSpec))
	})
})

// Unregister is what the chart's pre-delete hook runs; against the API
// server it removes only what is ours.
var _ = Describe("Unregister", func() {
	It("keeps other plugins and fields, writes nothing when nothing is ours, and ignores a missing CR", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, passtSpec)
		Expect(vmbinding.Register(ctx, env.Client, key, plugins)).To(Succeed())
		Expect(vmbinding.Unregister(ctx, env.Client, key, names.Bridge, names.Macvtap)).To(Succeed())
		Expect(specJSON(key)()).To(MatchJSON(passtSpec))

		rv := resourceVersion(key)()
		Expect(vmbinding.Unregister(ctx, env.Client, key, names.Bridge, names.Macvtap)).To(Succeed())
		Expect(resourceVersion(key)()).To(Equal(rv), "idempotent: no write")

		Expect(vmbinding.Unregister(ctx, env.Client, types.NamespacedName{Namespace: key.Namespace, Name: "absent"}, names.Bridge)).To(Succeed())
	})

	It("removes the network section Register created, and keeps one that has other fields", func() {
		key := newKubeVirtKey()
		createKubeVirt(key, `{"configuration":{"network":{"defaultNetworkInterface":"bridge"}}}`)
		Expect(vmbinding.Register(ctx, env.Client, key, plugins)).To(Succeed())
		Expect(vmbinding.Unregister(ctx, env.Client, key, names.Bridge, names.Macvtap)).To(Succeed())
		Expect(specJSON(key)()).To(MatchJSON(`{"configuration":{"network":{"defaultNetworkInterface":"bridge"}}}`))

		bare := newKubeVirtKey()
		createKubeVirt(bare, `{}`)
		Expect(vmbinding.Register(ctx, env.Client, bare, plugins)).To(Succeed())
		Expect(vmbinding.Unregister(ctx, env.Client, bare, names.Bridge, names.Macvtap)).To(Succeed())
		Expect(specJSON(bare)()).To(MatchJSON(`{}`))
	})
})
