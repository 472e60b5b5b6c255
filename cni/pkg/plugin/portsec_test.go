package plugin_test

import (
	"encoding/binary"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestPortSecurityDropsSpoofedSource is issue 24 item 6: a guest could
// send from any MAC and IP on the bridge and so pose as a neighbour. Two
// network namespaces on one Linux bridge (the plugin's ADD, port security
// on by default): frames from A with a spoofed source MAC, or with A's MAC
// and a spoofed source IP, never reach B; a frame with A's own MAC and IP
// does. The frames leave A in order on one CPU, so B having received the
// last (legitimate) one means the earlier ones were not merely late; the
// port's drop counters say the same from the bridge's side.
func TestPortSecurityDropsSpoofedSource(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	nsA, nsB := cnitest.NewNS(t), cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a, b := e.mustAdd(nsA, conf), e.mustAdd(nsB, conf)
	t.Cleanup(func() { _ = e.del(a, nsA.Path()); _ = e.del(b, nsB.Path()) })

	aMAC := sendSpoofedAndLegit(t, a, b, nsA, nsB, false)

	chain := nftChain(t, a.hostIf())
	g.Expect(dropCount(t, chain, `ether saddr != `+aMAC.String())).To(BeNumerically(">=", 1), chain)
	g.Expect(dropCount(t, chain, `ip saddr != `)).To(BeNumerically(">=", 1), chain)

	// CHECK sees the rules, and misses them once they are gone.
	g.Expect(e.check(b)).To(Succeed())
	g.Expect(exec.Command("nft", "delete", "element", "bridge", portsec.TableName, "ports", `{ "`+b.hostIf()+`" }`).Run()).To(Succeed())
	g.Expect(e.check(b)).To(MatchError(ContainSubstring("port security of " + b.hostIf() + " is missing")))

	// DEL removes the port's rules.
	g.Expect(e.del(a, nsA.Path())).To(Succeed())
	out, err := exec.Command("nft", "list", "chain", "bridge", portsec.TableName, portsec.ChainName(a.hostIf())).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "chain of a deleted attachment: %s", out)
}

// TestPortSecurityOVSDropsSpoofedSource: the same guarantee on an OVS
// bridge (userspace datapath, which reads its ports with AF_PACKET before
// any host-side hook): the rules sit on the egress of the pod's interface
// inside its namespace (portsec.EgressTable), so spoofed frames never reach
// the switch; CHECK sees them and misses them once gone.
func TestPortSecurityOVSDropsSpoofedSource(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.StartOVS(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathOVS, "1.0.0")
	nsA, nsB := cnitest.NewNS(t), cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a, b := e.mustAdd(nsA, conf), e.mustAdd(nsB, conf)
	t.Cleanup(func() { _ = e.del(a, nsA.Path()); _ = e.del(b, nsB.Path()) })

	aMAC := sendSpoofedAndLegit(t, a, b, nsA, nsB, true)

	chain := egressChain(t, nsA, a.ifName)
	g.Expect(chain).To(ContainSubstring(`hook egress device "net1"`))
	g.Expect(dropCount(t, chain, `ether saddr != `+aMAC.String())).To(BeNumerically(">=", 1), chain)
	g.Expect(dropCount(t, chain, `ip saddr != `)).To(BeNumerically(">=", 1), chain)
	g.Expect(portsecChainExists(a.hostIf())).To(BeFalse(), "no host-side rules for an OVS port")

	g.Expect(e.check(b)).To(Succeed())
	g.Expect(nsB.Do(func(ns.NetNS) error {
		return exec.Command("nft", "delete", "table", "netdev", portsec.EgressTable).Run()
	})).To(Succeed())
	g.Expect(e.check(b)).To(MatchError(ContainSubstring("port security of net1 is missing")))

	// Disabled: no rules.
	nsC := cnitest.NewNS(t)
	c := e.mustAdd(nsC, e.conf(cnitest.Conf{Extra: map[string]any{"portSecurity": false}}))
	t.Cleanup(func() { _ = e.del(c, nsC.Path()) })
	g.Expect(nsC.Do(func(ns.NetNS) error {
		return exec.Command("nft", "list", "table", "netdev", portsec.EgressTable).Run()
	})).To(HaveOccurred(), "portSecurity false: no table in the pod")
}

// egressChain lists ifName's egress chain in netns with its counters.
func egressChain(t *testing.T, netns ns.NetNS, ifName string) string {
	t.Helper()
	var out []byte
	err := netns.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command("nft", "list", "chain", "netdev", portsec.EgressTable, portsec.EgressChainName(ifName)).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("failed to list the egress chain of %s: %v: %s", ifName, err, out)
	}
	return string(out)
}

// TestPortSecurityOff: portSecurity false installs no rules for the port.
func TestPortSecurityOff(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{Extra: map[string]any{"portSecurity": false}}))
	t.Cleanup(func() { _ = e.del(a, netns.Path()) })
	out, err := exec.Command("nft", "list", "chain", "bridge", portsec.TableName, portsec.ChainName(a.hostIf())).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), "no chain for a port without port security: %s", out)
	g.Expect(plugin.HostIfName(a.containerID, a.ifName)).To(Equal(a.hostIf()))
}

