package plugin_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestAddRefusesIPAMDataDir is issue 24 item 2: a netconf named "cron.d"
// with an ipam.dataDir of the NAD writer's choosing made host-local, run by
// the plugin as root, create cron.d/ and files there. ADD now refuses any
// ipam key but netconf.IPAMKeys, naming it, with CNI error 7 and nothing
// written: the chosen directory (a scratch directory standing in for /etc)
// stays empty and nothing is left on the node.
func TestAddRefusesIPAMDataDir(t *testing.T) {
	testutil.RequireRoot(t)
	for _, key := range []string{"dataDir", "DataDir"} {
		t.Run(key, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
			etc := t.TempDir()
			netns := cnitest.NewNS(t)
			ipam := map[string]any{"type": "host-local", "subnet": cnitest.Subnet, key: etc}
			a, err := e.add(netns, e.conf(cnitest.Conf{Name: "cron.d", IPAM: ipam}), "")
			g.Expect(err).To(HaveOccurred(), "ADD must be refused")
			var cniErr *types.Error
			g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
			g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
			g.Expect(cniErr.Msg).To(ContainSubstring("ipam." + key + " is not accepted in a network configuration"))
			g.Expect(os.ReadDir(etc)).To(BeEmpty(), "nothing written where the netconf pointed")
			g.Expect(filepath.Join(e.stateDir, netconf.IPAMDataDirName)).NotTo(BeAnExistingFile(), "no IPAM call at all")
			e.expectGone(g, a, true)
			e.expectNothingLeft(g, netns)
		})
	}
}

// TestAddKeepsAddressesUnderStateDir: what IPAM allocates lands in the
// node's state directory (<stateDir>/ipam/fpnet-<bridge>), whatever the netconf.
func TestAddKeepsAddressesUnderStateDir(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0")
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{Name: "fp-a.db"}))
	// Released wherever it is, even when an assertion below fails.
	t.Cleanup(func() { _ = e.del(a, netns.Path()) })
	g.Expect(cnitest.Allocations(t, netconf.IPAMDataDir(e.stateDir), e.br.Name)).To(ConsistOf(a.ip()))
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	g.Expect(cnitest.Allocations(t, netconf.IPAMDataDir(e.stateDir), e.br.Name)).To(BeEmpty())
	e.expectGone(g, a, true)
}
