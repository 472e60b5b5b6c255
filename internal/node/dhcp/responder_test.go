package dhcp_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// serve writes lease l for guest g's bridge under a new state directory and
// runs a responder on that bridge until the test ends.
func serve(t *testing.T, g *dhcptest.Guest, ls ...*leases.Lease) *dhcp.Responder {
	t.Helper()
	return serveIn(t, t.TempDir(), g, ls...)
}

// serveIn is serve with the state directory stateDir; each lease of
// host-local is reserved for itself in its allocator (reserve).
func serveIn(t *testing.T, stateDir string, g *dhcptest.Guest, ls ...*leases.Lease) *dhcp.Responder {
	t.Helper()
	for _, l := range ls {
		NewWithT(t).Expect(leases.Write(stateDir, l)).To(Succeed())
		if l.IPAMType == "host-local" {
			reserve(t, stateDir, l, l.ContainerID, l.IfName)
		}
	}
	r := dhcp.New(dhcp.Config{Bridge: g.Bridge, Leases: dhcp.NewTable(filepath.Join(stateDir, leases.Dir), testr.New(t)), Log: testr.New(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		NewWithT(t).Expect(<-done).To(Succeed())
	})
	select {
	case <-r.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("responder stopped: %v", err)
	}
	return r
}

// lease is the lease the plugin writes for guest g with address addr,
// allocated by host-local in g's bridge's allocator.
func lease(g *dhcptest.Guest, addr string) *leases.Lease {
	return &leases.Lease{ContainerID: "c1", IfName: "net1", Network: "n", Bridge: g.Bridge, MAC: g.MAC.String(),
		Address: netip.MustParsePrefix(addr), Gateway: netip.MustParseAddr("10.56.0.1"), MTU: 9000,
		IPAMType: "host-local", IPAMNetwork: netconf.IPAMNetworkName(g.Bridge)}
}

// record writes lease l under stateDir and reserves its address for it,
// as the plugin's ADD leaves them.
func record(t *testing.T, stateDir string, l *leases.Lease) {
	t.Helper()
	NewWithT(t).Expect(leases.Write(stateDir, l)).To(Succeed())
	reserve(t, stateDir, l, l.ContainerID, l.IfName)
}

// reserve records l's address as allocated to containerID/ifName in l's
// host-local directory under stateDir, as host-local's disk store does.
func reserve(t *testing.T, stateDir string, l *leases.Lease, containerID, ifName string) {
	t.Helper()
	g := NewWithT(t)
	dir := filepath.Join(netconf.IPAMDataDir(stateDir), l.IPAMNetwork)
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, l.Address.Addr().String()), []byte(containerID+"\r\n"+ifName), 0o600)).To(Succeed())
}

var guestMAC = net.HardwareAddr{0x02, 0xfa, 0x57, 0, 0, 0x07}

