package portsec_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/portsec"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// TestDHCPThroughPortSecurity: a guest behind a bridge port with port
// security (its MAC and its one IPv4 address) still gets that address from
// the node agent's DHCP responder, though its DISCOVER and REQUEST come
// from 0.0.0.0 (portsec.DHCPClientRule).
func TestDHCPThroughPortSecurity(t *testing.T) {
	g := NewWithT(t)
	mac := net.HardwareAddr{0x02, 0xfa, 0x57, 0, 0, 0x09}
	guest := dhcptest.NewGuest(t, mac, 1500)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g.Expect(portsec.Apply(ctx, portsec.Port{HostIf: guest.HostIf, MAC: mac, IPs: []net.IP{net.ParseIP("10.56.0.9")}})).To(Succeed())
	t.Cleanup(func() { _ = portsec.Remove(context.Background(), guest.HostIf) })
	g.Expect(portsec.Check(ctx, guest.HostIf)).To(Succeed())

	stateDir := t.TempDir()
	ipamNetwork := netconf.IPAMNetworkName(guest.Bridge)
	g.Expect(leases.Write(stateDir, &leases.Lease{ContainerID: "c1", IfName: "net1", Bridge: guest.Bridge, MAC: mac.String(),
		Address: netip.MustParsePrefix("10.56.0.9/24"), MTU: 1500, IPAMType: "host-local", IPAMNetwork: ipamNetwork})).To(Succeed())
	// The address as the bridge's host-local allocator holds it for c1/net1.
	allocator := filepath.Join(netconf.IPAMDataDir(stateDir), ipamNetwork)
	g.Expect(os.MkdirAll(allocator, 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(allocator, "10.56.0.9"), []byte("c1\r\nnet1"), 0o600)).To(Succeed())
	r := dhcp.New(dhcp.Config{Bridge: guest.Bridge, Leases: dhcp.NewTable(filepath.Join(stateDir, leases.Dir), testr.New(t)), Log: testr.New(t)})
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	t.Cleanup(func() {
		rcancel()
		<-done
	})
	select {
	case <-r.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("responder stopped: %v", err)
	}

	lease, err := guest.Client(t, nil, 2*time.Second).Request(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lease.ACK.YourIPAddr.String()).To(Equal("10.56.0.9"))
	g.Expect(r.Stats().Ignored).To(BeZero())
	g.Expect(r.Stats().Unconfirmed).To(BeZero())
}
