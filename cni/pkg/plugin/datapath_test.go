package plugin

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// TestDispatch: one place maps netconf "datapath" to its implementation,
// connects nothing for a record, and a binary without OVS says so when an
// OVS bridge is needed, with CNI error 999 (ErrInternal).
func TestDispatch(t *testing.T) {
	g := NewWithT(t)
	p := New(Options{})
	for name, want := range map[string]datapath.Datapath{
		netconf.DatapathLinuxBridge: &vethDatapath{},
		netconf.DatapathOVS:         &vethDatapath{},
		netconf.DatapathMacvtap:     &macvtapDatapath{},
	} {
		dp, err := p.recorded(&state.Attachment{Datapath: name, Bridge: "fpdispatch0"}, nil)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(dp).To(BeAssignableToTypeOf(want), name)
		dp.Close()
	}
	_, err := p.recorded(&state.Attachment{Datapath: "Other"}, nil)
	g.Expect(err).To(MatchError(`failed to open datapath "Other": unknown datapath`))

	_, err = p.open(context.Background(), &netconf.NetConf{Datapath: netconf.DatapathOVS, Bridge: "fpdispatch0", OVS: &netconf.OVS{}})
	var cniErr *types.Error
	g.Expect(err).To(BeAssignableToTypeOf(cniErr))
	g.Expect(err.(*types.Error).Code).To(Equal(uint(types.ErrInternal)))
	g.Expect(err.Error()).To(ContainSubstring("datapath OVS is not built into this plugin binary"))

	a := &state.Attachment{ContainerID: "c1", IfName: "net1", Datapath: netconf.DatapathOVS}
	dp, err := p.recorded(a, nil)
	g.Expect(err).NotTo(HaveOccurred())
	dp.Record(a)
	g.Expect(a.HostIfName).To(Equal(HostIfName("c1", "net1")))
	m := &state.Attachment{ContainerID: "c1", IfName: "net1"}
	(&macvtapDatapath{}).Record(m)
	g.Expect(m.HostIfName).To(BeEmpty(), "a macvtap has nothing outside the pod")
}
