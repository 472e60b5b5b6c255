package wiring

import (
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// interfaceOf returns the VM template's interface fp-<attachment>.
func interfaceOf(t *testing.T, vm map[string]any, name string) map[string]any {
	t.Helper()
	v, _, err := nested(vm["spec"].(map[string]any)["template"].(map[string]any), pathInterfaces)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range v.([]any) {
		if m := e.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no interface %s", name)
	return nil
}

// TestWireMacvtapBinding: datapath Macvtap wires the interface with its
// own binding plugin; switching the network's datapath converges to the
// other plugin, an interface of an earlier Fastpath ("bridge": {}) converges
// to the plugin, and unwiring restores the original.
func TestWireMacvtapBinding(t *testing.T) {
	g := gomega.NewWithT(t)
	original := canonical(t, decode(t, busyVM))
	obj := decode(t, busyVM)

	d := full(v1alpha1.PlacementRequired)
	d.Network.Binding = DefaultMacvtapBinding
	changed, err := Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(changed).To(gomega.BeTrue())
	obj = roundTrip(t, obj)
	g.Expect(interfaceOf(t, obj, "fp-db-link")).To(gomega.Equal(map[string]any{
		"name": "fp-db-link", "binding": map[string]any{"name": "fastpath-macvtap"}, "model": "virtio"}))
	g.Expect(IsWired(obj, d)).To(gomega.BeTrue())

	d.Network.Binding = DefaultBinding
	_, err = Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	obj = roundTrip(t, obj)
	g.Expect(interfaceOf(t, obj, "fp-db-link")).To(gomega.Equal(map[string]any{
		"name": "fp-db-link", "binding": map[string]any{"name": "fastpath"}, "model": "virtio"}))

	legacy := d
	legacy.Network = &Network{NetworkAttachmentDefinition: d.Network.NetworkAttachmentDefinition, Tuning: d.Network.Tuning}
	_, err = Wire(obj, legacy)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(interfaceOf(t, obj, "fp-db-link")).To(gomega.HaveKey("bridge"))
	_, err = Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(interfaceOf(t, obj, "fp-db-link")).To(gomega.Equal(map[string]any{
		"name": "fp-db-link", "binding": map[string]any{"name": "fastpath"}, "model": "virtio"}))

	_, err = Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, obj)).To(gomega.Equal(original))
}

func TestForAttachmentMacvtap(t *testing.T) {
	g := gomega.NewWithT(t)
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: v1alpha1.FastPathAttachmentSpec{
		Network: &v1alpha1.NetworkSpec{Datapath: v1alpha1.DatapathMacvtap, Bridge: "fastpath1", IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}}
	g.Expect(ForAttachment(att).Network.Binding).To(gomega.Equal("fastpath-macvtap"))
	att.Spec.Network.Datapath = v1alpha1.DatapathLinuxBridge
	g.Expect(ForAttachment(att).Network.Binding).To(gomega.Equal("fastpath"))
	att.Spec.Network.Datapath = v1alpha1.DatapathOVS
	g.Expect(ForAttachment(att).Network.Binding).To(gomega.Equal("fastpath"))
}
