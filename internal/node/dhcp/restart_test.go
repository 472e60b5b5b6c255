package dhcp_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// dirState is what a directory holds: each entry's mode, size,
// modification time and content, and the directory's own modification time.
type dirState struct {
	mtime   time.Time
	entries map[string]entryState
}

type entryState struct {
	mode    os.FileMode
	size    int64
	mtime   time.Time
	content string
}

func readDirState(g *WithT, dir string) dirState {
	st, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	ds := dirState{mtime: st.ModTime(), entries: map[string]entryState{}}
	des, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, de := range des {
		fi, err := de.Info()
		g.Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		ds.entries[de.Name()] = entryState{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), content: string(b)}
	}
	return ds
}

// renewal is a REQUEST of a bound guest (RFC 2131 §4.3.2, §4.4.5): ciaddr
// is its address, no server identifier, no requested address.
func renewal(g *WithT, ciaddr net.IP, xid dhcpv4.TransactionID) *dhcpv4.DHCPv4 {
	m, err := dhcpv4.New(dhcpv4.WithHwAddr(guestMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(ciaddr), dhcpv4.WithTransactionID(xid))
	g.Expect(err).NotTo(HaveOccurred())
	return m
}

// inFlight is a client's exchange running in the background.
type inFlight struct {
	xid  dhcpv4.TransactionID
	done chan result
}

type result struct {
	m   *dhcpv4.DHCPv4
	err error
	at  time.Time
}

func start(ctx context.Context, xid dhcpv4.TransactionID, f func(context.Context) (*dhcpv4.DHCPv4, error)) inFlight {
	x := inFlight{xid: xid, done: make(chan result, 1)}
	go func() {
		m, err := f(ctx)
		x.done <- result{m: m, err: err, at: time.Now()}
	}()
	return x
}

// The guarantee of issue 38 item 2 for DHCP: a guest renewing its lease
// while the agent restarts keeps its address. A guest gets its lease from
// the agent's responder; the agent goes (its manager stops); the guest's
// renewals (RENEWING: to the server identifier; REBINDING: broadcast), a
// rebooting guest's REQUEST (INIT-REBOOT) and a new guest's DISCOVER, sent and retransmitted in the gap, get no
// answer; a new manager on the same leases directory (the new agent)
// answers the next retransmission of each with what the old one answered:
// the same address, lease time and options. A REQUEST for another address
// gets a NAK. The bridge is the one that was there (same link, same
// ports), and the leases directory is untouched. The test waits on events
// (the frames the bridge carries), not on time: the gap lasts until each
// exchange was sent at least twice unanswered.
func TestRenewalAcrossAgentRestart(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	stateDir := t.TempDir()
	leaseDir := filepath.Join(stateDir, leases.Dir)
	record(t, stateDir, lease(guest, "10.56.0.7/24"))
	addr := net.ParseIP("10.56.0.7").To4()
	before := readDirState(g, leaseDir)
	br, err := netlink.LinkByName(guest.Bridge)
	g.Expect(err).NotTo(HaveOccurred())
	capture := dhcptest.NewCapture(t, guest.Bridge)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// 1. The old agent hands the guest its lease.
	ctx1, cancel1 := context.WithCancel(ctx)
	m1 := dhcp.NewManager(ctx1, dhcp.NewTable(leaseDir, testr.New(t)), dhcp.DefaultServerID, 0, testr.New(t))
	t.Cleanup(func() { cancel1(); m1.Stop() })
	g.Expect(m1.Sync([]string{guest.Bridge})).To(BeEmpty())
	first, err := guest.Client(t, nil, 2*time.Second).Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.ACK.YourIPAddr.Equal(addr)).To(BeTrue())
	firstOffer := first.Offer
	old := m1.Responder(guest.Bridge)

	// 2. The old agent is gone; the guest renews and rebinds, a guest
	// discovers, each retransmitting with the timeout doubled (100 ms,
	// 200 ms, ...), as a DHCP client does.
	cancel1()
	m1.Stop()
	stopped := time.Now()
	oldStats := old.Stats()
	const timeout, tries = 100 * time.Millisecond, 10
	serverAddr := &net.UDPAddr{IP: net.IP(dhcp.DefaultServerID.AsSlice()), Port: 67}
	renewC, rebindC := guest.BoundClient(t, addr, timeout, tries), guest.BoundClient(t, addr, timeout, tries)
	rebootC, discoverC := guest.BoundClient(t, net.IPv4zero, timeout, tries), guest.BoundClient(t, net.IPv4zero, timeout, tries)
	renewReq, rebindReq := renewal(g, addr, dhcpv4.TransactionID{0x38, 0, 0, 1}), renewal(g, addr, dhcpv4.TransactionID{0x38, 0, 0, 2})
	ackOrNak := nclient4.IsMessageType(dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak)
	renewing := start(ctx, renewReq.TransactionID, func(ctx context.Context) (*dhcpv4.DHCPv4, error) {
		return renewC.SendAndRead(ctx, serverAddr, renewReq, ackOrNak)
	})
	rebinding := start(ctx, rebindReq.TransactionID, func(ctx context.Context) (*dhcpv4.DHCPv4, error) {
		return rebindC.SendAndRead(ctx, nclient4.DefaultServers, rebindReq, ackOrNak)
	})
	rebootReq, err := dhcpv4.New(dhcpv4.WithHwAddr(guestMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr)), dhcpv4.WithTransactionID(dhcpv4.TransactionID{0x38, 0, 0, 5}))
	g.Expect(err).NotTo(HaveOccurred())
	rebooting := start(ctx, rebootReq.TransactionID, func(ctx context.Context) (*dhcpv4.DHCPv4, error) {
		return rebootC.SendAndRead(ctx, nclient4.DefaultServers, rebootReq, ackOrNak)
	})
	discovering := start(ctx, dhcpv4.TransactionID{0x38, 0, 0, 3}, func(ctx context.Context) (*dhcpv4.DHCPv4, error) {
		return discoverC.DiscoverOffer(ctx, dhcpv4.WithTransactionID(dhcpv4.TransactionID{0x38, 0, 0, 3}))
	})
	gap := []inFlight{renewing, rebinding, rebooting, discovering}
	for _, x := range gap {
		g.Eventually(func() int { return capture.Requests(x.xid) }, time.Minute, 5*time.Millisecond).Should(BeNumerically(">=", 2),
			"the guest sends %s and retransmits it while no agent runs", x.xid)
	}
	sentInGap := 0
	for _, x := range gap {
		g.Expect(capture.Replies(x.xid)).To(BeZero(), "nothing answers %s while no agent runs", x.xid)
		g.Expect(x.done).NotTo(Receive(), "%s is still waiting", x.xid)
		sentInGap += capture.Requests(x.xid)
	}
	g.Expect(old.Stats()).To(Equal(oldStats), "the stopped responder saw nothing more")

	// 3. The new agent: a new manager on the same leases directory. It is
	// told of the bridge and of one that does not exist, which it must not
	// create.
	missing := testutil.UniqueName("fpdb-")
	m2 := dhcp.NewManager(ctx, dhcp.NewTable(leaseDir, testr.New(t)), dhcp.DefaultServerID, 0, testr.New(t))
	t.Cleanup(m2.Stop)
	g.Expect(m2.Sync([]string{guest.Bridge, missing})).To(HaveKey(missing))
	restarted := time.Now()
	t.Logf("Gap with no responder: %s; %d DHCP messages sent and retransmitted in it, none answered", restarted.Sub(stopped), sentInGap)

	var got [4]result
	for i, x := range gap {
		g.Eventually(x.done, time.Minute).Should(Receive(&got[i]))
		g.Expect(got[i].err).NotTo(HaveOccurred(), "%s", x.xid)
		t.Logf("%s answered %s after the new responder started", x.xid, got[i].at.Sub(restarted))
	}
	for _, ack := range got[:3] {
		g.Expect(ack.m.MessageType()).To(Equal(dhcpv4.MessageTypeAck))
		g.Expect(ack.m.YourIPAddr.Equal(addr)).To(BeTrue())
		g.Expect(ack.m.Options).To(Equal(first.ACK.Options), "the same lease time, mask, router, MTU and server identifier")
	}
	g.Expect(got[0].m.IPAddressLeaseTime(0)).To(Equal(dhcp.DefaultLeaseTime))
	offer := got[3].m
	g.Expect(offer.YourIPAddr.Equal(firstOffer.YourIPAddr)).To(BeTrue())
	g.Expect(offer.Options).To(Equal(firstOffer.Options), "the same OFFER as before the restart")

	// A renewal for another address is refused.
	other := net.ParseIP("10.56.0.8").To4()
	nak, err := guest.BoundClient(t, other, time.Second, 3).SendAndRead(ctx, nclient4.DefaultServers, renewal(g, other, dhcpv4.TransactionID{0x38, 0, 0, 4}), ackOrNak)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nak.MessageType()).To(Equal(dhcpv4.MessageTypeNak))

	// The bridge is the one the old agent answered on, with its port; the
	// missing one was not made; the leases are as the plugin wrote them.
	now, err := netlink.LinkByName(guest.Bridge)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now.Attrs().Index).To(Equal(br.Attrs().Index), "the bridge was adopted, not made again")
	g.Expect(bytes.Equal(now.Attrs().HardwareAddr, br.Attrs().HardwareAddr)).To(BeTrue())
	port, err := netlink.LinkByName(guest.HostIf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(port.Attrs().MasterIndex).To(Equal(br.Attrs().Index))
	_, err = netlink.LinkByName(missing)
	g.Expect(err).To(BeAssignableToTypeOf(netlink.LinkNotFoundError{}), "the responder makes no bridge")
	g.Expect(readDirState(g, leaseDir)).To(Equal(before), "the restart changed nothing in the leases directory")
}
