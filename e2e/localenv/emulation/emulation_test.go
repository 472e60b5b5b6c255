package emulation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

func TestPodInterfaceName(t *testing.T) {
	g := gomega.NewWithT(t)
	// KubeVirt's own test vector (pkg/network/namescheme): "blue" -> "pod16477688c0e".
	g.Expect(PodInterfaceName("blue")).To(gomega.Equal("pod16477688c0e"))
	g.Expect(PodInterfaceName("fp-db-link")).To(gomega.HaveLen(14))
	g.Expect(PodInterfaceName("fp-db-link")).To(gomega.HavePrefix("pod"))
}

func TestCloudConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		userData string
		want     [][]string
		port     int
	}{
		{"list form", "#cloud-config\nruncmd:\n- [netserver, -p, \"12866\"]\n", [][]string{{"netserver", "-p", "12866"}}, 12866},
		{"string form", "#cloud-config\nruncmd:\n- netserver\n", [][]string{{"netserver"}}, 12865},
		{"attached port", "#cloud-config\nruncmd:\n- [/usr/bin/netserver, -p12867]\n", [][]string{{"/usr/bin/netserver", "-p12867"}}, 12867},
		{"shell script", "#!/bin/sh\nnetserver\n", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			cc, err := parseCloudConfig(tc.userData)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(cc.runCmds()).To(gomega.Equal(tc.want))
			if tc.port > 0 {
				port, ok, err := netserverPort(tc.want[0])
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(ok).To(gomega.BeTrue())
				g.Expect(port).To(gomega.Equal(tc.port))
			}
		})
	}
	g := gomega.NewWithT(t)
	_, ok, err := netserverPort([]string{"echo", "hi"})
	g.Expect(ok).To(gomega.BeFalse())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, _, err = netserverPort([]string{"netserver", "-p", "x"})
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(`port "x"`)))
}

