package plugin

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
)

func TestHostIfName(t *testing.T) {
	g := NewWithT(t)
	a := HostIfName("3f1c2d9e8b7a", "pod2c26b46b68f")
	g.Expect(a).To(HaveLen(15))
	g.Expect(a).To(HavePrefix("fp"))
	g.Expect(a).To(Equal(HostIfName("3f1c2d9e8b7a", "pod2c26b46b68f")), "stable")
	g.Expect(a).NotTo(Equal(HostIfName("3f1c2d9e8b7a", "net1")))
	g.Expect(HostIfName("a/b", "c")).NotTo(Equal(HostIfName("a", "b/c")))
}

func TestAlias(t *testing.T) {
	g := NewWithT(t)
	alias := hostAlias("fp-db-link", "3f1c2d9e8b7a", "net1")
	g.Expect(alias).To(Equal("fastpath/fp-db-link/3f1c2d9e8b7a/net1"))
	p, ok := parseAlias(alias)
	g.Expect(ok).To(BeTrue())
	g.Expect(p).To(Equal(datapath.Port{Network: "fp-db-link", ContainerID: "3f1c2d9e8b7a", IfName: "net1"}))

	for _, bad := range []string{"", "other", "fastpath/", "fastpath/a/b", "fastpath/a//c", "fastpath/a/b/c/d"} {
		_, ok := parseAlias(bad)
		g.Expect(ok).To(BeFalse(), "alias %q", bad)
	}
	g.Expect(hostAlias(strings.Repeat("n", 250), "c", "i")).To(BeEmpty(), "longer than IFALIASZ-1")
}
