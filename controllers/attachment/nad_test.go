package attachment

import (
	"strings"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

func ptr[T any](v T) *T { return &v }

func TestRenderNetConf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network *v1alpha1.NetworkSpec
		want    string
	}{
		{
			name:    "defaults are the docs/design.md §3.1 example",
			network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
			want:    `{"cniVersion":"1.0.0","name":"fp-apps.db-link","type":"fastpath","namespace":"apps","datapath":"LinuxBridge","bridge":"fastpath0","mtu":9000,"offloads":{"tso":true,"gso":true,"gro":true,"txChecksum":true,"rxChecksum":true},"ipam":{"subnet":"10.250.0.0/24","type":"host-local"}}`,
		},
		{
			name: "everything set",
			network: &v1alpha1.NetworkSpec{
				Datapath: v1alpha1.DatapathOVS, Bridge: "br-fast", MTU: ptr(int32(65000)),
				Offloads: &v1alpha1.Offloads{GRO: v1alpha1.OffloadOff, GSO: v1alpha1.OffloadOff},
				IPAM:     v1alpha1.IPAMSpec{Subnet: "fd00:250::/64", RangeStart: "fd00:250::10", RangeEnd: "fd00:250::ff"},
			},
			want: `{"cniVersion":"1.0.0","name":"fp-apps.db-link","type":"fastpath","namespace":"apps","datapath":"OVS","bridge":"br-fast","mtu":65000,"offloads":{"tso":true,"gso":false,"gro":false,"txChecksum":true,"rxChecksum":true},"ipam":{"rangeEnd":"fd00:250::ff","rangeStart":"fd00:250::10","subnet":"fd00:250::/64","type":"host-local"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "db-link", Namespace: "apps"}, Spec: v1alpha1.FastPathAttachmentSpec{Network: tc.network}}
			got, err := RenderNetConf(att, RenderOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got).To(gomega.Equal(tc.want))
			// The plugin accepts what the operator renders, for pods of
			// the attachment's namespace only.
			conf, _, err := netconf.LoadNetConf([]byte(got))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(conf.RequireNamespace("apps")).To(gomega.Succeed())
			g.Expect(conf.RequireNamespace("other")).NotTo(gomega.Succeed())
		})
	}
	g := gomega.NewWithT(t)
	_, err := RenderNetConf(&v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "apps"}}, RenderOptions{})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("spec.network is not set")))
}

// TestRenderNetConfNamesPerNamespace is issue 24 item 1: a/db and b/db get
// different CNI network names (host-local directories, GC scopes) and each
// netconf names its own namespace; a long name is hashed and still loads.
func TestRenderNetConfNamesPerNamespace(t *testing.T) {
	g := gomega.NewWithT(t)
	render := func(ns, name string) *netconf.NetConf {
		att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.FastPathAttachmentSpec{Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}}
		got, err := RenderNetConf(att, RenderOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		conf, _, err := netconf.LoadNetConf([]byte(got))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		return conf
	}
	a, b := render("a", "db"), render("b", "db")
	g.Expect(a.Name).NotTo(gomega.Equal(b.Name))
	g.Expect([]string{a.Namespace, b.Namespace}).To(gomega.Equal([]string{"a", "b"}))
	long := render(strings.Repeat("n", 63), strings.Repeat("x", 253))
	g.Expect(len(long.Name)).To(gomega.BeNumerically("<=", wellknown.MaxNetworkNameLen))
	g.Expect(long.Namespace).To(gomega.Equal(strings.Repeat("n", 63)))
}

// TestRenderNetConfPortSecurity: a network with portSecurity Disabled
// renders "portSecurity": false; Enabled (the default) leaves the key out,
// which the plugin reads as on.
func TestRenderNetConfPortSecurity(t *testing.T) {
	g := gomega.NewWithT(t)
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "a"},
		Spec: v1alpha1.FastPathAttachmentSpec{Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}}}}
	for ps, on := range map[v1alpha1.PortSecurity]bool{"": true, v1alpha1.PortSecurityEnabled: true, v1alpha1.PortSecurityDisabled: false} {
		got, err := RenderNetConf(att, RenderOptions{PortSecurity: ps})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		conf, _, err := netconf.LoadNetConf([]byte(got))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(conf.PortSecurityOn()).To(gomega.Equal(on), "portSecurity %q: %s", ps, got)
	}
}
