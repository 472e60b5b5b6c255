package wellknown_test

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/wellknown"
)

// Every name the functions make is of its row's form, the pattern matches it
// quoted, and names that only look alike do not match.
func TestDerivedLinkNames(t *testing.T) {
	g := NewWithT(t)
	re := regexp.MustCompile(wellknown.DerivedLinkPattern())
	g.Expect(wellknown.DerivedLinkPattern()).To(Equal(`"(fpnew[0-9a-f]{8}|fpl[0-9a-f]{12}|fp[0-9a-f]{13})"`))
	made := map[string]string{
		wellknown.TempLinkName([4]byte{0xde, 0xad, 0xbe, 0xef}): wellknown.TempLinkPrefix,
		wellknown.LowerPeerName("fastpath0"):                    wellknown.LowerPeerPrefix,
		wellknown.HostVethName("0123456789abcdef", "net1"):      wellknown.HostVethPrefix,
	}
	for name, prefix := range made {
		g.Expect(len(name)).To(BeNumerically("<=", 15), "IFNAMSIZ-1: %s", name)
		kind, ok := wellknown.DerivedLinkKind(name)
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(kind.Prefix).To(Equal(prefix), name)
		g.Expect(re.MatchString(`{"master":"`+name+`"}`)).To(BeTrue(), name)
	}
	g.Expect(wellknown.TempLinkName([4]byte{0xde, 0xad, 0xbe, 0xef})).To(Equal("fpnewdeadbeef"))
	g.Expect(wellknown.LowerPeerName("fastpath0")).NotTo(Equal(wellknown.LowerPeerName("fastpath1")))
	// The names of links that exist on nodes today: a change would orphan them.
	g.Expect(wellknown.LowerPeerName("fastpath0")).To(Equal("fpl49627e8c8ef8"))
	g.Expect(wellknown.HostVethName("0123456789abcdef", "net1")).To(Equal("fpe99075bdd2036"))
	for _, name := range []string{"fastpath0", "fpl0123", "fpl0123456789abc0", "fpl0123456789AB", "fp0123456789ab", "xfpl0123456789ab", "fpnewdeadbee"} {
		_, ok := wellknown.DerivedLinkKind(name)
		g.Expect(ok).To(BeFalse(), name)
		g.Expect(re.MatchString(`{"master":"`+name+`"}`)).To(BeFalse(), name)
	}
	g.Expect(wellknown.NetworkLinkNames(wellknown.DatapathMacvtap, "fplow0")).To(Equal([]string{"fplow0", wellknown.LowerPeerName("fplow0")}))
	g.Expect(wellknown.NetworkLinkNames(wellknown.DatapathLinuxBridge, "fp.br0")).To(Equal([]string{"fp.br0"}))
	g.Expect(wellknown.NetworkLinkNames(wellknown.DatapathOVS, "br-fast")).To(Equal([]string{"br-fast"}))
}