// syncBuffer collects the emulation's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEmulation runs the emulation against the embedded control plane with the
// reference bridge CNI plugin (so it does not depend on the fastpath plugin):
// VMs become running guests with both networks wired, the VMI status says so,
// guests exchange traffic on both, the emulated kubelet runs a Job that reaches
// a guest through the emulated ssh, a required restart replaces the VMI, and
// Stop (or CleanupLeftovers after a kill) leaves nothing behind.
func TestEmulation(t *testing.T) {
	testutil.RequireRoot(t)
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	ns, err := env.NewNamespace(ctx, "emu")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	c := env.Client

	tmp := t.TempDir()
	bridge := testutil.UniqueName("fpemb")
	t.Cleanup(func() { _ = topology.DeleteHostLink(bridge) })
	nad := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "blue-nad", Namespace: ns},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: fmt.Sprintf(
			`{"cniVersion":"1.0.0","name":"blue-%s","type":"bridge","bridge":%q,"mtu":9000,"capabilities":{"mac":true},"ipam":{"type":"host-local","subnet":"10.251.7.0/24","dataDir":%q}}`,
			bridge, bridge, filepath.Join(tmp, "ipam"))},
	}
	g.Expect(c.Create(ctx, nad)).To(gomega.Succeed())

	key := filepath.Join(tmp, "id")
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	pub, err := os.ReadFile(key + ".pub")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	priv, err := os.ReadFile(key)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pub", Namespace: ns}, Data: map[string][]byte{"key": pub}})).To(gomega.Succeed())
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "priv", Namespace: ns}, Data: map[string][]byte{"ssh-privatekey": priv}})).To(gomega.Succeed())

	for _, name := range []string{"vm-a", "vm-b"} {
		g.Expect(c.Create(ctx, testVM(ns, name))).To(gomega.Succeed())
	}

	var logs syncBuffer
	opts := Options{
		Config:       env.Config,
		Namespaces:   []string{ns},
		NodeName:     "node-emu",
		StateDir:     filepath.Join(tmp, "state"),
		Prefix:       testutil.UniqueName("fpemt-") + "-",
		HostIfPrefix: testutil.UniqueName("em")[:7],
		// Distinct from the demo's (10.244.250.0/24) and the e2e suite's (.251):
		// host routes of concurrent runs must not collide.
		PodCIDR:             netip.MustParsePrefix("10.244.252.0/24"),
		CNIPath:             []string{"/usr/lib/cni"},
		VSOCKRoot:           filepath.Join(tmp, "vsock"),
		RestartWhenRequired: true,
		Binaries:            map[string]string{"probe": writeProbe(t, tmp), "sleeper": "/bin/sleep"},
		Out:                 io.MultiWriter(&logs, testWriter{t}),
	}
	e, err := New(opts)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(e.Start(ctx)).To(gomega.Succeed())
	t.Cleanup(func() { _ = e.Stop() })

	ifName := PodInterfaceName("blue")
	vmis := map[string]*kubevirtv1.VirtualMachineInstance{}
	for _, name := range []string{"vm-a", "vm-b"} {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vmi)).To(gomega.Succeed())
			g.Expect(vmi.Status.Phase).To(gomega.Equal(kubevirtv1.Running))
		}, time.Minute, 200*time.Millisecond).Should(gomega.Succeed())
		vmis[name] = vmi
		g.Expect(vmi.Status.NodeName).To(gomega.Equal("node-emu"))
		g.Expect(vmi.Labels).To(gomega.HaveKeyWithValue(kubevirtv1.NodeNameLabel, "node-emu"))
		g.Expect(vmi.OwnerReferences).To(gomega.ConsistOf(gomega.HaveField("Name", name)))
		g.Expect(vmi.Status.VSOCKCID).NotTo(gomega.BeNil())
		g.Expect(*vmi.Status.VSOCKCID).To(gomega.BeNumerically(">=", 3))
		g.Expect(vmi.Status.Interfaces).To(gomega.HaveLen(2))
		g.Expect(vmi.Status.Interfaces[0]).To(gomega.And(
			gomega.HaveField("Name", "default"), gomega.HaveField("InterfaceName", "eth0"),
			gomega.HaveField("IP", gomega.HavePrefix("10.244.252.")), gomega.HaveField("InfoSource", "domain, guest-agent")))
		g.Expect(vmi.Status.Interfaces[1]).To(gomega.And(
			gomega.HaveField("Name", "blue"), gomega.HaveField("InterfaceName", "eth1"), gomega.HaveField("PodInterfaceName", ifName),
			gomega.HaveField("IP", gomega.HavePrefix("10.251.7.")), gomega.HaveField("InfoSource", "domain, guest-agent, multus-status")))
		vm := &kubevirtv1.VirtualMachine{}
		g.Eventually(func(g gomega.Gomega) {
			g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vm)).To(gomega.Succeed())
			g.Expect(vm.Status.PrintableStatus).To(gomega.Equal(kubevirtv1.VirtualMachineStatusRunning))
		}, 10*time.Second, 100*time.Millisecond).Should(gomega.Succeed())
	}
	// vm-b's interface carries the MAC its spec asked for: Multus's "mac"
	// capability reached the plugin as runtimeConfig through libcni.
	g.Expect(vmis["vm-b"].Status.Interfaces[1].MAC).To(gomega.Equal("02:00:00:00:0b:01"))

	ga, ok := e.Guest(types.NamespacedName{Namespace: ns, Name: "vm-a"})
	g.Expect(ok).To(gomega.BeTrue())
	gb, _ := e.Guest(types.NamespacedName{Namespace: ns, Name: "vm-b"})
	link, err := ga.Launcher.Link(ifName)
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the CNI's interface is in the launcher")
	g.Expect(link.Attrs().MTU).To(gomega.Equal(9000))
	g.Expect(link.Attrs().MasterIndex).NotTo(gomega.BeZero(), "a port of the in-pod bridge")
	link, err = ga.NetNS.Link("eth1")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "the guest's NIC of the bridge binding")
	g.Expect(link.Attrs().MTU).To(gomega.Equal(9000))
	g.Expect(link.Attrs().HardwareAddr.String()).To(gomega.Equal(vmis["vm-a"].Status.Interfaces[1].MAC))
	g.Expect(ga.Networks["blue"]).To(gomega.And(gomega.HaveField("PodInterface", ifName), gomega.HaveField("Interface", "eth1")))

	// Both networks carry TCP to cloud-init's netserver in the other guest.
	for _, addr := range []string{vmis["vm-b"].Status.Interfaces[0].IP, vmis["vm-b"].Status.Interfaces[1].IP} {
		g.Expect(ga.NetNS.Do(func() error {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "12865"), 5*time.Second)
			if err != nil {
				return err
			}
			return conn.Close()
		})).To(gomega.Succeed(), "netserver of vm-b at %s", addr)
	}
	g.Expect(logs.String()).To(gomega.ContainSubstring(`runcmd "echo not emulated" skipped`))

	// vsock: a guest service in vm-b, dialled from vm-a's CID.
	tb, err := e.VSOCK(gb.VMI)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ln, err := tb.Listen(5432)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(); err == nil {
			cid, _ := vsock.PeerCID(conn)
			_, _ = fmt.Fprintf(conn, "peer %d\n", cid)
			_ = conn.Close()
		}
	}()
	ta, err := e.VSOCK(ga.VMI)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	conn, err := ta.Dial(ctx, gb.CID, 5432)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	reply, err := io.ReadAll(conn)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(reply)).To(gomega.Equal(fmt.Sprintf("peer %d\n", ga.CID)))

	// The emulated kubelet runs a Job that ssh-es into vm-a with the Secret's key.
	g.Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})).To(gomega.Succeed())
	g.Expect(c.Create(ctx, probeJob(ns, "probe-ok", ga.PodIP.String(), "priv"))).To(gomega.Succeed())
	job := waitJob(ctx, g, c, ns, "probe-ok")
	g.Expect(job.Status.Succeeded).To(gomega.BeEquivalentTo(1), logs.String())
	g.Expect(jobLog(t, opts.StateDir, ns, "probe-ok")).To(gomega.And(
		gomega.ContainSubstring("eth1@"), gomega.ContainSubstring("mtu 9000"), gomega.ContainSubstring("token-present"),
		gomega.ContainSubstring(fmt.Sprintf("vsock=unix:%s cid=%d", opts.VSOCKRoot, ga.CID))), "the guest's emulated vsock, for fastpath-bench run in it")

	// A key that vm-a does not authorise is refused.
	other := filepath.Join(tmp, "other")
	out, err = exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), string(out))
	otherPriv, _ := os.ReadFile(other)
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}, Data: map[string][]byte{"ssh-privatekey": otherPriv}})).To(gomega.Succeed())
	g.Expect(c.Create(ctx, probeJob(ns, "probe-denied", ga.PodIP.String(), "other"))).To(gomega.Succeed())
	job = waitJob(ctx, g, c, ns, "probe-denied")
	g.Expect(job.Status.Failed).To(gomega.BeEquivalentTo(1))
	g.Expect(jobLog(t, opts.StateDir, ns, "probe-denied")).To(gomega.ContainSubstring("Permission denied (publickey)"))

	// An attachment reporting restartRequired gets an emulated virtctl restart.
	fpa := &fastpathv1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "restart-me", Namespace: ns},
		Spec: fastpathv1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "emu"}},
			VSOCK:      &fastpathv1alpha1.VSOCKSpec{Services: []fastpathv1alpha1.VSOCKService{{Name: "s", VM: "vm-a", Port: 1}}},
		},
	}
	// The template changes after vm-a started, so its VMI is out of date.
	vmA := &kubevirtv1.VirtualMachine{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vm-a"}, vmA)).To(gomega.Succeed())
	grace := int64(7)
	vmA.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	g.Expect(c.Update(ctx, vmA)).To(gomega.Succeed())
	g.Expect(c.Create(ctx, fpa)).To(gomega.Succeed())
	fpa.Status.VMs = []fastpathv1alpha1.VMStatus{{Name: "vm-a", RestartRequired: true, Message: "test"}, {Name: "vm-b", RestartRequired: true, Message: "stale"}}
	g.Expect(c.Status().Update(ctx, fpa)).To(gomega.Succeed())
	oldUID := vmis["vm-a"].UID
	g.Eventually(func(g gomega.Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vm-a"}, vmi)).To(gomega.Succeed())
		g.Expect(vmi.UID).NotTo(gomega.Equal(oldUID))
		g.Expect(vmi.Status.Phase).To(gomega.Equal(kubevirtv1.Running))
	}, time.Minute, 200*time.Millisecond).Should(gomega.Succeed())
	g.Expect(logs.String()).To(gomega.ContainSubstring("virtctl restart vm-a -n " + ns))
	_, err = os.Stat(ga.Launcher.Path)
	g.Expect(os.IsNotExist(err)).To(gomega.BeTrue(), "the old launcher namespace is gone")
	gaNew, ok := e.Guest(types.NamespacedName{Namespace: ns, Name: "vm-a"})
	g.Expect(ok).To(gomega.BeTrue())
	g.Expect(gaNew.Launcher.Name).NotTo(gomega.Equal(ga.Launcher.Name), "a new virt-launcher pod")
	// vm-b's VMI runs its current template: a (stale) restartRequired is ignored.
	g.Consistently(func(g gomega.Gomega) {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vm-b"}, vmi)).To(gomega.Succeed())
		g.Expect(vmi.UID).To(gomega.Equal(vmis["vm-b"].UID))
	}, 2*time.Second, 200*time.Millisecond).Should(gomega.Succeed())
	g.Expect(logs.String()).NotTo(gomega.ContainSubstring("virtctl restart vm-b"))

	// A runner still running when the emulation stops is killed, not waited for.
	long := probeJob(ns, "long", "", "priv")
	long.Spec.Template.Spec.Containers[0].Command = []string{"sleeper"}
	long.Spec.Template.Spec.Containers[0].Args = []string{"300"}
	g.Expect(c.Create(ctx, long)).To(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) {
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "long"}, long)).To(gomega.Succeed())
		g.Expect(long.Status.StartTime).NotTo(gomega.BeNil())
	}, 30*time.Second, 200*time.Millisecond).Should(gomega.Succeed())

	// Stop leaves nothing behind.
	guests := e.Guests()
	g.Expect(guests).To(gomega.HaveLen(2))
	inodes := netnsInodes(g, guests)
	g.Expect(processesIn(inodes)).To(gomega.HaveLen(2), "one netserver per guest")
	stopStart := time.Now()
	g.Expect(e.Stop()).To(gomega.Succeed())
	// The runner was killed, not waited for: it failed rather than ran its
	// 300 s to success, and Stop returned before those 300 s were up (the
	// runner's own length, not a speed target).
	g.Expect(time.Since(stopStart)).To(gomega.BeNumerically("<", 300*time.Second), "Stop waited for the 300 s runner")
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "long"}, long)).To(gomega.Succeed())
	g.Expect(jobFinished(long)).To(gomega.BeTrue())
	g.Expect(long.Status.Failed).To(gomega.BeEquivalentTo(1))
	g.Expect(long.Status.Succeeded).To(gomega.BeZero())
	expectNothingLeft(g, opts, guests, inodes)

	// A killed emulation (no Stop) is cleaned up by CleanupLeftovers.
	opts.RestartWhenRequired = false
	e2, err := New(opts)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(e2.Start(ctx)).To(gomega.Succeed())
	g.Eventually(func() int { return len(e2.Guests()) }, time.Minute, 200*time.Millisecond).Should(gomega.Equal(2))
	guests = e2.Guests()
	inodes = netnsInodes(g, guests)
	e2.cancel()
	<-e2.done
	e2.stopped = true
	var cleanupLog syncBuffer
	g.Expect(CleanupLeftovers(ctx, opts, &cleanupLog)).To(gomega.Succeed())
	g.Expect(cleanupLog.String()).To(gomega.ContainSubstring("CNI DEL of leftover attachment"))
	g.Expect(cleanupLog.String()).To(gomega.ContainSubstring("killed"))
	expectNothingLeft(g, opts, guests, inodes)
}

