package plugin_test

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestAddRefusesOtherNamespace is issue 24 item 1: Multus without
// namespaceIsolation lets a pod of namespace b name a/db-link, so the
// plugin itself refuses an ADD whose pod (CNI_ARGS K8S_POD_NAMESPACE) is
// not in the netconf's namespace, or is in no namespace, or whose netconf
// names none: CNI error 7 naming both namespaces, and nothing created (no
// veth, no bridge port, no state file, no IPAM allocation).
func TestAddRefusesOtherNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		conf    cnitest.Conf
		cniArgs string
		msg     []string
	}{
		{"other namespace", cnitest.Conf{Namespace: "a"}, "IgnoreUnknown=1;K8S_POD_NAMESPACE=b;K8S_POD_NAME=virt-launcher-x;MAC=02:fa:57:00:00:01",
			[]string{`network "fp-test" belongs to namespace "a": refused to add a pod of namespace "b"`}},
		{"no pod namespace", cnitest.Conf{Namespace: "a"}, "IgnoreUnknown=1;K8S_POD_NAME=virt-launcher-x",
			[]string{`network "fp-test" belongs to namespace "a" but CNI_ARGS has no K8S_POD_NAMESPACE`}},
		{"netconf without namespace", cnitest.Conf{NoNamespace: true}, cnitest.PodArgs,
			[]string{`namespace is required: network "fp-test" names no namespace`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
			netns := cnitest.NewNS(t)
			a, err := e.add(netns, e.conf(tc.conf), tc.cniArgs)
			g.Expect(err).To(HaveOccurred(), "ADD must be refused")
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
			g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
			for _, m := range tc.msg {
				g.Expect(cniErr.Msg).To(ContainSubstring(m))
			}
			e.expectGone(g, a, true)
			e.expectNothingLeft(g, netns)
			g.Expect(cnitest.StateFiles(t, e.stateDir)).To(BeEmpty())
		})
	}
}

// TestAddAcceptsOwnNamespace: the pod of the netconf's namespace is wired.
func TestAddAcceptsOwnNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	netns := cnitest.NewNS(t)
	a, err := e.add(netns, e.conf(cnitest.Conf{Namespace: "a"}), "IgnoreUnknown=1;K8S_POD_NAMESPACE=a;K8S_POD_NAME=virt-launcher-x")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cnitest.Links(t, netns)).To(ConsistOf("lo", "net1"))
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}
