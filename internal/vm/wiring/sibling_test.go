package wiring

import (
	"errors"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// TestSiblingVSOCKWiresTheModeAnnotation: mode Sibling marks the template
// for the domain hook, sets no autoattachVSOCK (the hook adds a vhost-user
// device, no kernel vsock), and Unwire restores the VM byte for byte. (The
// API requires spec.network with mode Sibling, whose binding plugin runs
// the hook; the wiring itself does not depend on it.)
func TestSiblingVSOCKWiresTheModeAnnotation(t *testing.T) {
	g := gomega.NewWithT(t)
	const orig = `{"metadata":{"name":"db-0"},"spec":{"template":{"metadata":{"labels":{"app":"db"}},"spec":{"domain":{"devices":{}}}}}}`
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "att"}, Spec: v1alpha1.FastPathAttachmentSpec{
		VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5000}}}}}
	d := ForAttachment(att)
	g.Expect(d.SiblingVSOCK).To(gomega.BeTrue())
	g.Expect(d.VSOCK).To(gomega.BeFalse())

	vm := decode(t, orig)
	changed, err := Wire(vm, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(changed).To(gomega.BeTrue())
	vm = roundTrip(t, vm)
	ann, _, _ := unstructured.NestedString(vm, "spec", "template", "metadata", "annotations", v1alpha1.VSOCKModeAnnotation)
	g.Expect(ann).To(gomega.Equal("Sibling"))
	_, hooks, _ := unstructured.NestedString(vm, "spec", "template", "metadata", "annotations", HookSidecarsAnnotation)
	g.Expect(hooks).To(gomega.BeFalse(), "no hook sidecar annotation")
	_, found, _ := nested(vm["spec"].(map[string]any)["template"].(map[string]any), pathVSOCK)
	g.Expect(found).To(gomega.BeFalse())
	sel, _, _ := unstructured.NestedStringMap(vm, "spec", "template", "spec", "nodeSelector")
	g.Expect(sel).To(gomega.Equal(map[string]string{v1alpha1.VhostUserVSOCKNodeLabel: "true"}))
	g.Expect(IsWired(vm, d)).To(gomega.BeTrue())

	// Relay mode (the default) is the kernel device again: the annotation goes.
	att.Spec.VSOCK.Mode = ""
	relay := ForAttachment(att)
	g.Expect(relay.VSOCK).To(gomega.BeTrue())
	_, err = Wire(vm, relay)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, has, _ := unstructured.NestedString(vm, "spec", "template", "metadata", "annotations", v1alpha1.VSOCKModeAnnotation)
	g.Expect(has).To(gomega.BeFalse())
	_, has, _ = unstructured.NestedFieldNoCopy(vm, "spec", "template", "spec", "nodeSelector")
	g.Expect(has).To(gomega.BeFalse(), "the nodeSelector map was created for the label and goes with it")

	_, err = Unwire(vm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, roundTrip(t, vm))).To(gomega.Equal(canonical(t, decode(t, orig))))
}

// TestSiblingVSOCKKeepsTheUsersNodeSelector: the user's own node selector
// entries stay and are ANDed with ours; the user's equal entry stays theirs
// (Unwire leaves it); a different value under our key is a conflict naming
// the field.
func TestSiblingVSOCKKeepsTheUsersNodeSelector(t *testing.T) {
	g := gomega.NewWithT(t)
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "att"}, Spec: v1alpha1.FastPathAttachmentSpec{
		VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5000}}}}}
	d := ForAttachment(att)

	const zoned = `{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"nodeSelector":{"zone":"a"},"domain":{"devices":{}}}}}}`
	vm := decode(t, zoned)
	_, err := Wire(vm, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	sel, _, _ := unstructured.NestedStringMap(vm, "spec", "template", "spec", "nodeSelector")
	g.Expect(sel).To(gomega.Equal(map[string]string{"zone": "a", v1alpha1.VhostUserVSOCKNodeLabel: "true"}))
	_, err = Unwire(vm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, roundTrip(t, vm))).To(gomega.Equal(canonical(t, decode(t, zoned))))

	const own = `{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"nodeSelector":{"fastpath.io/vhost-user-vsock":"true"},"domain":{"devices":{}}}}}}`
	vm = decode(t, own)
	_, err = Wire(vm, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = Unwire(vm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, roundTrip(t, vm))).To(gomega.Equal(canonical(t, decode(t, own))))

	vm = decode(t, `{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"nodeSelector":{"fastpath.io/vhost-user-vsock":"false"},"domain":{"devices":{}}}}}}`)
	_, err = Wire(vm, d)
	var conflict *ConflictError
	g.Expect(errors.As(err, &conflict)).To(gomega.BeTrue())
	g.Expect(err.Error()).To(gomega.ContainSubstring(`spec.template.spec.nodeSelector["fastpath.io/vhost-user-vsock"]`))
}

// TestSiblingVSOCKRequestsTheDevicePluginResource: mode Sibling puts
// limits["vsock.fastpath.io/sibling"]: "1" into spec.domain.resources, next
// to the user's own limits; Unwire removes exactly it, byte for byte; the
// user's equal value stays theirs and a different one is a conflict naming
// the field.
func TestSiblingVSOCKRequestsTheDevicePluginResource(t *testing.T) {
	g := gomega.NewWithT(t)
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "att"}, Spec: v1alpha1.FastPathAttachmentSpec{
		VSOCK: &v1alpha1.VSOCKSpec{Mode: v1alpha1.VSOCKModeSibling, Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5000}}}}}
	d := ForAttachment(att)

	for _, orig := range []string{
		`{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"domain":{"devices":{}}}}}}`,
		`{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"domain":{"devices":{},"resources":{"requests":{"memory":"1Gi"}}}}}}}`,
		`{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"domain":{"devices":{},"resources":{"limits":{"cpu":"2","memory":"1Gi"}}}}}}}`,
		`{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"domain":{"devices":{},"resources":{"limits":{"vsock.fastpath.io/sibling":"1"}}}}}}}`,
	} {
		vm := decode(t, orig)
		_, err := Wire(vm, d)
		g.Expect(err).NotTo(gomega.HaveOccurred(), orig)
		vm = roundTrip(t, vm)
		lim, _, _ := unstructured.NestedStringMap(vm, "spec", "template", "spec", "domain", "resources", "limits")
		g.Expect(lim).To(gomega.HaveKeyWithValue(v1alpha1.SiblingResourceName, "1"), orig)
		g.Expect(IsWired(vm, d)).To(gomega.BeTrue(), orig)
		_, err = Unwire(vm)
		g.Expect(err).NotTo(gomega.HaveOccurred(), orig)
		g.Expect(canonical(t, roundTrip(t, vm))).To(gomega.Equal(canonical(t, decode(t, orig))), orig)
	}

	vm := decode(t, `{"metadata":{"name":"db-0"},"spec":{"template":{"spec":{"domain":{"devices":{},"resources":{"limits":{"vsock.fastpath.io/sibling":"2"}}}}}}}`)
	_, err := Wire(vm, d)
	var conflict *ConflictError
	g.Expect(errors.As(err, &conflict)).To(gomega.BeTrue())
	g.Expect(err.Error()).To(gomega.ContainSubstring(`spec.template.spec.domain.resources.limits["vsock.fastpath.io/sibling"]`))
}