func expectNothingLeft(g *gomega.WithT, opts Options, guests []Guest, inodes []string) {
	g.Expect(topology.ListNetNS(opts.Prefix)).To(gomega.BeEmpty())
	g.Expect(topology.ListHostLinks(opts.HostIfPrefix)).To(gomega.BeEmpty())
	results, _ := filepath.Glob(filepath.Join(cniCacheDir(opts.StateDir), "results", "*"))
	g.Expect(results).To(gomega.BeEmpty())
	ipam, _ := filepath.Glob(filepath.Join(filepath.Dir(opts.StateDir), "ipam", "*", "10.*"))
	g.Expect(ipam).To(gomega.BeEmpty(), "host-local released every address")
	for _, gu := range guests {
		for _, n := range []*topology.NetNS{gu.NetNS, gu.Launcher} {
			_, err := os.Stat(n.Path)
			g.Expect(os.IsNotExist(err)).To(gomega.BeTrue(), "namespace %s", n.Name)
		}
	}
	g.Expect(processesIn(inodes)).To(gomega.BeEmpty(), "no process (netserver) is left in the guests' namespaces")
}

// netnsInodes returns "net:[inode]" of each guest's namespace.
func netnsInodes(g *gomega.WithT, guests []Guest) []string {
	var out []string
	for _, gu := range guests {
		var st syscall.Stat_t
		g.Expect(syscall.Stat(gu.NetNS.Path, &st)).To(gomega.Succeed())
		out = append(out, fmt.Sprintf("net:[%d]", st.Ino))
	}
	return out
}

