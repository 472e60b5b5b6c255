package plugin_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// writeRefusingHostLocal writes a "host-local" whose every command fails
// and returns its directory, for CNI_PATH to find it before any other.
func writeRefusingHostLocal(t *testing.T) string {
	dir := t.TempDir()
	script := `#!/bin/sh
echo '{"cniVersion": "1.0.0", "code": 999, "msg": "the host-local binary was executed"}'
exit 1
`
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "host-local"), []byte(script), 0o755)).To(Succeed())
	return dir
}

// TestHostLocalInProcess: with ipam.type host-local the plugin allocates in
// its own process (package hostlocal) and never executes the binary, here
// one that refuses everything and comes first in CNI_PATH. ADD gets an
// address from the range, recorded in the binary's layout
// (<stateDir>/ipam/<network>/<address> holding "<containerID>\r\n<ifname>",
// the network being the bridge's, netconf.IPAMNetworkName);
// CHECK finds it; a repeated ADD of the same attachment gets the same
// result and allocates nothing more; DEL frees the address and a second DEL
// succeeds. Another IPAM type is still executed (testFailedIPAMAdd).
func TestHostLocalInProcess(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0", writeRefusingHostLocal(t))
	netns := cnitest.NewNS(t)
	conf := e.conf(cnitest.Conf{})
	a := e.mustAdd(netns, conf)
	// Released wherever it is, even when an assertion below fails.
	t.Cleanup(func() { _ = e.del(a, netns.Path()) })

	_, subnet, _ := net.ParseCIDR(cnitest.Subnet)
	g.Expect(a.result.IPs).To(HaveLen(1))
	g.Expect(subnet.Contains(a.result.IPs[0].Address.IP)).To(BeTrue(), "address %s in %s", a.ip(), cnitest.Subnet)
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip()))
	data, err := os.ReadFile(filepath.Join(e.ipamDir, netconf.IPAMNetworkName(e.br.Name), a.ip()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(a.containerID + "\r\n" + a.ifName))
	g.Expect(filepath.Join(e.ipamDir, netconf.IPAMNetworkName(e.br.Name), "lock")).To(BeAnExistingFile())
	g.Expect(filepath.Join(e.ipamDir, netconf.IPAMNetworkName(e.br.Name), "last_reserved_ip.0")).To(BeAnExistingFile())
	g.Expect(e.check(a)).To(Succeed())

	args := a.args(conf)
	_, raw, err := testutils.CmdAddWithArgs(args, func() error { return plugin.Funcs(pluginOpts).Add(args) })
	g.Expect(err).NotTo(HaveOccurred(), "a repeated ADD succeeds")
	g.Expect(raw).To(MatchJSON(a.raw), "with the first ADD's result")
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(ConsistOf(a.ip()), "and allocates nothing more")

	g.Expect(e.del(a, netns.Path())).To(Succeed())
	g.Expect(cnitest.Allocations(t, e.ipamDir, e.br.Name)).To(BeEmpty(), "DEL frees the address")
	g.Expect(e.del(a, netns.Path())).To(Succeed(), "a second DEL succeeds")
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
}

// TestExecutedIPAM: an IPAM type other than host-local is executed from
// CNI_PATH (the plugin's own exec, not containernetworking/cni's invoke)
// with the invocation's environment; a result without cniVersion is read
// in the netconf's version, as invoke reads it. ADD, CHECK and DEL each
// reach it, for the invocation's container ID and interface.
func TestExecutedIPAM(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := `#!/bin/sh
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_IFNAME" >> ` + calls + `
if [ "$CNI_COMMAND" = ADD ]; then
  echo '{"ips": [{"address": "10.250.0.77/24", "gateway": "10.250.0.1"}]}'
fi
exit 0
`
	g.Expect(os.WriteFile(filepath.Join(dir, "fpok"), []byte(script), 0o755)).To(Succeed())
	e := newEnv(t, netconf.DatapathLinuxBridge, "1.0.0", dir)
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{IPAM: map[string]any{"type": "fpok", "subnet": cnitest.Subnet}}))
	t.Cleanup(func() { _ = e.del(a, netns.Path()) })
	g.Expect(a.ip()).To(Equal("10.250.0.77"))
	g.Expect(e.check(a)).To(Succeed())
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	data, err := os.ReadFile(calls)
	g.Expect(err).NotTo(HaveOccurred())
	id := a.containerID + " " + a.ifName
	g.Expect(string(data)).To(Equal("ADD " + id + "\nCHECK " + id + "\nDEL " + id + "\n"))
	e.expectGone(g, a, true)
}
