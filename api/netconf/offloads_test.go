package netconf

import (
	"reflect"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// The netconf's Offloads has exactly one field per row of
// wellknown.Offloads: a new row without its field, or a field without its
// row, fails here.
func TestOffloadsFieldsAreTheTable(t *testing.T) {
	g := NewWithT(t)
	typ := reflect.TypeOf(Offloads{})
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	g.Expect(names).To(ConsistOf(wellknown.OffloadNames()))
	g.Expect(OffloadKeys).To(Equal(wellknown.OffloadNames()))

	o := NewOffloads(func(name string) bool { return name != wellknown.OffloadGRO })
	for _, row := range wellknown.Offloads {
		g.Expect(*o.Offload(row.Name)).NotTo(BeNil(), row.Name)
	}
	g.Expect(o.Map()).To(Equal(map[string]bool{"tso": true, "gso": true, "gro": false, "txChecksum": true, "rxChecksum": true}))
	g.Expect((*Offloads)(nil).Map()).To(HaveLen(len(wellknown.Offloads)))
}
