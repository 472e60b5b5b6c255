package macvtap

import (
	"fmt"
	"os"
	"path/filepath"
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
		major, err := TapMajor()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(unix.Major(st.Rdev)).To(Equal(major), "the macvtap major of /proc/devices")

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

// TestGiveDeviceFollowsNoSymlink (root): in a directory of its own, the
// owner of a character device of the given major changes; a symbolic link
// to a file (as one at /dev/tap<N> would be), a regular file, a directory
// and a character device of another major are refused, naming the path,
// and nothing they name changes owner.
func TestGiveDeviceFollowsNoSymlink(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	// GiveDevice takes the major to check; TapMajor's is tested below and,
	// on a real macvtap, by TestCreateVerifyDelete.
	const major = 240
	dir := t.TempDir()
	owner := Owner{UID: 107, GID: 108}
	ownerOf := func(path string) []uint32 {
		var st unix.Stat_t
		g.Expect(unix.Lstat(path, &st)).To(Succeed())
		return []uint32{st.Uid, st.Gid}
	}

	tap := filepath.Join(dir, "tap1073741900")
	g.Expect(unix.Mknod(tap, unix.S_IFCHR|0o600, int(unix.Mkdev(major, 0)))).To(Succeed())
	g.Expect(GiveDevice(tap, major, owner)).To(Succeed())
	g.Expect(ownerOf(tap)).To(Equal([]uint32{107, 108}))

	secret := filepath.Join(dir, "shadow")
	g.Expect(os.WriteFile(secret, []byte("root only"), 0o600)).To(Succeed())
	link := filepath.Join(dir, "tap1073741901")
	g.Expect(os.Symlink(secret, link)).To(Succeed())
	linkToTap := filepath.Join(dir, "tap1073741902")
	other := filepath.Join(dir, "tap1073741903")
	g.Expect(unix.Mknod(other, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))).To(Succeed()) // /dev/null's numbers
	g.Expect(os.Symlink(other, linkToTap)).To(Succeed())
	sub := filepath.Join(dir, "tap1073741904")
	g.Expect(os.Mkdir(sub, 0o700)).To(Succeed())
	for path, want := range map[string]string{
		link:      "it is a symbolic link",
		linkToTap: "it is a symbolic link",
		secret:    "it is not a character device",
		sub:       "it is not a character device",
		other:     fmt.Sprintf("character device 1:3 is not a macvtap's (major %d)", major),
	} {
		g.Expect(GiveDevice(path, major, owner)).To(MatchError(And(ContainSubstring(path), ContainSubstring(want))), path)
	}
	for _, p := range []string{secret, link, other, linkToTap, sub} {
		g.Expect(ownerOf(p)).To(Equal([]uint32{0, 0}), p)
	}
	g.Expect(GiveDevice(filepath.Join(dir, "tap1"), major, owner)).To(MatchError(ContainSubstring("no such file")))

	ProcDevices = filepath.Join(dir, "devices")
	defer func() { ProcDevices = "/proc/devices" }()
	g.Expect(os.WriteFile(ProcDevices, []byte("Character devices:\n  1 mem\n 10 misc\n\nBlock devices:\n240 macvtap\n"), 0o600)).To(Succeed())
	_, err := TapMajor()
	g.Expect(err).To(MatchError(ContainSubstring("no macvtap character device major")), "a block major of that name is not it")
	g.Expect(os.WriteFile(ProcDevices, []byte("Character devices:\n  1 mem\n238 macvtap\n\nBlock devices:\n  8 sd\n"), 0o600)).To(Succeed())
	g.Expect(TapMajor()).To(Equal(uint32(238)))
}
