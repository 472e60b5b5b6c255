package samples_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func load(t *testing.T, path string) (*unstructured.Unstructured, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	expect := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "# expect: "); ok {
			expect = s
		}
	}
	obj := map[string]any{}
	NewWithT(t).Expect(yaml.Unmarshal(data, &obj)).To(Succeed(), path)
	return &unstructured.Unstructured{Object: obj}, expect
}

func TestValidSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "samples")
	g.Expect(err).NotTo(HaveOccurred())

	files, err := filepath.Glob("*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(files)).To(BeNumerically(">=", 4), "network, attachment, benchmark and two VMs")
	kinds := map[string]int{}
	for _, f := range files {
		obj, _ := load(t, f)
		obj.SetNamespace(ns)
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), f)
		kinds[obj.GetKind()]++
	}
	g.Expect(kinds).To(HaveKeyWithValue("FastPathNetwork", 1))
	g.Expect(kinds).To(HaveKeyWithValue("FastPathAttachment", 1))
	g.Expect(kinds).To(HaveKeyWithValue("FastPathBenchmark", 1))
	g.Expect(kinds).To(HaveKeyWithValue("VirtualMachine", 2))
}

func TestInvalidSamplesAreRejectedNamingTheField(t *testing.T) {
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "invalid")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	files, err := filepath.Glob("invalid/*.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(len(files)).To(BeNumerically(">=", 10))
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			g := NewWithT(t)
			obj, expect := load(t, f)
			g.Expect(expect).NotTo(BeEmpty(), "%s needs an '# expect: <field>' line", f)
			obj.SetNamespace(ns)
			err := env.Client.Create(ctx, obj)
			g.Expect(err).To(HaveOccurred(), "%s was accepted", f)
			g.Expect(err.Error()).To(ContainSubstring(expect))
			t.Logf("%s: %v", f, err)
		})
	}
}

// TestClusterSamplesAreAccepted applies cluster/, the Pod-mode benchmark of
// the real local cluster (make cluster; docs/demo.md), in its own namespace.
func TestClusterSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "cluster-samples")
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob("cluster/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string]int{}
	for _, f := range files {
		obj, _ := load(t, f)
		if obj.GetKind() == "FastPathNetwork" {
			obj.SetName(obj.GetName() + "-" + ns) // cluster-scoped
		} else {
			obj.SetNamespace(ns)
		}
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), f)
		kinds[obj.GetKind()]++
	}
	g.Expect(kinds).To(Equal(map[string]int{"FastPathNetwork": 1, "FastPathAttachment": 1, "FastPathBenchmark": 1}))
}

// TestVSOCKSampleIsThePlainAttachmentWithVSOCK applies vsock/ (in place of
// the plain attachment, as README.md says) and checks that it is the plain
// attachment plus spec.vsock, so that the two cannot drift apart.
func TestVSOCKSampleIsThePlainAttachmentWithVSOCK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "vsock-sample")
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob("vsock/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(1))
	withVSOCK, _ := load(t, files[0])
	plain, _ := load(t, "fastpath_v1alpha1_fastpathattachment.yaml")

	g.Expect(withVSOCK.GetName()).To(Equal(plain.GetName()), "it replaces the plain attachment")
	vsock, ok, err := unstructured.NestedMap(withVSOCK.Object, "spec", "vsock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "vsock/ has spec.vsock")
	g.Expect(vsock).To(HaveKey("services"))
	_, ok, _ = unstructured.NestedMap(plain.Object, "spec", "vsock")
	g.Expect(ok).To(BeFalse(), "the plain attachment needs no vsock prerequisite")
	without := withVSOCK.DeepCopy()
	unstructured.RemoveNestedField(without.Object, "spec", "vsock")
	g.Expect(without.Object).To(Equal(plain.Object), "vsock/'s attachment is the plain one plus spec.vsock")

	withVSOCK.SetNamespace(ns)
	g.Expect(env.Client.Create(ctx, withVSOCK)).To(Succeed())
}
