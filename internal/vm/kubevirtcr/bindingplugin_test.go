package kubevirtcr

import (
	"encoding/json"
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var names = Names{Bridge: "fastpath", Macvtap: "fastpath-macvtap"}

// kubevirtCR is a KubeVirt CR whose spec.configuration.network.binding is
// the given JSON object ("" for no network section).
func kubevirtCR(t *testing.T, binding string) unstructured.Unstructured {
	t.Helper()
	spec := `{"configuration":{"developerConfiguration":{"useEmulation":true}}}`
	if binding != "" {
		spec = `{"configuration":{"developerConfiguration":{"useEmulation":true},"network":{"binding":` + binding + `}}}`
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"namespace":"kubevirt","name":"kubevirt"},"spec":`+spec+`}`), &obj); err != nil {
		t.Fatal(err)
	}
	return unstructured.Unstructured{Object: obj}
}

func TestPlugins(t *testing.T) {
	g := gomega.NewWithT(t)
	p, err := Plugins(names, "registry.example.com/fastpath-domain-hook:1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(p).To(gomega.HaveLen(2))
	g.Expect(p["fastpath"].DomainAttachmentType).To(gomega.Equal(kubevirtv1.ManagedTap))
	g.Expect(p["fastpath-macvtap"].DomainAttachmentType).To(gomega.Equal(kubevirtv1.Tap))
	for _, n := range []string{"fastpath", "fastpath-macvtap"} {
		g.Expect(p[n].SidecarImage).To(gomega.Equal("registry.example.com/fastpath-domain-hook:1"))
		g.Expect(p[n].ComputeResourceOverhead.Requests.Memory().String()).To(gomega.Equal("40Mi"))
	}
	b, err := json.Marshal(p["fastpath"])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(b)).To(gomega.Equal(`{"sidecarImage":"registry.example.com/fastpath-domain-hook:1","domainAttachmentType":"managedTap","computeResourceOverhead":{"requests":{"memory":"40Mi"}}}`))

	_, err = Plugins(names, "")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("--domain-hook-image")))
	_, err = Plugins(Names{Bridge: "x", Macvtap: "x"}, "img")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("two different")))
}

func TestCheck(t *testing.T) {
	g := gomega.NewWithT(t)
	registered, err := Plugins(names, "img")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	both, err := json.Marshal(registered)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	g.Expect(Check([]unstructured.Unstructured{kubevirtCR(t, string(both))}, names, "fastpath")).To(gomega.Succeed())
	g.Expect(Check([]unstructured.Unstructured{kubevirtCR(t, string(both))}, names, "fastpath-macvtap")).To(gomega.Succeed())

	for _, tc := range []struct{ name, binding, plugin, want string }{
		{"no KubeVirt CR", "-", "fastpath", "the cluster has no KubeVirt CR"},
		{"no network section", "", "fastpath", "KubeVirt kubevirt/kubevirt has no spec.configuration.network.binding.fastpath"},
		{"another plugin only", `{"passt":{"sidecarImage":"p"}}`, "fastpath", "has no spec.configuration.network.binding.fastpath"},
		{"no sidecar", `{"fastpath":{"domainAttachmentType":"managedTap"}}`, "fastpath", "spec.configuration.network.binding.fastpath has no sidecarImage"},
		{"wrong attachment type", `{"fastpath":{"sidecarImage":"img","domainAttachmentType":"tap"}}`, "fastpath",
			`spec.configuration.network.binding.fastpath.domainAttachmentType is "tap", want "managedTap"`},
		{"macvtap needs tap", `{"fastpath-macvtap":{"sidecarImage":"img","domainAttachmentType":"managedTap"}}`, "fastpath-macvtap",
			`.domainAttachmentType is "managedTap", want "tap"`},
		{"not an object", `{"fastpath":"yes"}`, "fastpath", "is not a binding plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			var kvs []unstructured.Unstructured
			if tc.binding != "-" {
				kvs = append(kvs, kubevirtCR(t, tc.binding))
			}
			err := Check(kvs, names, tc.plugin)
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
			g.Expect(err.Error()).To(gomega.ContainSubstring(tc.plugin))
		})
	}
}

func TestRegistered(t *testing.T) {
	g := gomega.NewWithT(t)
	plugins, err := Plugins(names, "img")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	b, err := json.Marshal(plugins)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	kv := kubevirtCR(t, string(b))
	g.Expect(Registered(&kv, plugins)).To(gomega.BeTrue())
	other, err := Plugins(names, "img2")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(Registered(&kv, other)).To(gomega.BeFalse(), "a new image is a change")
	empty := kubevirtCR(t, "")
	g.Expect(Registered(&empty, plugins)).To(gomega.BeFalse())
	g.Expect(SortedNames(plugins)).To(gomega.Equal([]string{"fastpath", "fastpath-macvtap"}))
}

// TestUnregisterPatch: Unregister's patch removes only our entries, and the
// maps Register created for them when nothing else is in them, so that a CR
// that had no network section before has none after.
func TestUnregisterPatch(t *testing.T) {
	const ours = `"fastpath":{"sidecarImage":"img"},"fastpath-macvtap":{"sidecarImage":"img"}`
	for _, tc := range []struct {
		name string
		// configuration is the CR's spec.configuration (JSON), "" for none.
		configuration string
		// patch is the merge patch, "" for none.
		patch string
	}{
		{name: "no configuration", configuration: "", patch: ""},
		{name: "no network", configuration: `{"developerConfiguration":{"useEmulation":true}}`, patch: ""},
		{name: "another plugin only", configuration: `{"network":{"binding":{"passt":{"sidecarImage":"p"}}}}`, patch: ""},
		{name: "empty binding", configuration: `{"network":{"binding":{}}}`, patch: ""},
		{name: "ours beside another plugin",
			configuration: `{"network":{"binding":{` + ours + `,"passt":{"sidecarImage":"p"}}}}`,
			patch:         `{"spec":{"configuration":{"network":{"binding":{"fastpath":null,"fastpath-macvtap":null}}}}}`},
		{name: "one of ours beside another plugin",
			configuration: `{"network":{"binding":{"fastpath":{},"passt":{}}}}`,
			patch:         `{"spec":{"configuration":{"network":{"binding":{"fastpath":null}}}}}`},
		{name: "ours only, network has more",
			configuration: `{"network":{"binding":{` + ours + `},"defaultNetworkInterface":"bridge"}}`,
			patch:         `{"metadata":{"resourceVersion":"42"},"spec":{"configuration":{"network":{"binding":null}}}}`},
		{name: "ours only, configuration has more",
			configuration: `{"developerConfiguration":{"useEmulation":true},"network":{"binding":{` + ours + `}}}`,
			patch:         `{"metadata":{"resourceVersion":"42"},"spec":{"configuration":{"network":null}}}`},
		{name: "ours only, nothing else",
			configuration: `{"network":{"binding":{` + ours + `}}}`,
			patch:         `{"metadata":{"resourceVersion":"42"},"spec":{"configuration":null}}`},
		{name: "one of ours only",
			configuration: `{"developerConfiguration":{},"network":{"binding":{"fastpath-macvtap":{}}}}`,
			patch:         `{"metadata":{"resourceVersion":"42"},"spec":{"configuration":{"network":null}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			spec := `{"workloadUpdateStrategy":{}}`
			if tc.configuration != "" {
				spec = `{"workloadUpdateStrategy":{},"configuration":` + tc.configuration + `}`
			}
			var obj map[string]any
			g.Expect(json.Unmarshal([]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"namespace":"kubevirt","name":"kubevirt","resourceVersion":"42"},"spec":`+spec+`}`), &obj)).To(gomega.Succeed())
			kv := &unstructured.Unstructured{Object: obj}
			before := kv.DeepCopy()

			patch, err := unregisterPatch(kv, []string{names.Bridge, names.Macvtap})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(kv).To(gomega.Equal(before), "the CR read is not changed")
			if tc.patch == "" {
				g.Expect(patch).To(gomega.BeNil())
				return
			}
			g.Expect(string(patch)).To(gomega.Equal(tc.patch))
		})
	}

	g := gomega.NewWithT(t)
	_, err := unregisterPatch(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"configuration": map[string]any{"network": map[string]any{"binding": "x"}}}}},
		[]string{names.Bridge})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to read spec.configuration.network.binding")))
}

// TestUnregisterRestores applies Unregister's patch after Register's to a CR
// as a JSON merge patch (RFC 7386) would: the CR is as it was before, other
// plugins and fields included.
func TestUnregisterRestores(t *testing.T) {
	plugins, err := Plugins(names, "img")
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]string{
		"no configuration":   `{"workloadUpdateStrategy":{}}`,
		"no network":         `{"configuration":{"developerConfiguration":{"useEmulation":true}}}`,
		"empty network":      `{"configuration":{"network":{}}}`,
		"other network keys": `{"configuration":{"network":{"defaultNetworkInterface":"bridge"}}}`,
		"another plugin":     `{"configuration":{"network":{"binding":{"passt":{"sidecarImage":"p"}}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			var obj map[string]any
			g.Expect(json.Unmarshal([]byte(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt"},"spec":`+spec+`}`), &obj)).To(gomega.Succeed())
			original, err := json.Marshal(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())

			entries := map[string]any{}
			for n, p := range plugins {
				entries[n] = p
			}
			registerPatch, err := json.Marshal(nested(bindingPath, entries))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			registered := mergePatch(t, original, registerPatch)
			kv := &unstructured.Unstructured{}
			g.Expect(json.Unmarshal(registered, &kv.Object)).To(gomega.Succeed())
			g.Expect(Registered(kv, plugins)).To(gomega.BeTrue())

			patch, err := unregisterPatch(kv, []string{names.Bridge, names.Macvtap})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(patch).NotTo(gomega.BeNil())
			patch = withoutMetadata(t, patch)
			unregistered := mergePatch(t, registered, patch)
			if name == "empty network" {
				// An empty network map the user wrote goes with ours: KubeVirt
				// reads both alike.
				g.Expect(string(unregistered)).To(gomega.MatchJSON(`{"apiVersion":"kubevirt.io/v1","kind":"KubeVirt","metadata":{"name":"kubevirt"},"spec":{}}`))
				return
			}
			g.Expect(string(unregistered)).To(gomega.MatchJSON(string(original)))
			kv = &unstructured.Unstructured{}
			g.Expect(json.Unmarshal(unregistered, &kv.Object)).To(gomega.Succeed())
			g.Expect(unregisterPatch(kv, []string{names.Bridge, names.Macvtap})).To(gomega.BeNil(), "once removed, nothing to write")
		})
	}
}

// mergePatch applies patch to doc as RFC 7386 says.
func mergePatch(t *testing.T, doc, patch []byte) []byte {
	t.Helper()
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(mergeValue(d, p))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mergeValue(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergeValue(t[k], v)
	}
	return t
}

// withoutMetadata drops the resourceVersion precondition, which only the
// API server reads.
func withoutMetadata(t *testing.T, patch []byte) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		t.Fatal(err)
	}
	delete(p, "metadata")
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSidecarGateOn(t *testing.T) {
	g := gomega.NewWithT(t)
	kv := func(name string, gates ...any) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt"}}
		u.SetNamespace("kubevirt")
		u.SetName(name)
		if gates != nil {
			g.Expect(unstructured.SetNestedSlice(u.Object, gates, "spec", "configuration", "developerConfiguration", "featureGates")).To(gomega.Succeed())
		}
		return u
	}
	g.Expect(SidecarGateOn(nil)).To(gomega.BeEmpty())
	g.Expect(SidecarGateOn([]unstructured.Unstructured{kv("a"), kv("b", "Snapshot", "SidecarX")})).To(gomega.BeEmpty(), "a gate is matched whole")
	g.Expect(SidecarGateOn([]unstructured.Unstructured{kv("z", "Snapshot", "Sidecar"), kv("a", "Sidecar")})).To(gomega.Equal([]string{"kubevirt/a", "kubevirt/z"}))
}
