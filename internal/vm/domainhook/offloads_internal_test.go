package domainhook

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Every libvirt attribute the offload table names is one the edit writes:
// an attribute missing from libvirtAttrOrder would be dropped silently.
func TestEveryOffloadAttributeIsWritten(t *testing.T) {
	g := NewWithT(t)
	all := v1alpha1.AllOffloads(v1alpha1.OffloadOn)
	set := offloadSettings(all)
	for _, row := range wellknown.Offloads {
		for elem, attrs := range map[string][]string{"host": row.Host, "guest": row.Guest} {
			for _, a := range attrs {
				g.Expect(slices.ContainsFunc(set, func(s offloadSetting) bool {
					return s.Target == offloadTarget{elem, a} && s.Offload == row.Name && s.Value == "on"
				})).To(BeTrue(), "offload %s: %s %s is not written", row.Name, elem, a)
			}
		}
	}
	g.Expect(offloadSettings(v1alpha1.Offloads{})).To(BeEmpty(), "unset offloads are left as they are")
	off := offloadSettings(v1alpha1.Offloads{GRO: v1alpha1.OffloadOff})
	g.Expect(off).To(Equal([]offloadSetting{
		{offloadTarget{"guest", "tso4"}, wellknown.OffloadGRO, "off"},
		{offloadTarget{"guest", "tso6"}, wellknown.OffloadGRO, "off"},
		{offloadTarget{"guest", "ecn"}, wellknown.OffloadGRO, "off"},
	}))
}

// Every attribute the edit writes has its virtio feature bit for messages,
// and every dependency names attributes the edit writes.
func TestVirtioDependenciesNameWrittenAttributes(t *testing.T) {
	g := NewWithT(t)
	for _, a := range libvirtAttrOrder {
		g.Expect(virtioFeature).To(HaveKey(a))
	}
	g.Expect(virtioFeature).To(HaveLen(len(libvirtAttrOrder)))
	for a, need := range virtioNeeds {
		g.Expect(libvirtAttrOrder).To(ContainElements(a, need))
	}
}