// processesIn lists the PIDs whose network namespace is one of inodes.
func processesIn(inodes []string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net"))
		if err == nil && slices.Contains(inodes, link) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func testVM(ns, name string) *kubevirtv1.VirtualMachine {
	always := kubevirtv1.RunStrategyAlways
	yes := true
	iface := kubevirtv1.Interface{Name: "blue", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}
	if name == "vm-b" {
		iface.MacAddress = "02:00:00:00:0b:01"
	}
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "emu"}},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "emu"}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
						AutoattachVSOCK: &yes,
						Interfaces: []kubevirtv1.Interface{
							{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}},
							iface,
						},
					}},
					Networks: []kubevirtv1.Network{
						{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
						{Name: "blue", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "blue-nad"}}},
					},
					AccessCredentials: []kubevirtv1.AccessCredential{{SSHPublicKey: &kubevirtv1.SSHPublicKeyAccessCredential{
						Source:            kubevirtv1.SSHPublicKeyAccessCredentialSource{Secret: &kubevirtv1.AccessCredentialSecretSource{SecretName: "pub"}},
						PropagationMethod: kubevirtv1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &kubevirtv1.NoCloudSSHPublicKeyAccessCredentialPropagation{}},
					}}},
					Volumes: []kubevirtv1.Volume{{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
						UserData: "#cloud-config\nruncmd:\n- [netserver, -p, \"12865\"]\n- echo not emulated\n",
					}}}},
				},
			},
		},
	}
}

