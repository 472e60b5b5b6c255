package netconf_test

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
)

func TestParseArgs(t *testing.T) {
	g := NewWithT(t)
	a, err := netconf.ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=apps;K8S_POD_NAME=db-0;OTHER=x")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.PodNamespace()).To(Equal("apps"))
	g.Expect(a.Pod()).To(Equal("apps/db-0"))

	a, err = netconf.ParseArgs("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.PodNamespace()).To(BeEmpty())
	g.Expect(a.Pod()).To(BeEmpty(), "no pod name")

	_, err = netconf.ParseArgs("OTHER=x")
	var cniErr *types.Error
	g.Expect(err).To(BeAssignableToTypeOf(cniErr))
	g.Expect(err.(*types.Error).Code).To(Equal(uint(types.ErrInvalidEnvironmentVariables)))
	g.Expect(err.Error()).To(HavePrefix("failed to parse CNI_ARGS: "))
}

func TestContainerMAC(t *testing.T) {
	for _, tc := range []struct {
		name, runtimeMAC, args, want, err string
	}{
		{name: "none", want: ""},
		{name: "runtimeConfig first", runtimeMAC: "02:00:00:00:00:01", args: "MAC=02:00:00:00:00:02", want: "02:00:00:00:00:01"},
		{name: "CNI_ARGS", args: "MAC=02:00:00:00:00:0A", want: "02:00:00:00:00:0a"},
		{name: "bad CNI_ARGS", args: "MAC=zz", err: "CNI_ARGS MAC"},
		{name: "bad runtimeConfig", runtimeMAC: "01:00:00:00:00:01", err: "runtimeConfig.mac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			conf := &netconf.NetConf{}
			if tc.runtimeMAC != "" {
				conf.RuntimeConfig = &netconf.RuntimeConfig{MAC: tc.runtimeMAC}
			}
			a, err := netconf.ParseArgs(tc.args)
			g.Expect(err).NotTo(HaveOccurred())
			mac, err := conf.ContainerMAC(a)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				g.Expect(err.(*types.Error).Code).To(Equal(uint(types.ErrInvalidNetworkConfig)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mac).To(Equal(tc.want))
		})
	}
}
