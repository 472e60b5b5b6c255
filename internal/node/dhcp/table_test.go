package dhcp_test

import (
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

func TestTable(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	tab := dhcp.NewTable(filepath.Join(dir, leases.Dir), logr.Discard())
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	g.Expect(tab.Lookup("br0", mac)).To(BeNil(), "no lease directory yet")

	l := func(id, bridge, addr string) *leases.Lease {
		return &leases.Lease{ContainerID: id, IfName: "net1", Bridge: bridge, MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix(addr)}
	}
	g.Expect(leases.Write(dir, l("a", "br0", "10.0.0.5/24"))).To(Succeed())
	g.Expect(leases.Write(dir, l("b", "br1", "10.1.0.5/24"))).To(Succeed())
	got, err := tab.Lookup("br0", mac)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ContainerID).To(Equal("a"))
	got, err = tab.Lookup("br1", mac)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ContainerID).To(Equal("b"))
	g.Expect(tab.Lookup("br2", mac)).To(BeNil())

	// Two pods given the same MAC on one bridge: neither is answered.
	g.Expect(leases.Write(dir, l("c", "br0", "10.0.0.6/24"))).To(Succeed())
	_, err = tab.Lookup("br0", mac)
	g.Expect(err).To(MatchError(ContainSubstring("different addresses")))
}
