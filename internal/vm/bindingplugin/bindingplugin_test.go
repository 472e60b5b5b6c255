package bindingplugin

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
