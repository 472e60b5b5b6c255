package plugin

import (
	"net"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	. "github.com/onsi/gomega"
)

// TestDefaultGateway4: a guest is told a router only when the IPAM result
// has an IPv4 default route; host-local's gateway alone is not one.
func TestDefaultGateway4(t *testing.T) {
	g := NewWithT(t)
	ipc := &current.IPConfig{Address: net.IPNet{IP: net.ParseIP("10.250.0.7").To4(), Mask: net.CIDRMask(24, 32)}, Gateway: net.ParseIP("10.250.0.1")}
	route := func(dst string, gw string) *types.Route {
		_, n, err := net.ParseCIDR(dst)
		g.Expect(err).NotTo(HaveOccurred())
		return &types.Route{Dst: *n, GW: net.ParseIP(gw)}
	}
	for _, tc := range []struct {
		name   string
		routes []*types.Route
		want   string
	}{
		{"no routes: host-local's gateway is no default route", nil, "invalid IP"},
		{"a subnet route only", []*types.Route{route("10.96.0.0/12", "10.250.0.1")}, "invalid IP"},
		{"an IPv6 default route", []*types.Route{route("::/0", "fd00::1")}, "invalid IP"},
		{"a default route with its gateway", []*types.Route{route("0.0.0.0/0", "10.250.0.254")}, "10.250.0.254"},
		{"a default route without one: the address's gateway", []*types.Route{route("0.0.0.0/0", "")}, "10.250.0.1"},
	} {
		got := defaultGateway4(&current.Result{IPs: []*current.IPConfig{ipc}, Routes: tc.routes}, ipc)
		g.Expect(got.String()).To(Equal(tc.want), tc.name)
	}
}
