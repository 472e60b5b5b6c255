package offload

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// ethtoolK reads offloads with the ethtool command, independently of this
// package: the summary lines of `ethtool -k`.
func ethtoolK(g *WithT, netns ns.NetNS, ifName string) map[string]bool {
	var text []byte
	g.Expect(netns.Do(func(ns.NetNS) error {
		var err error
		text, err = exec.Command("ethtool", "-k", ifName).CombinedOutput()
		return err
	})).To(Succeed(), "ethtool -k %s: %s", ifName, text)
	summary := map[string]string{
		"tcp-segmentation-offload":     "tso",
		"generic-segmentation-offload": "gso",
		"generic-receive-offload":      "gro",
		"tx-checksumming":              "txChecksum",
		"rx-checksumming":              "rxChecksum",
	}
	got := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if key, known := summary[name]; ok && known {
			got[key] = strings.HasPrefix(value, "on")
		}
	}
	g.Expect(got).To(HaveLen(len(Features)), "a summary line per offload of wellknown.Offloads; ethtool -k output: %s", text)
	return got
}

func TestApplyAndRead(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	netns, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	const a, b = "fpoffa", "fpoffb"
	g.Expect(netns.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b})
	})).To(Succeed())

	for _, want := range []map[string]bool{
		{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true},
		{"tso": false, "gso": false, "gro": false, "txChecksum": false, "rxChecksum": false},
		{"tso": false, "gso": true, "gro": true, "txChecksum": false, "rxChecksum": true},
		{"tso": true, "gso": false, "gro": false, "txChecksum": true, "rxChecksum": false},
	} {
		g.Expect(netns.Do(func(ns.NetNS) error { return Apply(a, want) })).To(Succeed(), "apply %v", want)
		g.Expect(ethtoolK(g, netns, a)).To(Equal(want))
		var got map[string]bool
		g.Expect(netns.Do(func(ns.NetNS) error { got, err = Read(a); return err })).To(Succeed())
		g.Expect(got).To(Equal(want))
	}

	// Verify reports the difference after someone else changed a flag.
	g.Expect(netns.Do(func(ns.NetNS) error {
		return exec.Command("ethtool", "-K", a, "gro", "on").Run()
	})).To(Succeed())
	err = netns.Do(func(ns.NetNS) error {
		return Verify(a, map[string]bool{"tso": true, "gso": false, "gro": false, "txChecksum": true, "rxChecksum": false})
	})
	g.Expect(err).To(MatchError("offloads of fpoffa differ: gro is on, want off"))

	// A request the kernel cannot carry out as asked (TSO needs TX checksum
	// offload: it drops TSO and answers ETHTOOL_F_WISH): Apply reads the
	// features again and names what differs.
	err = netns.Do(func(ns.NetNS) error {
		return Apply(a, map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": false})
	})
	g.Expect(err).To(MatchError("offloads of fpoffa differ: tso is off, want on"))

	g.Expect(netns.Do(func(ns.NetNS) error { return Apply(a, map[string]bool{"lro": true}) })).To(MatchError(ContainSubstring(`unknown offload`)))
	g.Expect(netns.Do(func(ns.NetNS) error { return Apply("fpnosuch", map[string]bool{"gro": true}) })).To(MatchError(ContainSubstring("fpnosuch")))
}

// TestApplyVethPeer: the other end of a veth pair gets the first end's
// request without being read first; a peer that ends up otherwise than
// asked (its scatter-gather, outside the keys, turned off, so the kernel
// drops TSO) is read and the difference named.
func TestApplyVethPeer(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	netns, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	const a, b = "fppeera", "fppeerb"
	g.Expect(netns.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b})
	})).To(Succeed())

	for _, want := range []map[string]bool{
		{"tso": true, "gso": true, "gro": true, "txChecksum": true, "rxChecksum": true},
		{"tso": false, "gso": false, "gro": false, "txChecksum": false, "rxChecksum": false},
		{"tso": false, "gso": true, "gro": true, "txChecksum": false, "rxChecksum": true},
		{"tso": true, "gso": false, "gro": true, "txChecksum": true, "rxChecksum": false},
	} {
		g.Expect(netns.Do(func(ns.NetNS) error {
			peer, err := ApplyVeth(a, want)
			if err != nil {
				return err
			}
			return peer.Apply(b)
		})).To(Succeed(), "apply %v", want)
		g.Expect(ethtoolK(g, netns, a)).To(Equal(want))
		g.Expect(ethtoolK(g, netns, b)).To(Equal(want))
	}

	g.Expect(netns.Do(func(ns.NetNS) error { return exec.Command("ethtool", "-K", b, "sg", "off").Run() })).To(Succeed())
	err = netns.Do(func(ns.NetNS) error {
		peer, err := ApplyVeth(a, map[string]bool{"tso": true, "gso": true, "gro": true, "txChecksum": true})
		if err != nil {
			return err
		}
		return peer.Apply(b)
	})
	g.Expect(err).To(MatchError(ContainSubstring("offloads of fppeerb differ: ")))
	g.Expect(err).To(MatchError(ContainSubstring("tso is off, want on")))
}
