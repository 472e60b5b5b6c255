package v1alpha1

import (
	"reflect"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// jsonFields returns the JSON names of the fields of the struct type t.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// Offloads has exactly one field per row of wellknown.Offloads, reached by
// Offload: a new row without its field, or a field without its row, fails.
func TestOffloadsFieldsAreTheTable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(jsonFields(reflect.TypeOf(Offloads{}))).To(ConsistOf(wellknown.OffloadNames()))
	var o Offloads
	for _, row := range wellknown.Offloads {
		p := o.Offload(row.Name)
		g.Expect(p).NotTo(BeNil(), row.Name)
		*p = OffloadOff
	}
	g.Expect(o).To(Equal(AllOffloads(OffloadOff)))
	g.Expect(o.Offload("nope")).To(BeNil())
}

func TestOffloadsFillFromAndFormat(t *testing.T) {
	g := NewWithT(t)
	o := Offloads{GRO: OffloadOff}
	o.FillFrom(AllOffloads(OffloadOn))
	g.Expect(o).To(Equal(Offloads{TSO: OffloadOn, GSO: OffloadOn, GRO: OffloadOff, TXChecksum: OffloadOn, RXChecksum: OffloadOn}))
	g.Expect(o.Format(" ", ", ")).To(Equal("tso On, gso On, gro Off, txChecksum On, rxChecksum On"))
	g.Expect(o.Format("=", ",")).To(Equal("tso=On,gso=On,gro=Off,txChecksum=On,rxChecksum=On"))
	o = Offloads{RXChecksum: OffloadOff}
	o.FillFrom(AllOffloads(OffloadOn))
	g.Expect(o.Format("=", ",")).To(Equal("tso=On,gso=On,gro=On,txChecksum=On,rxChecksum=Off"))
}
