package dhcp_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// TestReservation: a table over recorded host-local directories (file name
// the address, content the owner, as host-local's backend/disk writes
// them): which leases their allocator confirms, which it refuses and which
// it cannot check.
func TestReservation(t *testing.T) {
	const addr = "10.56.0.7"
	shared := netconf.IPAMNetworkName("br0") // the bridge's allocator
	lease := func(ipamType, ipamNetwork string) *leases.Lease {
		return &leases.Lease{ContainerID: "c1", IfName: "net1", Network: "fp-a.db", Bridge: "br0", MAC: "02:00:00:00:00:01",
			Address: netip.MustParsePrefix(addr + "/24"), IPAMType: ipamType, IPAMNetwork: ipamNetwork}
	}
	current := lease("host-local", shared)
	old := lease("", "") // written by a plugin before leases named their allocator
	type verdict int
	const (
		confirmed verdict = iota
		refused           // checked, not this lease's
		unchecked         // no allocator to read: answered as before
		failed            // the reservation cannot be read: not answered
	)
	for _, tc := range []struct {
		name   string
		files  map[string]string // under the IPAM data directory; "" content: a directory
		links  map[string]string // symbolic links: name -> target
		lease  *leases.Lease
		want   verdict
		holder string
	}{
		{name: "reserved for the lease", files: map[string]string{shared + "/" + addr: "c1\r\nnet1"}, lease: current, want: confirmed},
		{name: "reserved in host-local's format before v0.8 (container ID only)", files: map[string]string{shared + "/" + addr: "c1"}, lease: current, want: confirmed},
		{name: "reserved with a trailing newline", files: map[string]string{shared + "/" + addr: "c1\r\nnet1\n"}, lease: current, want: confirmed},
		{name: "no reservation", files: map[string]string{shared + "/10.56.0.8": "c1\r\nnet1", shared + "/last_reserved_ip.0": addr},
			lease: current, want: refused},
		{name: "no allocator directory", lease: current, want: refused},
		{name: "reserved for another container", files: map[string]string{shared + "/" + addr: "c2\r\nnet1"}, lease: current, want: refused, holder: "c2/net1"},
		{name: "reserved for another interface of the container", files: map[string]string{shared + "/" + addr: "c1\r\nnet2"}, lease: current, want: refused, holder: "c1/net2"},
		{name: "empty reservation (host-local binary between create and write)", files: map[string]string{shared + "/" + addr: "\x20"}, lease: current, want: refused},
		{name: "reserved in another network's directory only", files: map[string]string{"fpnet-br1/" + addr: "c1\r\nnet1", shared: ""}, lease: current, want: refused},
		{name: "a symbolic link is nobody's reservation", files: map[string]string{"elsewhere": "c1\r\nnet1", shared: ""},
			links: map[string]string{shared + "/" + addr: "../elsewhere"}, lease: current, want: failed},
		{name: "IPAM network not a directory name", lease: &leases.Lease{ContainerID: "c1", IfName: "net1", Bridge: "br0",
			Address: netip.MustParsePrefix(addr + "/24"), IPAMType: "host-local", IPAMNetwork: ".."}, want: failed},
		{name: "another IPAM plugin", files: map[string]string{shared + "/" + addr: "c2\r\nnet1"}, lease: lease("static", shared), want: unchecked},

		{name: "old lease, reserved in the bridge's allocator", files: map[string]string{shared + "/" + addr: "c1\r\nnet1"}, lease: old, want: confirmed},
		{name: "old lease, reserved in the attachment network's directory (before one allocator per bridge)",
			files: map[string]string{"fp-a.db/" + addr: "c1\r\nnet1"}, lease: old, want: confirmed},
		{name: "old lease, the bridge's allocator decides over the attachment network's",
			files: map[string]string{shared + "/" + addr: "c2\r\nnet1", "fp-a.db/" + addr: "c1\r\nnet1"}, lease: old, want: refused, holder: "c2/net1"},
		{name: "old lease, reserved for another container", files: map[string]string{"fp-a.db/" + addr: "c2\r\nnet1"}, lease: old, want: refused, holder: "c2/net1"},
		{name: "old lease, host-local directories without its address", files: map[string]string{shared + "/10.56.0.8": "c3\r\nnet1"}, lease: old, want: refused},
		{name: "old lease without a network name, reserved in the bridge's allocator", files: map[string]string{shared + "/" + addr: "c1\r\nnet1"},
			lease: &leases.Lease{ContainerID: "c1", IfName: "net1", Bridge: "br0", Address: netip.MustParsePrefix(addr + "/24")}, want: confirmed},
		{name: "old lease, no host-local directory (another IPAM plugin)", files: map[string]string{"fpnet-br1/" + addr: "c2\r\nnet1"}, lease: old, want: unchecked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			stateDir := t.TempDir()
			ipamDir := netconf.IPAMDataDir(stateDir)
			for name, content := range tc.files {
				p := filepath.Join(ipamDir, name)
				if content == "" {
					g.Expect(os.MkdirAll(p, 0o755)).To(Succeed())
					continue
				}
				g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
			}
			for name, target := range tc.links {
				g.Expect(os.Symlink(target, filepath.Join(ipamDir, name))).To(Succeed())
			}
			tab := dhcp.NewTable(filepath.Join(stateDir, leases.Dir), logr.Discard())
			r, err := tab.Reservation(tc.lease)
			if tc.want == failed {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Checked()).To(Equal(tc.want != unchecked), "checked: %+v", r)
			if tc.want != unchecked {
				g.Expect(r.Confirms(tc.lease)).To(Equal(tc.want == confirmed), "confirms: %+v", r)
			}
			if tc.holder != "" {
				g.Expect(r.Holder()).To(Equal(tc.holder))
			}
		})
	}
}
