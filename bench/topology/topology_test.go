package topology

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// newNS creates a uniquely named namespace removed at the end of the test.
func newNS(t *testing.T) *NetNS {
	t.Helper()
	n, err := NewNetNS(testutil.UniqueName("fptopo-"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Delete() })
	return n
}

func TestNetNSLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	n := newNS(t)

	g.Expect(n.Path).To(gomega.Equal(filepath.Join(NetNSDir, n.Name)))
	lo, err := n.Link("lo")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(lo.Attrs().Flags & net.FlagUp).NotTo(gomega.BeZero())

	names, err := ListNetNS(n.Name[:len("fptopo-")])
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(names).To(gomega.ContainElement(n.Name))

	_, err = NewNetNS(n.Name)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to create network namespace " + n.Name)))

	g.Expect(n.Delete()).To(gomega.Succeed())
	_, err = os.Stat(n.Path)
	g.Expect(os.IsNotExist(err)).To(gomega.BeTrue())
	g.Expect(n.Delete()).To(gomega.Succeed(), "deleting twice is success")
}

func TestNewNetNSRejectsBadNames(t *testing.T) {
	g := gomega.NewWithT(t)
	for _, name := range []string{"", "a/b", strings.Repeat("x", 256)} {
		_, err := NewNetNS(name)
		g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("1-255 bytes")), "name %q", name)
	}
}

func TestMasqueradeOptionsValidate(t *testing.T) {
	base := MasqueradeOptions{HostIfName: "fpx0", PodIfName: "eth0", PodIP: netip.MustParseAddr("10.244.0.2"), MTU: 1500, GuestCIDR: DefaultGuestCIDR}
	for _, tc := range []struct {
		name   string
		mutate func(*MasqueradeOptions)
		want   string
	}{
		{"valid", func(*MasqueradeOptions) {}, ""},
		{"no host name", func(o *MasqueradeOptions) { o.HostIfName = "" }, "HostIfName"},
		{"long host name", func(o *MasqueradeOptions) { o.HostIfName = "abcdefghijklmnop" }, "HostIfName"},
		{"ipv6 pod IP", func(o *MasqueradeOptions) { o.PodIP = netip.MustParseAddr("fd00::2") }, "PodIP"},
		{"tiny MTU", func(o *MasqueradeOptions) { o.MTU = 100 }, "MTU 100"},
		{"guest /31", func(o *MasqueradeOptions) { o.GuestCIDR = netip.MustParsePrefix("10.0.2.0/31") }, "GuestCIDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			o := base
			tc.mutate(&o)
			err := o.validate()
			if tc.want == "" {
				g.Expect(err).NotTo(gomega.HaveOccurred())
				return
			}
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}

// TestMasqueradeTraffic wires two endpoints and checks that a TCP connection
// from one to the other's pod IP crosses both NATs: the server socket sees
// its own guest address as local address (DNAT) and the client's pod IP as
// peer (masquerade), and the client sees the server's pod IP.
func TestMasqueradeTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	a, b := newNS(t), newNS(t)
	podA, podB := netip.MustParseAddr("10.244.231.2"), netip.MustParseAddr("10.244.231.3")
	ma, err := AddMasquerade(a, MasqueradeOptions{HostIfName: testutil.UniqueName("fptp"), PodIP: podA})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = ma.Remove() })
	mb, err := AddMasquerade(b, MasqueradeOptions{HostIfName: testutil.UniqueName("fptp"), PodIP: podB})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = mb.Remove() })

	g.Expect(mb.GuestIP).To(gomega.Equal(netip.MustParseAddr("10.0.2.2")))
	g.Expect(mb.GatewayIP).To(gomega.Equal(netip.MustParseAddr("10.0.2.1")))
	eth0, err := b.Link("eth0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(eth0.Attrs().MTU).To(gomega.Equal(DefaultPodMTU))

	var ln net.Listener
	g.Expect(b.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "0.0.0.0:0")
		return err
	})).To(gomega.Succeed())
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	type seen struct{ local, remote string }
	got := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
		got <- seen{c.LocalAddr().(*net.TCPAddr).IP.String(), c.RemoteAddr().(*net.TCPAddr).IP.String()}
	}()

	var clientLocal, clientRemote string
	g.Expect(a.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(podB.String(), fmt.Sprint(port)))
		if err != nil {
			return err
		}
		defer c.Close()
		clientLocal, clientRemote = c.LocalAddr().(*net.TCPAddr).IP.String(), c.RemoteAddr().(*net.TCPAddr).IP.String()
		_, err = c.Write(make([]byte, 1<<20))
		return err
	})).To(gomega.Succeed())
	g.Expect(clientLocal).To(gomega.Equal("10.0.2.2"), "the emulated guest address is the source")
	g.Expect(clientRemote).To(gomega.Equal(podB.String()))
	var s seen
	g.Eventually(got, 5*time.Second).Should(gomega.Receive(&s))
	g.Expect(s.local).To(gomega.Equal("10.0.2.2"), "DNAT of the pod IP to the guest address in the server namespace")
	g.Expect(s.remote).To(gomega.Equal(podA.String()), "masquerade of the guest address to the pod IP in the client namespace")

	rules, err := a.Exec("nft", "list", "table", "ip", MasqueradeNATTable)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(rules)).To(gomega.MatchRegexp(`ip saddr 10\.0\.2\.2 counter packets [1-9]\d* bytes \d+ masquerade`))
}

func TestMasqueradeRemoveLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	n := newNS(t)
	host := testutil.UniqueName("fptp")
	m, err := AddMasquerade(n, MasqueradeOptions{HostIfName: host, PodIP: netip.MustParseAddr("10.244.232.2"), MTU: 1450})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	eth0, err := n.Link("eth0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(eth0.Attrs().MTU).To(gomega.Equal(1450))

	g.Expect(m.Remove()).To(gomega.Succeed())
	g.Expect(ListHostLinks(host)).To(gomega.BeEmpty())
	_, err = n.Link("eth0")
	g.Expect(err).To(gomega.HaveOccurred())
	_, err = n.Link(MasqueradeBridge)
	g.Expect(err).To(gomega.HaveOccurred())
	out, err := n.Exec("nft", "list", "tables")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(out)).NotTo(gomega.ContainSubstring("table ip nat"))
	g.Expect(m.Remove()).To(gomega.Succeed(), "removing twice is success")
}

func TestAddMasqueradeRollsBackOnFailure(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	n := newNS(t)
	host := testutil.UniqueName("fptp")
	// A pod interface name that already exists in the namespace makes the veth fail.
	_, err := AddMasquerade(n, MasqueradeOptions{HostIfName: host, PodIfName: "lo", PodIP: netip.MustParseAddr("10.244.233.2")})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to add veth " + host)))
	g.Expect(ListHostLinks(host)).To(gomega.BeEmpty())
}

// TestMasqueradeWithGuest builds KubeVirt's whole masquerade shape for two
// endpoints and checks the NAT from the guests' point of view and the TX
// checksum offload of k6t-eth0.
func TestMasqueradeWithGuest(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	la, lb, ga, gb := newNS(t), newNS(t), newNS(t), newNS(t)
	podA, podB := netip.MustParseAddr("10.244.234.2"), netip.MustParseAddr("10.244.234.3")
	ma, err := AddMasquerade(la, MasqueradeOptions{HostIfName: testutil.UniqueName("fptp"), PodIP: podA, Guest: ga})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = ma.Remove() })
	mb, err := AddMasquerade(lb, MasqueradeOptions{HostIfName: testutil.UniqueName("fptp"), PodIP: podB, Guest: gb})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = mb.Remove() })
	g.Expect(mb.TapName).To(gomega.Equal("tap0"))
	g.Expect(mb.GuestIfName).To(gomega.Equal("eth0"))

	out, err := lb.Exec("ethtool", "-k", MasqueradeBridge)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(out)).To(gomega.MatchRegexp(`(?m)^tx-checksumming: off`))
	addrs, err := gb.Addrs("eth0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(addrs).To(gomega.ContainElement(gomega.HaveField("IPNet.String()", "10.0.2.2/24")))

	local, remote := dialAndSee(t, ga, gb, podB)
	g.Expect(local).To(gomega.Equal("10.0.2.2"), "DNAT of the pod IP to the guest")
	g.Expect(remote).To(gomega.Equal(podA.String()), "masquerade of the client guest to its pod IP")

	g.Expect(mb.Remove()).To(gomega.Succeed())
	_, err = gb.Link("eth0")
	g.Expect(err).To(gomega.HaveOccurred(), "the guest interface goes with the tap")
	_, err = lb.Link("tap0")
	g.Expect(err).To(gomega.HaveOccurred())
}