// sendSpoofedAndLegit sends from A's net1 three UDP frames to B: one with a
// spoofed source MAC, one with A's MAC and a spoofed source IP, then a
// legitimate one, in order on one CPU; it expects B to receive the
// legitimate frame and nothing else, and returns A's MAC. droppedAtSender:
// the rules sit on A's own egress, so the spoofed sends themselves fail.
func sendSpoofedAndLegit(t *testing.T, a, b *attachment, nsA, nsB ns.NetNS, droppedAtSender bool) net.HardwareAddr {
	t.Helper()
	g := NewWithT(t)
	macOf := func(x *attachment) net.HardwareAddr {
		m, err := net.ParseMAC(x.result.Interfaces[1].Mac)
		g.Expect(err).NotTo(HaveOccurred())
		return m
	}
	aMAC, bMAC := macOf(a), macOf(b)
	aIP, bIP := a.result.IPs[0].Address.IP.To4(), b.result.IPs[0].Address.IP.To4()
	spoofMAC, _ := net.ParseMAC("02:66:66:66:66:66")
	spoofIP := net.IPv4(10, 250, 0, 200).To4()

	recv := packetSocket(t, nsB, "net1")
	var got []string
	drain := func() []string {
		buf := make([]byte, 2048)
		for {
			n, from, err := unix.Recvfrom(recv, buf, unix.MSG_DONTWAIT)
			if err != nil {
				return got
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue // B's own replies
			}
			if marker := payloadMarker(buf[:n]); marker != "" {
				got = append(got, marker)
			}
		}
	}

	send := packetSocket(t, nsA, "net1")
	ifIndex := linkIndex(t, nsA, "net1")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	g.Expect(unix.SchedGetaffinity(0, &all)).To(Succeed())
	defer unix.SchedSetaffinity(0, &all) //nolint:errcheck // restoring the thread's CPUs
	one.Set(0)
	g.Expect(unix.SchedSetaffinity(0, &one)).To(Succeed(), "one CPU keeps the frames in order")
	for _, f := range []struct {
		marker string
		mac    net.HardwareAddr
		ip     net.IP
	}{
		{"spoofed-mac", spoofMAC, aIP},
		{"spoofed-ip", aMAC, spoofIP},
		{"legit", aMAC, aIP},
	} {
		frame := udpFrame(f.mac, bMAC, f.ip, bIP, f.marker)
		err := unix.Sendto(send, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifIndex, Protocol: htons(unix.ETH_P_IP), Halen: 6})
		if f.marker != "legit" && droppedAtSender {
			// The egress hook dropped it in A's own transmit path, which the
			// kernel reports to the sender as NET_XMIT_DROP (ENOBUFS).
			g.Expect(err).To(MatchError(unix.ENOBUFS), "%s: dropped on A's egress", f.marker)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), f.marker)
	}
	g.Eventually(drain).Should(ContainElement("legit"), "the legitimate frame reaches B")
	g.Expect(got).To(ConsistOf("legit"), "no spoofed frame reaches B")

	return aMAC
}

// packetSocket opens an AF_PACKET socket for IPv4 frames on ifName in netns,
// closed at cleanup.
func packetSocket(t *testing.T, netns ns.NetNS, ifName string) int {
	t.Helper()
	var fd int
	err := netns.Do(func(ns.NetNS) error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("failed to open packet socket on %s in %s: %v", ifName, netns.Path(), err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func linkIndex(t *testing.T, netns ns.NetNS, ifName string) int {
	t.Helper()
	var idx int
	if err := netns.Do(func(ns.NetNS) error {
		ifi, err := net.InterfaceByName(ifName)
		if err == nil {
			idx = ifi.Index
		}
		return err
	}); err != nil {
		t.Fatalf("failed to look up %s: %v", ifName, err)
	}
	return idx
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// markerPrefix starts the UDP payload of the test's frames.
const markerPrefix = "fastpath-portsec:"

// udpFrame is an Ethernet frame carrying an IPv4 UDP datagram (port 9 to
// port 9, "discard") whose payload is markerPrefix + marker.
func udpFrame(src, dst net.HardwareAddr, srcIP, dstIP net.IP, marker string) []byte {
	payload := []byte(markerPrefix + marker)
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 9)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	copy(ip[12:], srcIP.To4())
	copy(ip[16:], dstIP.To4())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	frame := append(append(append([]byte{}, dst...), src...), 0x08, 0x00)
	return append(append(frame, ip...), udp...)
}

// payloadMarker returns the marker of a frame udpFrame made, "" for others.
func payloadMarker(frame []byte) string {
	if len(frame) < 14+20+8 || frame[12] != 0x08 || frame[13] != 0x00 || frame[14+9] != unix.IPPROTO_UDP {
		return ""
	}
	payload := string(frame[14+20+8:])
	if len(payload) <= len(markerPrefix) || payload[:len(markerPrefix)] != markerPrefix {
		return ""
	}
	return payload[len(markerPrefix):]
}

// nftChain lists the port security chain of hostIf with its counters.
func nftChain(t *testing.T, hostIf string) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "chain", "bridge", portsec.TableName, portsec.ChainName(hostIf)).CombinedOutput()
	if err != nil {
		t.Fatalf("failed to list chain of %s: %v: %s", hostIf, err, out)
	}
	return string(out)
}

// dropCount is the packet counter of the first rule of chain containing match.
func dropCount(t *testing.T, chain, match string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(match) + `.*counter packets (\d+)`).FindStringSubmatch(chain)
	if m == nil {
		t.Fatalf("no rule matching %q in\n%s", match, chain)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// portsecChainExists reports whether the port security chain of hostIf exists.
func portsecChainExists(hostIf string) bool {
	return exec.Command("nft", "list", "chain", "bridge", portsec.TableName, portsec.ChainName(hostIf)).Run() == nil
}
