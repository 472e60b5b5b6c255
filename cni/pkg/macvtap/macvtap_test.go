package macvtap

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestCreateVerifyDelete makes a lower device (a veth end) in the test's
// namespace and a bridge-mode macvtap on it directly in another, at a chosen
// interface index, then checks and deletes it.
func TestCreateVerifyDelete(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	hostNS, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	podNS, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, n := range []ns.NetNS{podNS, hostNS} {
			n.Close()
			_ = testutils.UnmountNS(n)
		}
	})
	g.Expect(hostNS.Do(func(ns.NetNS) error {
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fpmvl", MTU: 9000}, PeerName: "fpmvp"})).To(Succeed())
		for _, n := range []string{"fpmvp", "fpmvl"} {
			l, err := netlink.LinkByName(n)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(netlink.LinkSetUp(l)).To(Succeed())
		}
		_, err := Lower("fpmvnone")
		g.Expect(err).To(MatchError(ErrLowerNotFound))
		lower, err := Lower("fpmvl")
		g.Expect(err).NotTo(HaveOccurred())

		_, err = Create(podNS, lower, Spec{Name: "net1", MTU: 9216, Index: 1 << 30})
		g.Expect(err).To(MatchError(ContainSubstring("failed to create macvtap net1 on fpmvl")), "MTU above the lower's")
		link, err := Create(podNS, lower, Spec{Name: "net1", MTU: 9000, MAC: "02:fa:57:00:00:07", Index: 1<<30 + 7, Alias: "fastpath/n/c/net1",
			DeviceOwner: &Owner{UID: 107, GID: 108}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(link.Attrs().Index).To(Equal(1<<30 + 7))
		var st unix.Stat_t
		g.Expect(unix.Stat("/dev/tap1073741831", &st)).To(Succeed(), "the kernel's node for the macvtap")
		g.Expect([]uint32{st.Uid, st.Gid, st.Mode & 0o777}).To(Equal([]uint32{107, 108, 0o600}), "given to its consumer, still 0600")

		// Where the device cannot be given, no macvtap is left behind.
		DevDir = t.TempDir()
		_, err = Create(podNS, lower, Spec{Name: "net3", MTU: 9000, Index: 1<<30 + 8, DeviceOwner: &Owner{UID: 107, GID: 107}})
		DevDir = "/dev"
		g.Expect(err).To(MatchError(And(ContainSubstring("failed to give the character device of macvtap net3 to 107:107"), ContainSubstring("no such file"))))
		ok, err := Exists(podNS.Path(), "net3")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse(), "the macvtap whose device could not be given is deleted")
		g.Expect(link.Attrs().TxQLen).To(Equal(500), "the kernel's macvtap default: the size of the tap queues' rings")
		_, err = Create(podNS, lower, Spec{Name: "net2", MTU: 9000, Index: 1<<30 + 7})
		g.Expect(err).To(MatchError(ContainSubstring("with interface index 1073741831 exists there")))

		ok, err = Exists(podNS.Path(), "net1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		g.Expect(podNS.Do(func(ns.NetNS) error {
			g.Expect(Verify("net1", lower.Attrs().Index, 9000, "02:fa:57:00:00:07", "fastpath/n/c/net1")).To(MatchError(ContainSubstring("it is down")))
			g.Expect(netlink.LinkSetUp(link)).To(Succeed())
			g.Expect(Verify("net1", lower.Attrs().Index, 9000, "02:fa:57:00:00:07", "fastpath/n/c/net1")).To(Succeed())
			g.Expect(Verify("net1", lower.Attrs().Index, 1500, "", "fastpath/n/c/other")).To(MatchError(
				`failed to check macvtap net1: MTU is 9000, want 1500; alias is "fastpath/n/c/net1", want "fastpath/n/c/other"`))
			g.Expect(netlink.LinkSetTxQLen(link, 0)).To(Succeed())
			g.Expect(Verify("net1", lower.Attrs().Index, 9000, "", "")).To(MatchError(ContainSubstring("tx queue length is 0")))
			g.Expect(netlink.LinkSetTxQLen(link, 500)).To(Succeed())
			return nil
		})).To(Succeed())

		g.Expect(Delete(podNS.Path(), "net1", "fastpath/n/c/other")).To(MatchError(ContainSubstring("names another attachment")))
		g.Expect(Delete(podNS.Path(), "net1", "fastpath/n/c/net1")).To(Succeed())
		g.Expect(Delete(podNS.Path(), "net1", "fastpath/n/c/net1")).To(Succeed(), "a missing link is fine")
		g.Expect(Delete("/var/run/netns/fastpath-no-such-netns", "net1", "")).To(Succeed(), "so is a missing netns")
		ok, err = Exists(podNS.Path(), "net1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeFalse())
		return nil
	})).To(Succeed())
}
