package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The CR is what manifest-templator rendered, with useEmulation from the
// probe and Fastpath's feature gates added to (not replacing) its own.
func TestConfigureKubeVirtKeepsTheRenderedCR(t *testing.T) {
	g := NewWithT(t)
	p := filepath.Join(t.TempDir(), "kubevirt-cr.yaml")
	g.Expect(os.WriteFile(p, []byte(`---
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
spec:
  configuration:
    developerConfiguration:
      featureGates: [HotplugVolumes, VSOCK]
  imagePullPolicy: IfNotPresent
  infra:
    replicas: 1
`), 0o600)).To(Succeed())
	kv, err := readKubeVirtCR(p)
	g.Expect(err).NotTo(HaveOccurred())
	configureKubeVirt(kv, true)
	g.Expect(kv.Spec.Configuration.DeveloperConfiguration.UseEmulation).To(BeTrue())
	g.Expect(kv.Spec.Configuration.DeveloperConfiguration.FeatureGates).To(Equal([]string{"HotplugVolumes", "VSOCK"}), "no gate twice")
	g.Expect(string(kv.Spec.ImagePullPolicy)).To(Equal("IfNotPresent"), "local images are never pulled")
	g.Expect(*kv.Spec.Infra.Replicas).To(BeEquivalentTo(1))
	obsolete := kv.Spec.Configuration.ObsoleteCPUModels
	g.Expect(obsolete).NotTo(HaveKey("kvm64"), "TCG's host model: a migration target must be able to carry its label")
	g.Expect(obsolete).NotTo(HaveKey("kvm64-v1"))
	g.Expect(obsolete).To(HaveKey("qemu64"))
	g.Expect(obsolete).To(HaveKey("486-v1"))
	g.Expect(obsolete).To(HaveLen(2*(len(defaultObsoleteCPUModels)-1)), "the labeller's defaults, kvm64 aside")

	g.Expect(kv.Spec.CustomizeComponents.Patches).To(HaveLen(1))
	g.Expect(kv.Spec.CustomizeComponents.Patches[0].ResourceName).To(Equal("virt-api"))
	g.Expect(kv.Spec.CustomizeComponents.Patches[0].Patch).To(ContainSubstring(`"readinessProbe":{"timeoutSeconds":10}`))

	configureKubeVirt(kv, false)
	g.Expect(kv.Spec.Configuration.DeveloperConfiguration.UseEmulation).To(BeFalse())
	g.Expect(kv.Spec.CustomizeComponents.Patches).To(HaveLen(1), "no patch twice")

	g.Expect(os.WriteFile(p, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o600)).To(Succeed())
	_, err = readKubeVirtCR(p)
	g.Expect(err).To(MatchError(ContainSubstring("no KubeVirt CR in namespace kubevirt")))
	_, err = readKubeVirtCR(filepath.Join(t.TempDir(), "missing.yaml"))
	g.Expect(err).To(MatchError(ContainSubstring("make setup-kubevirt")))
}

func TestKubeVirtDirNeedsTheKubeVirtLayout(t *testing.T) {
	g := NewWithT(t)
	_, err := Options{Dir: "/tmp/fpc", BinDir: "/tmp/bin", KubeVirtDir: "/tmp/bin/kubevirt/v1.7.0"}.withDefaults()
	g.Expect(err).To(MatchError(ContainSubstring("KubeVirtDir needs KubeVirt")))
}

// virt-operator gets VIRT_IN_CONTAINER for virt-handler, and the rest of
// the manifest is untouched.
func TestOperatorManifestPassesVirtInContainer(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "in.yaml")
	manifest := `---
apiVersion: v1
kind: Namespace
metadata:
  name: kubevirt
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: virt-operator
  namespace: kubevirt
spec:
  selector:
    matchLabels: {kubevirt.io: virt-operator}
  template:
    metadata:
      labels: {kubevirt.io: virt-operator}
    spec:
      containers:
      - name: virt-operator
        env:
        - name: VIRT_OPERATOR_IMAGE
          value: localhost/kubevirt/virt-operator:v1.7.0
        - name: KUBEVIRT_VERSION
          value: v1.7.0
        image: localhost/kubevirt/virt-operator:v1.7.0
`
	g.Expect(os.WriteFile(src, []byte(manifest), 0o600)).To(Succeed())
	dst := filepath.Join(dir, "out.yaml")
	g.Expect(writeOperatorManifest(src, dst)).To(Succeed())
	out, err := os.ReadFile(dst)
	g.Expect(err).NotTo(HaveOccurred())
	docs := strings.Split(string(out), "\n---\n")
	g.Expect(docs).To(HaveLen(2))
	d := &appsv1.Deployment{}
	g.Expect(yaml.UnmarshalStrict([]byte(docs[1]), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Env).To(Equal([]corev1.EnvVar{
		{Name: VirtInContainerEnv, Value: "true"},
		{Name: "VIRT_OPERATOR_IMAGE", Value: "localhost/kubevirt/virt-operator:v1.7.0"},
		{Name: "KUBEVIRT_VERSION", Value: "v1.7.0"},
	}))
	g.Expect(strings.Replace(string(out), "        - name: "+VirtInContainerEnv+"\n          value: \"true\"\n", "", 1)).To(Equal(manifest))

	g.Expect(os.WriteFile(src, []byte(docs[0]), 0o600)).To(Succeed())
	g.Expect(writeOperatorManifest(src, dst)).To(MatchError(ContainSubstring("found 0 virt-operator env lists")))
}
