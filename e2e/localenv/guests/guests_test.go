package guests

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// repoBin is the repository's bin/ (hack/setup.sh and make build fill it).
func repoBin(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin")
	for _, f := range []string{"fastpath-domain-hook", "vhost-device-vsock", "guest/vmlinuz", "guest/initramfs.gz"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("missing %s: run `make setup build` (hack/setup.sh builds the guest image and vhost-device-vsock): %v", filepath.Join(bin, f), err)
		}
	}
	return bin
}

// fastNet is a node-local fast-path network for the test: a host bridge
// (what the agent makes), and per VM a launcher namespace with the pod
// interface (a veth to the bridge, what the CNI plugin makes) in an in-pod
// bridge k6t-<hash> (what virt-launcher's bridge binding makes).
type fastNet struct {
	t      *testing.T
	bridge string
	mtu    int
	nss    []*topology.NetNS
	hostIf []string
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := execCmd(argv...); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

func newFastNet(t *testing.T, mtu int) *fastNet {
	f := &fastNet{t: t, bridge: testutil.UniqueName("fpgbr"), mtu: mtu}
	t.Cleanup(f.remove)
	run(t, "ip", "link", "add", f.bridge, "mtu", fmt.Sprint(mtu), "type", "bridge")
	run(t, "ip", "link", "set", f.bridge, "up")
	return f
}

// launcher makes the launcher namespace of vm and returns it with the
// in-pod bridge and tap names of its fast-path NIC.
func (f *fastNet) launcher(vm string) (ns *topology.NetNS, bridge, tap string) {
	t := f.t
	suffix := testutil.UniqueName("")
	ns, err := topology.NewNetNS("fpg-" + suffix + "-" + vm)
	if err != nil {
		t.Fatal(err)
	}
	f.nss = append(f.nss, ns)
	podIf := "pod" + suffix + "00000"[:11-len(suffix)]
	hostIf := "fpgv" + suffix
	f.hostIf = append(f.hostIf, hostIf)
	run(t, "ip", "link", "add", hostIf, "mtu", fmt.Sprint(f.mtu), "type", "veth", "peer", "name", podIf, "mtu", fmt.Sprint(f.mtu), "netns", ns.Name)
	run(t, "ip", "link", "set", hostIf, "master", f.bridge, "up")
	bridge, tap = topology.BridgeName(podIf), topology.TapName(podIf)
	for _, argv := range [][]string{
		{"ip", "link", "add", bridge, "mtu", fmt.Sprint(f.mtu), "type", "bridge"},
		{"ip", "link", "set", podIf, "master", bridge, "up"},
		{"ip", "link", "set", bridge, "up"},
	} {
		if _, err := ns.Exec(argv...); err != nil {
			t.Fatal(err)
		}
	}
	return ns, bridge, tap
}

func (f *fastNet) remove() {
	for _, ns := range f.nss {
		_ = ns.Delete()
	}
	for _, h := range f.hostIf {
		_, _ = execCmd("ip", "link", "del", h)
	}
	_, _ = execCmd("ip", "link", "del", f.bridge)
}

func randomMAC() net.HardwareAddr {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = 0x02
	return b
}

// vmiJSON is the VMI the sidecar-shim would pass: the tuning annotation the
// operator writes for network fp-test, every offload On.
func vmiJSON(t *testing.T, ns, name string) []byte {
	return vmiJSONWithRXChecksum(t, ns, name, "On")
}

// vmiJSONWithRXChecksum is vmiJSON with offloads.rxChecksum rx (On|Off).
func vmiJSONWithRXChecksum(t *testing.T, ns, name, rx string) []byte {
	tuning := `{"interfaces":{"fp-test":{"mtu":9000,"queues":2,"rxQueueSize":1024,"txQueueSize":256,"offloads":{"tso":"On","gso":"On","gro":"On","txChecksum":"On","rxChecksum":"` + rx + `"}}}}`
	b, err := json.Marshal(map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "00000000-0000-4000-8000-00000000000" + name[len(name)-1:],
			"annotations": map[string]string{"fastpath.io/tuning": tuning}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type testGuest struct {
	*Guest
	IP netip.Addr
}

// bootTrio boots the guests of the real-guest tests: db-0 and db-1 on a
// fast-path network with MTU 9000 (addresses <subnet>.10 and .11/24, served
// by DHCP on their taps) and web-0, an outsider with no NIC and 256 MiB.
// vmi renders each VMI the hook reads; vsock, when not nil, sets guest i's
// vsock options (i is 0, 1, 2 in that order). Every guest is stopped at the
// end of the test.
func bootTrio(t *testing.T, ctx context.Context, subnet [3]byte, vmi func(t *testing.T, ns, name string) []byte, vsock func(i int, o *BootOptions)) []testGuest {
	g := NewWithT(t)
	bin := repoBin(t)
	f := newFastNet(t, 9000)
	state := t.TempDir()
	var out []testGuest
	for i, vm := range []string{"db-0", "db-1", "web-0"} {
		ns, bridge, tap := f.launcher(vm)
		o := BootOptions{
			Namespace: "fpg", Name: vm, UID: fmt.Sprintf("6d1f3c2a-0000-4000-8000-%012d", i), VMIJSON: vmi(t, "fpg", vm),
			Launcher: ns, Dir: filepath.Join(state, vm), Bin: bin, VCPUs: 2, MemoryMiB: 512, Multiqueue: true, Logf: t.Logf,
		}
		if vsock != nil {
			vsock(i, &o)
		}
		ip := netip.AddrFrom4([4]byte{subnet[0], subnet[1], subnet[2], byte(10 + i)})
		if vm != "web-0" {
			o.NICs = []NICSpec{{Network: "fp-test", Bridge: bridge, Tap: tap, MTU: 9000, Lease: DHCPLease{
				MAC: randomMAC(), Address: netip.PrefixFrom(ip, 24), ServerIP: netip.MustParseAddr("169.254.75.10"), Hostname: vm,
			}}}
		} else {
			o.MemoryMiB = 256
		}
		gu, err := Boot(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			if err := gu.Stop(); err != nil {
				t.Errorf("failed to stop %s: %v", vm, err)
			}
		})
		out = append(out, testGuest{Guest: gu, IP: ip})
	}
	return out
}

// TestRealGuests boots real guests whose KubeVirt-shaped domains went
// through the real domain hook and checks from inside them: what each
// virtio-net driver got and the DHCP address; that the fast path carries a
// 9000-byte packet unfragmented and refuses a 9001-byte one; and that the
// node agent's relay, over the UNIX transport speaking hybrid vsock to
// vhost-device-vsock, connects db-1 to a service in db-0 over AF_VSOCK and
// refuses web-0, which its route does not allow.
func TestRealGuests(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	vsockDir := t.TempDir()
	// db-1 asks for RX checksum offload Off (GUEST_CSUM), the others for On.
	vmi := func(t *testing.T, ns, name string) []byte {
		if name == "db-1" {
			return vmiJSONWithRXChecksum(t, ns, name, "Off")
		}
		return vmiJSON(t, ns, name)
	}
	guests := bootTrio(t, ctx, [3]byte{10, 251, 0}, vmi, func(i int, o *BootOptions) {
		o.VSOCKCID, o.VSOCKDir = uint32(3+i), vsockDir
	})
	db0, db1, web0 := guests[0], guests[1], guests[2]

	t.Run("tuning seen inside the guests", func(t *testing.T) {
		g := NewWithT(t)
		for _, gu := range []testGuest{db0, db1} {
			g.Expect(gu.NICs).To(HaveLen(1), "NICs of %s", gu.Name)
			n := gu.NICs[0]
			t.Logf("%s  [%s, booted in %s, guest uptime %s]", n.Line(gu.Name), Label, gu.BootTime.Round(100*time.Millisecond), gu.GuestUptime.Round(10*time.Millisecond))
			g.Expect(n.MTU).To(Equal(9000))
			g.Expect(n.RX).To(Equal(1024))
			g.Expect(n.TX).To(Equal(256))
			g.Expect(n.Queues).To(Equal(2))
			g.Expect(n.TSO).To(Equal("on"))
			// rxChecksum is GUEST_CSUM (virtio bit 1): on for db-0, off for
			// db-1. The guest's driver shows what it negotiated; its ethtool
			// -k rx-checksumming is "on [fixed]" either way on Linux 6.1, so
			// it is reported, not judged.
			guestCSUM, known := n.VirtioFeature(1)
			t.Logf("%s: %s rx-checksumming %s, tx-checksumming %s, rx-gro-hw %s (ethtool -k in the guest); virtio GUEST_CSUM %v (bits %s)",
				gu.Name, n.Name, n.Features["rx-checksumming"], n.Features["tx-checksumming"], n.Features["rx-gro-hw"], guestCSUM, n.Virtio)
			g.Expect(known).To(BeTrue(), "virtio feature bits of %s", gu.Name)
			g.Expect(guestCSUM).To(Equal(gu.Name == "db-0"), "GUEST_CSUM negotiated in %s", gu.Name)
			g.Expect(n.Features).To(And(HaveKeyWithValue("tcp-segmentation-offload", "on"), HaveKeyWithValue("tx-checksumming", "on"),
				HaveKey("rx-checksumming")), "ethtool -k in %s", gu.Name)
			g.Expect(n.IP).To(Equal(gu.IP.String() + "/24"))
			g.Expect(string(gu.Domain)).To(ContainSubstring(`rx_queue_size="1024"`))
			g.Expect(gu.HookLog).To(ContainSubstring("Tuned domain interface"))
		}
		g.Expect(string(db0.Domain)).To(MatchRegexp(`<guest csum=["']on["']`))
		g.Expect(string(db1.Domain)).To(MatchRegexp(`<guest csum=["']off["']`))
		g.Expect(db1.HookLog).To(ContainSubstring("offloads.gro On has no effect with rxChecksum Off"))
		g.Expect(web0.NICs).To(BeEmpty())
	})

	t.Run("path MTU 9000 across the fast path", func(t *testing.T) {
		g := NewWithT(t)
		out, rc, err := db0.Run(ctx, fmt.Sprintf("/usr/bin/ping -M do -s 8972 -c 3 -W 5 %s", db1.IP))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).To(Equal(0), "ping -M do -s 8972 from db-0 to db-1: %s", out)
		g.Expect(out).To(ContainSubstring("3 received"))
		out, rc, err = db0.Run(ctx, fmt.Sprintf("/usr/bin/ping -M do -s 8973 -c 1 -W 2 %s", db1.IP))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).NotTo(Equal(0), "a 9001-byte packet must not pass a 9000-byte path unfragmented: %s", out)
	})

	t.Run("AF_VSOCK guest to guest through the relay", func(t *testing.T) {
		g := NewWithT(t)
		var mu sync.Mutex
		var logLines []string
		logger := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			logLines = append(logLines, args)
		}, funcr.Options{})
		r, err := relay.New(relay.Options{Transport: vsock.NewUnixTransport(vsockDir, vsock.HostCID), Logger: logger})
		g.Expect(err).NotTo(HaveOccurred())
		defer r.Close()
		g.Expect(r.Update([]relay.Route{{
			Attachment: types.NamespacedName{Namespace: "fpg", Name: "db-link"}, Service: "db",
			ListenPort: 7000, TargetCID: db0.Vsock.CID, TargetPort: 5432, AllowedCIDs: []uint32{db0.Vsock.CID, db1.Vsock.CID},
		}})).To(Succeed())
		_, rc, err := db0.Run(ctx, "/usr/bin/socat VSOCK-LISTEN:5432,fork,reuseaddr SYSTEM:'read l; echo pong-from-db-0 $l' >/dev/null 2>&1 &")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rc).To(Equal(0))
		// The relay picks up each guest's hybrid socket on its next rescan.
		var out string
		g.Eventually(func() string {
			out, _, _ = db1.Run(ctx, "echo ping | /usr/bin/socat -t 5 - VSOCK-CONNECT:2:7000")
			return out
		}, 20*time.Second, 500*time.Millisecond).Should(ContainSubstring("pong-from-db-0 ping"))
		out, _, err = web0.Run(ctx, "echo ping | /usr/bin/socat -t 5 - VSOCK-CONNECT:2:7000")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).NotTo(ContainSubstring("pong"), "web-0 is not in the route's allow-list")
		g.Eventually(func() string {
			mu.Lock()
			defer mu.Unlock()
			return strings.Join(logLines, "\n")
		}, 5*time.Second).Should(And(ContainSubstring("Denied vsock relay connection"), ContainSubstring(`"sourceCID"=5`)))
		// Without the relay route the guests cannot reach each other: a port nobody relays.
		out, _, err = db1.Run(ctx, "echo ping | /usr/bin/socat -t 3 - VSOCK-CONNECT:3:5432")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).NotTo(ContainSubstring("pong"), "one vhost-device-vsock per guest: no guest-to-guest path outside the relay")
	})
}

func TestVsockBackendNeverForwardsToHostVsock(t *testing.T) {
	args := strings.Join(VsockBackendArgs(3, "/run/x/vhost.sock", "/run/x/3.vsock"), " ")
	for _, forbidden := range []string{"forward-cid", "forward-listen"} {
		if strings.Contains(args, forbidden) {
			t.Fatalf("vhost-device-vsock command line %q contains --%s, which would open AF_VSOCK on this host", args, forbidden)
		}
	}
	if args != "--guest-cid 3 --socket /run/x/vhost.sock --uds-path /run/x/3.vsock" {
		t.Fatalf("unexpected vhost-device-vsock command line %q", args)
	}
}
