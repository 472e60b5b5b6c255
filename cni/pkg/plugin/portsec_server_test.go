package plugin_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"runtime"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestPortSecurityDropsServerTraffic is issue 39 item 5: a guest could
// answer its neighbours' DHCP requests (UDP from port 67) and so hand them
// addresses, a gateway and DNS servers of its choosing, or advertise itself
// as their IPv6 router. Two namespaces on one Linux bridge (the plugin's
// ADD, port security on): every frame below carries A's own MAC and source
// address (its IPv4 address, or an IPv6 link-local one, which port security
// admits), and only the last, an ordinary datagram, reaches B. They leave A
// in order on one CPU, so B holding the last means the others were dropped,
// and each server rule's counter counts its frame.
func TestPortSecurityDropsServerTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	nsA, nsB := cnitest.NewNS(t), cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a, b := e.mustAdd(nsA, conf), e.mustAdd(nsB, conf)
	t.Cleanup(func() { _ = e.del(a, nsA.Path()); _ = e.del(b, nsB.Path()) })
	aMAC, err := net.ParseMAC(a.result.Interfaces[1].Mac)
	g.Expect(err).NotTo(HaveOccurred())
	bMAC, err := net.ParseMAC(b.result.Interfaces[1].Mac)
	g.Expect(err).NotTo(HaveOccurred())
	aIP, bIP := a.result.IPs[0].Address.IP.To4(), b.result.IPs[0].Address.IP.To4()
	aLL, allNodes := net.ParseIP("fe80::a"), net.ParseIP("ff02::1")

	frames := []struct {
		marker, rule string
		frame        []byte
	}{
		{"dhcp-offer", "udp sport 67", udp4Frame(aMAC, bMAC, aIP, net.IPv4bcast, 67, 68, "dhcp-offer")},
		{"to-dhcp-client", "udp dport 68", udp4Frame(aMAC, bMAC, aIP, bIP, 40000, 68, "to-dhcp-client")},
		{"dhcpv6-advertise", "udp sport 547", ip6Frame(aMAC, bMAC, aLL, net.ParseIP("fe80::b"), unix.IPPROTO_UDP, udpHeader(547, 546), "dhcpv6-advertise")},
		{"to-dhcpv6-client", "udp dport 546", ip6Frame(aMAC, bMAC, aLL, net.ParseIP("fe80::b"), unix.IPPROTO_UDP, udpHeader(40000, 546), "to-dhcpv6-client")},
		{"router-advert", "icmpv6 type nd-router-advert", ip6Frame(aMAC, bMAC, aLL, allNodes, unix.IPPROTO_ICMPV6, []byte{134, 0, 0, 0, 64, 0, 0x07, 0x08}, "router-advert")},
		{"legit", "", udp4Frame(aMAC, bMAC, aIP, bIP, 9, 9, "legit")},
	}

	recv := allFramesSocket(t, nsB, "net1")
	send := allFramesSocket(t, nsA, "net1")
	ifIndex := linkIndex(t, nsA, "net1")
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var all, one unix.CPUSet
		g.Expect(unix.SchedGetaffinity(0, &all)).To(Succeed())
		defer unix.SchedSetaffinity(0, &all) //nolint:errcheck // restoring the thread's CPUs
		one.Set(0)
		g.Expect(unix.SchedSetaffinity(0, &one)).To(Succeed(), "one CPU keeps the frames in order")
		for _, f := range frames {
			proto := binary.BigEndian.Uint16(f.frame[12:])
			g.Expect(unix.Sendto(send, f.frame, 0, &unix.SockaddrLinklayer{Ifindex: ifIndex, Protocol: htons(proto), Halen: 6})).To(Succeed(), f.marker)
		}
	}()
	var got []string
	drain := func() []string {
		buf := make([]byte, 2048)
		for {
			n, from, err := unix.Recvfrom(recv, buf, unix.MSG_DONTWAIT)
			if err != nil {
				return got
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if i := bytes.Index(buf[:n], []byte(markerPrefix)); i >= 0 {
				got = append(got, string(buf[i+len(markerPrefix):n]))
			}
		}
	}
	g.Eventually(drain).Should(ContainElement("legit"), "the ordinary datagram reaches B")
	g.Expect(got).To(ConsistOf("legit"), "no server traffic from A reaches B")

	chain := nftChain(t, a.hostIf())
	for _, f := range frames[:len(frames)-1] {
		g.Expect(dropCount(t, chain, f.rule)).To(BeNumerically(">=", 1), "%s\n%s", f.marker, chain)
	}
}

// allFramesSocket opens an AF_PACKET socket for frames of every EtherType on
// ifName in netns, closed at cleanup.
func allFramesSocket(t *testing.T, netns ns.NetNS, ifName string) int {
	t.Helper()
	var fd int
	err := netns.Do(func(ns.NetNS) error {
		var err error
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("failed to open packet socket on %s in %s: %v", ifName, netns.Path(), err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// udpHeader is a UDP header from sport to dport; the length is filled in by
// the frame builders.
func udpHeader(sport, dport uint16) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	return h
}

// udp4Frame is udpFrame with the given ports.
func udp4Frame(src, dst net.HardwareAddr, srcIP, dstIP net.IP, sport, dport uint16, marker string) []byte {
	f := udpFrame(src, dst, srcIP, dstIP, marker)
	binary.BigEndian.PutUint16(f[14+20:], sport)
	binary.BigEndian.PutUint16(f[14+20+2:], dport)
	return f
}

// ip6Frame is an Ethernet frame carrying an IPv6 packet of next header proto
// whose payload is l4 (a UDP or ICMPv6 header; checksums are not computed:
// the bridge does not check them) followed by markerPrefix + marker.
func ip6Frame(src, dst net.HardwareAddr, srcIP, dstIP net.IP, proto byte, l4 []byte, marker string) []byte {
	payload := append(append([]byte(nil), l4...), []byte(markerPrefix+marker)...)
	if proto == unix.IPPROTO_UDP {
		binary.BigEndian.PutUint16(payload[4:], uint16(len(payload)))
	}
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6], ip[7] = proto, 255
	copy(ip[8:], srcIP.To16())
	copy(ip[24:], dstIP.To16())
	frame := append(append(append([]byte{}, dst...), src...), 0x86, 0xdd)
	return append(append(frame, ip...), payload...)
}