// TestBridgeBinding plugs two launchers into one host bridge (standing in for
// a CNI plugin), binds the pod interfaces to guests, and sends 9000-byte
// frames between the guests.
func TestBridgeBinding(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	br := testutil.UniqueName("fptb")
	g.Expect(netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br, MTU: 9000}})).To(gomega.Succeed())
	t.Cleanup(func() { _ = DeleteHostLink(br) })
	brLink, err := netlink.LinkByName(br)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(netlink.LinkSetUp(brLink)).To(gomega.Succeed())

	var guests []*NetNS
	var bindings []*BridgeBinding
	for i, addr := range []string{"10.251.9.2/24", "10.251.9.3/24"} {
		l, gu := newNS(t), newNS(t)
		host := testutil.UniqueName("fptv")
		nsh, err := netns.GetFromPath(l.Path)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MTU: 9000, MasterIndex: brLink.Attrs().Index},
			PeerName: "pod16477688c0e", PeerNamespace: netlink.NsFd(int(nsh))})).To(gomega.Succeed())
		nsh.Close()
		t.Cleanup(func() { _ = DeleteHostLink(host) })
		hl, _ := netlink.LinkByName(host)
		g.Expect(netlink.LinkSetUp(hl)).To(gomega.Succeed())
		_, err = l.Exec("ip", "link", "set", "pod16477688c0e", "mtu", "9000", "up")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = l.Exec("ip", "addr", "add", addr, "dev", "pod16477688c0e")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		pod, err := l.Link("pod16477688c0e")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		podMAC := pod.Attrs().HardwareAddr.String()

		b, err := AddBridgeBinding(l, gu, BridgeBindingOptions{PodIfName: "pod16477688c0e", GuestIfName: "eth1"})
		g.Expect(err).NotTo(gomega.HaveOccurred(), "binding %d", i)
		t.Cleanup(func() { _ = b.Remove() })
		g.Expect(b.BridgeName).To(gomega.Equal("k6t-16477688c0e"))
		g.Expect(b.TapName).To(gomega.Equal("tap16477688c0e"))
		g.Expect(b.MAC).To(gomega.Equal(podMAC))
		g.Expect(b.Addrs).To(gomega.ConsistOf(netip.MustParsePrefix(addr)))

		eth1, err := gu.Link("eth1")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(eth1.Attrs().MTU).To(gomega.Equal(9000))
		g.Expect(eth1.Attrs().HardwareAddr.String()).To(gomega.Equal(podMAC), "the guest takes the pod interface's MAC")
		podAddrs, err := l.Addrs("pod16477688c0e")
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, a := range podAddrs {
			g.Expect(a.IP.IsGlobalUnicast()).To(gomega.BeFalse(), "the pod interface gave its address away")
		}
		out, err := l.Exec("ethtool", "-k", b.BridgeName)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(string(out)).To(gomega.MatchRegexp(`(?m)^tx-checksumming: off`))
		guests = append(guests, gu)
		bindings = append(bindings, b)
	}
	out, err := guests[0].Exec("ping", "-M", "do", "-s", "8972", "-c", "2", "-W", "2", "10.251.9.3")
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	g.Expect(string(out)).To(gomega.ContainSubstring("8980 bytes from 10.251.9.3"))

	g.Expect(bindings[1].Remove()).To(gomega.Succeed())
	_, err = guests[1].Link("eth1")
	g.Expect(err).To(gomega.HaveOccurred())
	_, err = bindings[1].Launcher.Link("pod16477688c0e")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the pod interface stays for CNI DEL")
}

// dialAndSee connects from client to server's podIP and returns the local and
// remote addresses the server's socket sees.
func dialAndSee(t *testing.T, client, server *NetNS, podIP netip.Addr) (string, string) {
	t.Helper()
	var ln net.Listener
	if err := server.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type seen struct{ local, remote string }
	got := make(chan seen, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(io.Discard, c)
		got <- seen{c.LocalAddr().(*net.TCPAddr).IP.String(), c.RemoteAddr().(*net.TCPAddr).IP.String()}
	}()
	if err := client.Do(func() error {
		c, err := net.DialTimeout("tcp4", net.JoinHostPort(podIP.String(), fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(make([]byte, 1<<20))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		return s.local, s.remote
	case <-time.After(5 * time.Second):
		t.Fatal("the server saw no connection")
	}
	return "", ""
}