// writeProbe writes the stand-in of the "probe" image: it shows the kubeconfig
// token is there and lists the links of the guest it ssh-es into.
func writeProbe(t *testing.T, dir string) string {
	p := filepath.Join(dir, "probe")
	script := `#!/bin/sh
set -e
grep -q "token: " "$KUBECONFIG" && echo token-present
exec ssh -o BatchMode=yes -i "$1" fedora@"$2" -- 'ip -o link show; echo "vsock=$FASTPATH_VSOCK_TRANSPORT cid=$FASTPATH_VSOCK_CID"'
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func probeJob(ns, name, target, secret string) *batchv1.Job {
	zero := int32(0)
	mode := int32(0o400)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: &zero,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "runner",
				RestartPolicy:      corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "probe", Image: "example.org/probe:1", Command: []string{"probe"},
					Args:         []string{"/etc/probe/ssh/ssh-privatekey", target},
					VolumeMounts: []corev1.VolumeMount{{Name: "key", MountPath: "/etc/probe/ssh", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: secret, DefaultMode: &mode, Items: []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "ssh-privatekey"}},
				}}}},
			}},
		},
	}
}

func waitJob(ctx context.Context, g *gomega.WithT, c client.Client, ns, name string) *batchv1.Job {
	job := &batchv1.Job{}
	g.Eventually(func(g gomega.Gomega) {
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, job)).To(gomega.Succeed())
		g.Expect(jobFinished(job)).To(gomega.BeTrue())
	}, time.Minute, 200*time.Millisecond).Should(gomega.Succeed())
	return job
}

func jobLog(t *testing.T, state, ns, name string) string {
	files, _ := filepath.Glob(filepath.Join(state, "pods", ns, name+"-*", "*.log"))
	if len(files) != 1 {
		t.Fatalf("want one log of Job %s, found %v", name, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
