package leases_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/node/leases"
)

func TestWriteListRemove(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	l := &leases.Lease{ContainerID: "c1", IfName: "net1", Network: "n", Bridge: "br0", MAC: "02:00:00:00:00:01",
		Address: netip.MustParsePrefix("10.56.0.7/24"), Gateway: netip.MustParseAddr("10.56.0.1"), MTU: 9000,
		IPAMType: "host-local", IPAMNetwork: "fpnet-br0"}
	g.Expect(leases.Write(dir, l)).To(Succeed())
	g.Expect(leases.Write(dir, &leases.Lease{ContainerID: "c0", IfName: "net1", Bridge: "br0", MAC: "02:00:00:00:00:02",
		Address: netip.MustParsePrefix("10.56.0.8/24")})).To(Succeed())
	// What is not a lease is skipped; a broken lease is reported and skipped.
	g.Expect(os.WriteFile(filepath.Join(dir, leases.Dir, ".tmp-c2:net1.json"), []byte("{"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, leases.Dir, "c3:net1.json"), []byte(`{"mac":"x"}`), 0o600)).To(Succeed())

	got, err := leases.List(filepath.Join(dir, leases.Dir))
	g.Expect(err).To(MatchError(ContainSubstring("c3")))
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].ContainerID).To(Equal("c0"))
	g.Expect(got[1]).To(Equal(l))
	st, err := os.Stat(filepath.Join(dir, leases.Dir, "c1:net1.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))

	g.Expect(leases.Remove(dir, "c1", "net1")).To(Succeed())
	g.Expect(leases.Remove(dir, "c1", "net1")).To(Succeed(), "a missing lease is no error")
	g.Expect(leases.Remove(dir, "c2", "net1")).To(Succeed())
	g.Expect(filepath.Join(dir, leases.Dir, ".tmp-c2:net1.json")).NotTo(BeAnExistingFile())
	got, _ = leases.List(filepath.Join(dir, leases.Dir))
	g.Expect(got).To(HaveLen(1))
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, l := range map[string]*leases.Lease{
		"IPv6":         {ContainerID: "c", IfName: "i", MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix("fd00::5/64")},
		"no address":   {ContainerID: "c", IfName: "i", MAC: "02:00:00:00:00:01"},
		"bad MAC":      {ContainerID: "c", IfName: "i", MAC: "zz", Address: netip.MustParsePrefix("10.0.0.5/24")},
		"path escape":  {ContainerID: "../c", IfName: "i", MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix("10.0.0.5/24")},
		"IPv6 gateway": {ContainerID: "c", IfName: "i", MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix("10.0.0.5/24"), Gateway: netip.MustParseAddr("fd00::1")},
		"IPAM network leaves its directory": {ContainerID: "c", IfName: "i", MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix("10.0.0.5/24"),
			IPAMType: "host-local", IPAMNetwork: "../leases"},
		"IPAM network ..": {ContainerID: "c", IfName: "i", MAC: "02:00:00:00:00:01", Address: netip.MustParsePrefix("10.0.0.5/24"),
			IPAMType: "host-local", IPAMNetwork: ".."},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(leases.Write(dir, l)).NotTo(Succeed())
		})
	}
	NewWithT(t).Expect(leases.List(filepath.Join(dir, "missing"))).To(BeEmpty())
}
