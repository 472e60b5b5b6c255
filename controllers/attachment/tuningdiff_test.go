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
