package v1alpha1_test

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestVSOCKServiceStatusDial(t *testing.T) {
	cid := int64(7)
	for _, tc := range []struct {
		name    string
		s       v1alpha1.VSOCKServiceStatus
		address string
	}{
		{"Sibling dials the target's CID at the service port",
			v1alpha1.VSOCKServiceStatus{Mode: v1alpha1.VSOCKModeSibling, Port: 5432, RelayPort: 20001, TargetCID: &cid}, "7:5432"},
		{"Sibling without a target CID is not known yet",
			v1alpha1.VSOCKServiceStatus{Mode: v1alpha1.VSOCKModeSibling, Port: 5432}, ""},
		{"Relay dials the host at the relay port",
			v1alpha1.VSOCKServiceStatus{Mode: v1alpha1.VSOCKModeRelay, Port: 5432, RelayPort: 20001, TargetCID: &cid}, "2:20001"},
		{"Relay without a relay port is not known yet",
			v1alpha1.VSOCKServiceStatus{Mode: v1alpha1.VSOCKModeRelay, Port: 5432, TargetCID: &cid}, ""},
		{"a status written before mode existed is Relay",
			v1alpha1.VSOCKServiceStatus{Port: 5432, RelayPort: 20002}, "2:20002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, _, ok := tc.s.Dial()
			g.Expect(ok).To(gomega.Equal(tc.address != ""))
			g.Expect(tc.s.DialAddress()).To(gomega.Equal(tc.address))
		})
	}
}
