package fastpath_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// TestChartUpgradeServesANewCRDField installs an older chart, one whose
// FastPathBenchmark CRD predates spec.compareTo, with helm into a real
// kube-apiserver (envtest), then helm upgrades it to this chart: the new field
// is served afterwards (before, the API server prunes it), and helm uninstall
// leaves the CRDs (helm.sh/resource-policy keep). With the CRDs in the chart's
// crds/ directory, as before issue 38, the upgrade kept the old schema.
func TestChartUpgradeServesANewCRDField(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := testenv.Start(testenv.Options{NoFastpathCRDs: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.KubeconfigFile(kubeconfig)).To(Succeed())
	run := func(args ...string) string {
		return helm(t, append(args, "--kubeconfig", kubeconfig)...)
	}

	old := olderChart(t)
	run("install", "fastpath", old, "--namespace", "fastpath-system", "--create-namespace")
	bench := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(`
apiVersion: fastpath.io/v1alpha1
kind: FastPathBenchmark
metadata: {name: `+name+`, namespace: default}
spec:
  attachmentRef: {name: db-link}
  mode: Pod
  client: {}
  server: {}
  compareTo: {benchmark: last-release}
`), &u.Object)).To(Succeed())
		return u
	}
	served := func(name string) bool {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(schema.GroupVersionKind{Group: "fastpath.io", Version: "v1alpha1", Kind: "FastPathBenchmark"})
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, got)).To(Succeed())
		_, found, err := unstructured.NestedMap(got.Object, "spec", "compareTo")
		g.Expect(err).NotTo(HaveOccurred())
		return found
	}
	g.Eventually(func() error { return env.Client.Create(ctx, bench("before")) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(served("before")).To(BeFalse(), "the older CRD prunes spec.compareTo")

	run("upgrade", "fastpath", ".", "--namespace", "fastpath-system")
	// The API server serves a new schema asynchronously after the CRD update.
	n := 0
	g.Eventually(func() bool {
		n++
		name := "after-" + string(rune('a'+n%26)) + strings.Repeat("x", n/26)
		g.Expect(env.Client.Create(ctx, bench(name))).To(Succeed())
		return served(name)
	}, 30*time.Second, 500*time.Millisecond).Should(BeTrue(), "helm upgrade did not update the FastPathBenchmark CRD")

	// --no-hooks: envtest runs no Jobs, so the pre-delete hooks would never finish.
	run("uninstall", "fastpath", "--namespace", "fastpath-system", "--no-hooks")
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	g.Expect(env.Client.List(ctx, crds)).To(Succeed())
	var names []string
	for _, c := range crds.Items {
		if c.Spec.Group == "fastpath.io" && c.DeletionTimestamp == nil {
			names = append(names, c.Name)
		}
	}
	g.Expect(names).To(ContainElement("fastpathbenchmarks.fastpath.io"), "helm uninstall deleted the CRDs (and every user object)")
	g.Expect(names).To(HaveLen(4))
	g.Expect(served("before")).To(BeFalse(), "the objects outlive the uninstall")
}

// olderChart copies this chart into a temporary directory with a
// FastPathBenchmark CRD as it was before spec.compareTo (commit 7026e55):
// without the field and without the CEL rule that names it.
func olderChart(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "fastpath")
	for _, sub := range []string{"", "templates", "files", "files/crds"} {
		g.Expect(os.MkdirAll(filepath.Join(dir, sub), 0o755)).To(Succeed())
		entries, err := os.ReadDir(filepath.Join(".", sub))
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), ".go") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(sub, e.Name()))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(filepath.Join(dir, sub, e.Name()), data, 0o644)).To(Succeed())
		}
	}
	path := filepath.Join(dir, "files", "crds", "fastpath.io_fastpathbenchmarks.yaml")
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	g.Expect(spec.Properties).To(HaveKey("compareTo"))
	delete(spec.Properties, "compareTo")
	var rules apiextensionsv1.ValidationRules
	for _, r := range spec.XValidations {
		if !strings.Contains(r.Rule, "compareTo") {
			rules = append(rules, r)
		}
	}
	spec.XValidations = rules
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	out, err := yaml.Marshal(crd)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(path, out, 0o644)).To(Succeed())
	return dir
}
