package attachment

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

func TestAllocateSiblingCIDsKeepsPreviousAndFillsTheLowestFree(t *testing.T) {
	g := NewWithT(t)
	got, err := allocateSiblingCIDs([]string{"a", "b", "c", "d"}, map[string]int64{"b": 3, "c": 7, "d": 7, "gone": 4})
	g.Expect(err).NotTo(HaveOccurred())
	// b keeps 3, c keeps 7; d's 7 is taken, so d and a get the lowest free: 4 and 5.
	g.Expect(got).To(Equal(map[string]int64{"a": 4, "b": 3, "c": 7, "d": 5}))

	got, err = allocateSiblingCIDs([]string{"x"}, map[string]int64{"x": 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]int64{"x": v1alpha1.MinSiblingCID}), "a CID outside the range is not kept")
}

func TestAllocateSiblingCIDsSaysWhenTheGroupIsFull(t *testing.T) {
	g := NewWithT(t)
	n := v1alpha1.MaxSiblingCID - v1alpha1.MinSiblingCID + 2
	vms := make([]string, n)
	for i := range vms {
		vms[i] = string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260%10)) + string(rune('0'+i/2600%10)) + string(rune('0'+i/26000%10))
	}
	got, err := allocateSiblingCIDs(vms, nil)
	g.Expect(err).To(MatchError(ContainSubstring("1 VMs got no CID: a Sibling group holds at most 65533 VMs (CIDs 3-65535)")))
	g.Expect(got).To(HaveLen(n - 1))
}
