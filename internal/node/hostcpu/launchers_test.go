package hostcpu_test

import (
	"context"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fastpath-io/fastpath/internal/node/hostcpu"
	"github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// Only a pod on this node whose controller is a VMI is read; a label is no
// proof.
func TestLaunchersOn(t *testing.T) {
	yes := true
	pod := func(name, uid, node string, vmi bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", UID: types.UID(uid), Labels: map[string]string{"kubevirt.io": "virt-launcher"}}, Spec: corev1.PodSpec{NodeName: node}}
		if vmi {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "db-0", UID: "vmi-uid", Controller: &yes}}
		}
		return p
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		pod("virt-launcher-db-0-abcde", guaranteed, "node-1", true),
		pod("impostor", burstable, "node-1", false),
		pod("virt-launcher-db-1-fghij", besteffort, "node-2", true),
	).Build()
	allowed := hostcpu.LaunchersOn(c, "node-1")
	for _, tc := range []struct {
		uid string
		ok  bool
	}{{guaranteed, true}, {burstable, false}, {besteffort, false}, {elsewhere, false}} {
		err := allowed(context.Background(), tc.uid)
		if tc.ok {
			gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred(), tc.uid)
		} else {
			gomega.NewWithT(t).Expect(err).To(gomega.MatchError(gomega.ContainSubstring("is not a virt-launcher pod on node node-1")), tc.uid)
		}
	}
}