// A guest's DHCP client gets the recorded address, prefix, gateway and
// MTU through the whole DISCOVER-OFFER-REQUEST-ACK exchange.
func TestResponderHandsOutTheRecordedAddress(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	r := serve(t, guest, lease(guest, "10.56.0.7/24"),
		// Another bridge's lease of the same MAC is not this bridge's.
		&leases.Lease{ContainerID: "c2", IfName: "net1", Bridge: "other", MAC: guestMAC.String(), Address: netip.MustParsePrefix("10.99.0.9/16")})
	c := guest.Client(t, nil, 2*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := c.Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	ack := got.ACK
	g.Expect(ack.MessageType()).To(Equal(dhcpv4.MessageTypeAck))
	g.Expect(ack.YourIPAddr.String()).To(Equal("10.56.0.7"))
	g.Expect(ack.SubnetMask()).To(Equal(net.CIDRMask(24, 32)))
	g.Expect(ack.Router()).To(HaveLen(1))
	g.Expect(ack.Router()[0].String()).To(Equal("10.56.0.1"))
	g.Expect(ack.GetOneOption(dhcpv4.OptionInterfaceMTU)).To(Equal([]byte{0x23, 0x28}), "MTU 9000")
	g.Expect(ack.ServerIdentifier().String()).To(Equal(dhcp.DefaultServerID.String()))
	g.Expect(ack.IPAddressLeaseTime(0)).To(Equal(dhcp.DefaultLeaseTime))
	// Counted after the send: the client may have the ACK first.
	g.Eventually(r.Stats).Should(Equal(dhcp.Stats{Answered: 2}), "one OFFER, one ACK")
}

// A MAC without a lease on the bridge gets no OFFER.
func TestResponderIgnoresUnknownMAC(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	r := serve(t, guest, lease(guest, "10.56.0.7/24"))
	c := guest.Client(t, net.HardwareAddr{0x02, 0xfa, 0x57, 0, 0, 0x08}, 30*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.DiscoverOffer(ctx)
		done <- err
	}()
	// The responder has seen the DISCOVER and decided: no answer.
	g.Eventually(func() dhcp.Stats { return r.Stats() }, 10*time.Second, 10*time.Millisecond).Should(Equal(dhcp.Stats{Ignored: 1}))
	g.Consistently(done).ShouldNot(Receive(), "no OFFER arrives")
	cancel()
	g.Eventually(done).Should(Receive(MatchError(ContainSubstring("context canceled"))))
	g.Expect(r.Stats().Answered).To(BeZero())
}

// A REQUEST for another address than the recorded one is NAKed.
func TestResponderNAKsAnotherAddress(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	r := serve(t, guest, lease(guest, "10.56.0.7/24"))
	c := guest.Client(t, nil, 2*time.Second)

	req, err := dhcpv4.New(dhcpv4.WithHwAddr(guestMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.56.0.99"))))
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nak, err := c.SendAndRead(ctx, nclient4.DefaultServers, req, nclient4.IsMessageType(dhcpv4.MessageTypeNak, dhcpv4.MessageTypeAck))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nak.MessageType()).To(Equal(dhcpv4.MessageTypeNak))
	g.Expect(nak.YourIPAddr.IsUnspecified()).To(BeTrue())
	g.Eventually(r.Stats).Should(Equal(dhcp.Stats{Answered: 1}))
}

// A lease written after the responder started is answered; one removed
// is not any more.
func TestResponderFollowsLeaseChanges(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	stateDir := t.TempDir()
	r := serveIn(t, stateDir, guest)
	c := guest.Client(t, nil, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l := lease(guest, "10.56.0.7/24")
	g.Expect(leases.Write(stateDir, l)).To(Succeed())
	reserve(t, stateDir, l, l.ContainerID, l.IfName)
	offer, err := c.DiscoverOffer(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(offer.YourIPAddr.String()).To(Equal("10.56.0.7"))

	l.Address = netip.MustParsePrefix("10.56.0.8/24")
	g.Expect(leases.Write(stateDir, l)).To(Succeed())
	reserve(t, stateDir, l, l.ContainerID, l.IfName)
	offer, err = c.DiscoverOffer(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(offer.YourIPAddr.String()).To(Equal("10.56.0.8"))

	g.Expect(leases.Remove(stateDir, l.ContainerID, l.IfName)).To(Succeed())
	// Counted after the send: the client may have the OFFER first.
	g.Eventually(r.Stats).Should(Equal(dhcp.Stats{Answered: 2}), "two OFFERs")
	before := r.Stats()
	dctx, dcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.DiscoverOffer(dctx)
		done <- err
	}()
	g.Eventually(r.Stats, 10*time.Second, 10*time.Millisecond).Should(Equal(dhcp.Stats{Answered: before.Answered, Ignored: 1}))
	dcancel()
	g.Eventually(done).Should(Receive(HaveOccurred()))
}

// BusyBox's udhcpc, a DHCP client other than the library's own, gets the
// recorded address, prefix, gateway and MTU. Skipped without busybox.
func TestResponderAnswersUdhcpc(t *testing.T) {
	g := NewWithT(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on PATH")
	}
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	serve(t, guest, lease(guest, "10.56.0.7/24"))

	// udhcpc runs the script on each event; "bound" carries the lease.
	dir := t.TempDir()
	script, out := filepath.Join(dir, "script"), filepath.Join(dir, "bound")
	g.Expect(os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && env > "+out+"\nexit 0\n"), 0o700)).To(Succeed())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+guest.NS.Path(), busybox, "udhcpc",
		"-i", dhcptest.GuestIf, "-f", "-q", "-n", "-t", "5", "-T", "2", "-O", "mtu", "-s", script)
	b, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(b))
	env, err := os.ReadFile(out)
	g.Expect(err).NotTo(HaveOccurred(), string(b))
	g.Expect(strings.Split(string(env), "\n")).To(ContainElements("ip=10.56.0.7", "subnet=255.255.255.0", "mask=24",
		"router=10.56.0.1", "mtu=9000", "serverid="+dhcp.DefaultServerID.String()))
}
