package guests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/cni/pkg/plugin"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// macvtapNIC is one guest's pod interface on datapath Macvtap, as the real
// CNI plugin made it.
type macvtapNIC struct {
	ns     *topology.NetNS
	ifName string
	mac    string
	ip     string // CIDR from host-local
	dev    string // /dev/tapN the device plugin handed out
	args   *skel.CmdArgs
}

// TestMacvtapGuests boots two REAL guests whose NICs are bridge-mode macvtaps
// on one node-local lower device, with nothing else between them: the lower
// device made by the node agent's code (bridge.Manager), a device ID from
// the agent's device plugin resource (deviceplugin.MacvtapResource), the pod
// interface made by the real CNI plugin (datapath Macvtap, deviceID as
// Multus passes it) directly in each launcher namespace, and the domain as
// KubeVirt's macvtap binding (domainAttachmentType tap) renders it: type
// 'ethernet' on the pod interface, managed='no', after the real domain hook.
// libvirt opens the macvtap's /dev/tapN for QEMU. The guests get no DHCP
// (KubeVirt's macvtap binding serves none): each is given its IPAM address
// from inside, as cloud-init networkData would, and then they exchange a
// 9000-byte unfragmented ping and a TCP stream.
func TestMacvtapGuests(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := repoBin(t)

	lower := testutil.UniqueName("fpgmv")
	t.Cleanup(func() { _, _ = execCmd("ip", "link", "del", lower) })
	_, err := (&bridge.Manager{Marker: "guests-test"}).Ensure(ctx, bridge.Spec{Name: lower, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000})
	g.Expect(err).NotTo(HaveOccurred())
	res := deviceplugin.MacvtapResource(lower, 8)

	// The CNI plugin as Multus runs it: host-local from Debian's plugins,
	// the state directory from the node configuration.
	state := t.TempDir()
	nodeConf := filepath.Join(t.TempDir(), "node.json")
	g.Expect(netconf.WriteNodeConfig(nodeConf, netconf.NodeConfig{StateDir: state})).To(Succeed())
	t.Setenv(netconf.NodeConfigEnv, nodeConf)
	t.Setenv("PATH", "/usr/lib/cni"+string(os.PathListSeparator)+os.Getenv("PATH"))

	var nics []macvtapNIC
	for i, vm := range []string{"mv-0", "mv-1"} {
		suffix := testutil.UniqueName("")
		ns, err := topology.NewNetNS("fpg-" + suffix + "-" + vm)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = ns.Delete() })
		// The device kubelet allocated to this VMI's compute container.
		car, err := res.Allocate(res.Devices[i : i+1])
		g.Expect(err).NotTo(HaveOccurred())
		conf, _ := json.Marshal(map[string]any{
			"cniVersion": "1.0.0", "name": "fp-test", "namespace": "fastpath-guests", "type": "fastpath", "datapath": "Macvtap", "bridge": lower, "mtu": 9000,
			"ipam":     map[string]any{"type": "host-local", "subnet": "10.252.0.0/24"},
			"deviceID": res.Devices[i], "pciBusID": res.Devices[i],
		})
		n := macvtapNIC{ns: ns, ifName: "pod" + suffix + "00000"[:11-len(suffix)], dev: car.Devices[0].HostPath}
		n.args = &skel.CmdArgs{ContainerID: "fpg-" + suffix, Netns: ns.Path, IfName: n.ifName, StdinData: conf,
			Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=fastpath-guests"}
		r, _, err := testutils.CmdAddWithArgs(n.args, func() error { return plugin.Funcs(plugin.Options{}).Add(n.args) })
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			if err := testutils.CmdDelWithArgs(n.args, func() error { return plugin.Funcs(plugin.Options{}).Del(n.args) }); err != nil {
				t.Errorf("CNI DEL of %s: %v", vm, err)
			}
		})
		result, err := current.GetResult(r)
		g.Expect(err).NotTo(HaveOccurred())
		n.mac, n.ip = result.Interfaces[0].Mac, result.IPs[0].Address.String()
		_, err = os.Stat(n.dev)
		g.Expect(err).NotTo(HaveOccurred(), "the CNI plugin's macvtap is the device plugin's %s", n.dev)
		nics = append(nics, n)
	}

	var guests []*Guest
	for i, n := range nics {
		vm := fmt.Sprintf("mv-%d", i)
		o := BootOptions{
			Namespace: "fpg", Name: vm, UID: fmt.Sprintf("7e2f3c2a-0000-4000-8000-%012d", i), VMIJSON: vmiJSON(t, "fpg", vm),
			Launcher: n.ns, Dir: filepath.Join(t.TempDir(), vm), Bin: bin, VCPUs: 2, MemoryMiB: 384, Multiqueue: true, Logf: t.Logf,
			NICs: []NICSpec{{Network: "fp-test", Tap: n.ifName, MTU: 9000, Macvtap: true, Lease: DHCPLease{MAC: mustMAC(t, n.mac)}}},
		}
		gu, err := Boot(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			if err := gu.Stop(); err != nil {
				t.Errorf("failed to stop %s: %v", vm, err)
			}
		})
		guests = append(guests, gu)
		domain := string(gu.Domain)
		g.Expect(domain).To(MatchRegexp(`<interface type="ethernet">\s*<source/>\s*<target dev="%s" managed="no"/>`, regexp.QuoteMeta(n.ifName)))
		g.Expect(gu.NICs).To(HaveLen(1))
		nic := gu.NICs[0]
		t.Logf("%s  [%s on a macvtap, booted in %s]", nic.Line(vm), Label, gu.BootTime.Round(100*time.Millisecond))
		g.Expect(nic.MAC).To(Equal(n.mac), "KubeVirt gives the guest the pod interface's MAC")
		g.Expect(nic.MTU).To(Equal(9000))
		g.Expect(nic.Queues).To(Equal(2))
		g.Expect(nic.IP).To(Equal("none"), "no DHCP on the macvtap binding")
		g.Expect(qemuHolds(t, n.dev)).To(BeTrue(), "QEMU has %s open", n.dev)
		// What cloud-init networkData would do: the IPAM address, statically.
		out, rc, err := gu.Run(ctx, "ip addr add "+n.ip+" dev "+nic.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).To(Equal(0), out)
	}

	peer := strings.Split(nics[1].ip, "/")[0]
	out, rc, err := guests[0].Run(ctx, "/usr/bin/ping -M do -s 8972 -c 3 -W 5 "+peer)
	if rc != 0 {
		for i, gu := range guests {
			o, _, _ := gu.Run(ctx, "ip addr; ip neigh; ethtool -S eth0 2>&1 | head -30")
			t.Logf("guest %d after the failed ping:\n%s", i, o)
			o2, _ := nics[i].ns.Exec("ip", "-s", "-d", "link")
			t.Logf("launcher namespace %d:\n%s", i, o2)
		}
		o3, _ := execCmd("ip", "-s", "-d", "link", "show", lower)
		t.Logf("lower device:\n%s", o3)
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc).To(Equal(0), "ping -M do -s 8972 over the macvtaps: %s", out)
	g.Expect(out).To(ContainSubstring("3 received"))
	out, rc, err = guests[0].Run(ctx, "/usr/bin/ping -M do -s 8973 -c 1 -W 2 "+peer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc).NotTo(Equal(0), "a 9001-byte packet does not pass a 9000-byte path: %s", out)

	out, rc, err = guests[0].Run(ctx, "netperf -H "+peer+" -l 5 -t TCP_STREAM -P 0 -- -m 65536 -s 262144 -S 262144")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc).To(Equal(0), out)
	f := strings.Fields(out)
	g.Expect(f).NotTo(BeEmpty())
	mbps, err := strconv.ParseFloat(f[len(f)-1], 64)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(mbps).To(BeNumerically(">", 0))
	t.Logf("TCP_STREAM mv-0 -> mv-1 over the macvtaps, 5 s, 64 KiB messages, 256 KiB sockets: %.1f Mbit/s [%s: emulation-bound, not a datapath figure]", mbps, Label)
}

func mustMAC(t *testing.T, s string) []byte {
	t.Helper()
	m, err := netconf.ParseMAC("mac", s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// qemuHolds reports whether a qemu-system process has dev open.
func qemuHolds(t *testing.T, dev string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, c := range procs {
		comm, err := os.ReadFile(c)
		if err != nil || !strings.HasPrefix(string(comm), "qemu-system") {
			continue
		}
		fds, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == dev {
				return true
			}
		}
	}
	return false
}
