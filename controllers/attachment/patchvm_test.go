package attachment

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// The envtest suite never meets a 409 from a VM patch; these tests force
// them with controller-runtime's fake client (which checks the
// resourceVersion a merge patch carries) and an interceptor.

func testVM(resourceVersion string) *unstructured.Unstructured {
	vm := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "vm-0", "namespace": "ns"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	}}
	vm.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
	if resourceVersion != "" {
		vm.SetResourceVersion(resourceVersion)
	}
	return vm
}

// setLabel is a patchVM mutation: label x=y, a change only when missing.
func setLabel(obj map[string]any) (bool, error) {
	if v, _, _ := unstructured.NestedString(obj, "metadata", "labels", "x"); v == "y" {
		return false, nil
	}
	return true, unstructured.SetNestedField(obj, "y", "metadata", "labels", "x")
}

// counting wraps c so that Patch calls are counted and, while failPatches is
// positive, answered with a 409 Conflict.
func counting(c client.WithWatch, patches *int, failPatches int) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*patches++
			if *patches <= failPatches {
				return apierrors.NewConflict(schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachines"}, obj.GetName(), errors.New("forced"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
}

func TestPatchVMRereadsLiveAfterAConflict(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(testVM("")).Build()
	stored := testVM("")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
	stale := stored.DeepCopy()
	// Someone else writes the VM: the cached copy is now stale.
	stored.SetAnnotations(map[string]string{"user": "edit"})
	g.Expect(c.Update(ctx, stored)).To(Succeed())

	patches := 0
	r := &Reconciler{Client: counting(c, &patches, 0), APIReader: c}
	patched, err := r.patchVM(ctx, stale, setLabel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patched).To(BeTrue())
	g.Expect(patches).To(Equal(2), "the stale patch conflicts, the one on the live read succeeds")

	got := testVM("")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.GetLabels()).To(HaveKeyWithValue("x", "y"))
	g.Expect(got.GetAnnotations()).To(HaveKeyWithValue("user", "edit"), "the other writer's change survives")

	// Nothing left to change: no request at all.
	patched, err = r.patchVM(ctx, got, setLabel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patched).To(BeFalse())
	g.Expect(patches).To(Equal(2))
}

func TestPatchVMGivesUpAfterMaxAttempts(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(testVM("")).Build()
	vm := testVM("")
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm)).To(Succeed())

	patches := 0
	r := &Reconciler{Client: counting(c, &patches, 1000), APIReader: c}
	patched, err := r.patchVM(context.Background(), vm, setLabel)
	g.Expect(patched).To(BeFalse())
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("failed to patch VirtualMachine ns/vm-0")))
	g.Expect(patches).To(Equal(maxVMPatchAttempts))
}

func TestPatchVMIgnoresAVMThatIsGone(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(fpscheme.New()).Build()

	// Gone before the first patch.
	patches := 0
	r := &Reconciler{Client: counting(c, &patches, 0), APIReader: c}
	patched, err := r.patchVM(context.Background(), testVM("1"), setLabel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patched).To(BeFalse())
	g.Expect(patches).To(Equal(1))

	// Gone when re-read after a conflict.
	patches = 0
	r.Client = counting(c, &patches, 1)
	patched, err = r.patchVM(context.Background(), testVM("1"), setLabel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patched).To(BeFalse())
	g.Expect(patches).To(Equal(1))
}

func TestPatchVMReturnsMutateErrorsAsTheyAre(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientBuilder().WithScheme(fpscheme.New()).WithObjects(testVM("")).Build()
	boom := errors.New("boom")
	patches := 0
	r := &Reconciler{Client: counting(c, &patches, 0), APIReader: c}
	patched, err := r.patchVM(context.Background(), testVM(""), func(map[string]any) (bool, error) { return false, boom })
	g.Expect(err).To(BeIdenticalTo(boom))
	g.Expect(patched).To(BeFalse())
	g.Expect(patches).To(BeZero())
}
