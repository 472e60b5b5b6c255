package attachment

import (
	"testing"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

func TestTuningDiff(t *testing.T) {
	want := domaintuning.Interface{MTU: 9000, Queues: 4, RxQueueSize: 1024, TxQueueSize: 256, Offloads: domaintuning.Offloads{TSO: v1alpha1.OffloadOn}}
	same := `{"interfaces":{"fp-link":{"mtu":9000,"queues":4,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On"}}}}`
	for _, tc := range []struct {
		name, annotation, want string
	}{
		{"equal", same, ""},
		{"other fields", `{"interfaces":{"fp-link":{"mtu":1500,"queues":4,"rxQueueSize":256,"txQueueSize":256,"offloads":{"tso":"Off"}}}}`,
			"mtu 9000, running 1500; rxQueueSize 1024, running 256; tso On, running Off"},
		{"no annotation", "", "running none"},
		{"another interface only", `{"interfaces":{"fp-other":{"mtu":9000}}}`, "running none"},
		{"malformed", `{"interfaces":`, "running none"},
	} {
		if got := tuningDiff(tc.annotation, "fp-link", want); got != tc.want {
			t.Errorf("%s: tuningDiff = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A VMI started by an operator before rxChecksum existed runs the
// four-offload annotation; the template now carries rxChecksum On, the
// default. After the upgrade that VM is not RestartRequired.
func TestTuningDiffAfterUpgradeAddsRXChecksum(t *testing.T) {
	spec := v1alpha1.DefaultAttachmentSpec(v1alpha1.FastPathAttachmentSpec{
		Network: &v1alpha1.NetworkSpec{Queues: ptrTo(int32(4)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
	})
	want := domaintuning.FromNetworkSpec(*spec.Network)
	if want.Offloads.RXChecksum != v1alpha1.OffloadOn {
		t.Fatalf("the defaulted spec has rxChecksum %q, want On", want.Offloads.RXChecksum)
	}
	old := `{"interfaces":{"fp-link":{"mtu":9000,"queues":4,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On","gso":"On","gro":"On","txChecksum":"On"}}}}`
	if got := tuningDiff(old, "fp-link", want); got != "" {
		t.Errorf("tuningDiff of the pre-upgrade annotation = %q, want \"\"", got)
	}
}

func ptrTo[T any](v T) *T { return &v }
