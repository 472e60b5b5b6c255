package guests

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func testSpec() DomainSpec {
	return DomainSpec{
		Namespace: "apps", Name: "db-0", UID: "6d1f3c2a-0000-4000-8000-000000000001", MemoryMiB: 512, VCPUs: 2,
		Kernel: "/boot/vmlinuz", Initrd: "/boot/initrd", Cmdline: "console=ttyS0",
		Interfaces: []DomainInterface{
			{Network: "default", Tap: "tap0", MAC: "02:00:00:00:00:01", MTU: 1500},
			{Network: "fp-db-link", Tap: "tapa527fe112a5", MAC: "02:00:00:00:00:02", MTU: 9000},
		},
		ConsoleLog: "/run/x/console.log", ControlSocket: "/run/x/control.sock", VSOCKCID: 3, Multiqueue: true,
	}
}

// TestConvertDomainIsKubeVirtShaped checks the converter's interface shape and that
// libvirt's schema accepts the domain before and after the node adjustments.
func TestConvertDomainIsKubeVirtShaped(t *testing.T) {
	g := NewWithT(t)
	xml, err := ConvertDomain(testSpec())
	g.Expect(err).NotTo(HaveOccurred())
	s := string(xml)
	for _, want := range []string{
		`<name>apps_db-0</name>`,
		`<interface type="ethernet">`,
		`<target dev="tapa527fe112a5" managed="no"></target>`,
		`<model type="virtio-non-transitional"></model>`,
		`<driver name="vhost" queues="2"></driver>`,
		`<mtu size="9000"></mtu>`,
		`<alias name="ua-fp-db-link"></alias>`,
		`<rom enabled="no"></rom>`,
		`<cid auto="no" address="3"></cid>`,
		`<domain type="qemu"`,
		// The control channel is a virtio-serial port (flow control), not a UART.
		`<target type="virtio" name="io.fastpath.control.0"></target>`,
	} {
		g.Expect(s).To(ContainSubstring(want))
	}
	g.Expect(s).NotTo(ContainSubstring(`<serial type="unix">`))
	dir := t.TempDir()
	g.Expect(ValidateDomain(dir, xml)).To(Succeed())

	adjusted, adj, err := AdjustForNode(xml, NodeCapabilities{}, "/run/x/vhost-user-vsock.sock")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(adj).To(HaveLen(3), "two vhost drivers and the vsock device")
	a := string(adjusted)
	g.Expect(a).NotTo(ContainSubstring(`name="vhost"`))
	g.Expect(a).NotTo(ContainSubstring("<vsock"))
	g.Expect(a).To(ContainSubstring(`<source type="memfd"/>`))
	g.Expect(a).To(ContainSubstring(`vhost-user-vsock-pci,chardev=fpvsock0`))
	g.Expect(ValidateDomain(dir, adjusted)).To(Succeed())

	same, adj, err := AdjustForNode(xml, NodeCapabilities{VhostNet: true, VhostVsock: true}, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(adj).To(BeEmpty())
	g.Expect(same).To(Equal(xml), "a node with vhost-net and vhost-vsock keeps the hooked domain byte for byte")
}

func TestDomainSpecValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*DomainSpec)
		want string
	}{
		"memory":   {func(s *DomainSpec) { s.MemoryMiB = 0 }, "memoryMiB 0 must be 1-1048576"},
		"vcpus":    {func(s *DomainSpec) { s.VCPUs = 65 }, "vcpus 65 must be 1-64"},
		"uid":      {func(s *DomainSpec) { s.UID = "uid-1" }, `uid "uid-1" must be a UUID`},
		"mtu":      {func(s *DomainSpec) { s.Interfaces[1].MTU = 70000 }, "interfaces[1].mtu 70000 must be 68-65535"},
		"tap name": {func(s *DomainSpec) { s.Interfaces[0].Tap = "tap0123456789abcdef" }, "interfaces[0] needs network, tap (1-15 characters) and mac"},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			tc.edit(&s)
			_, err := ConvertDomain(s)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestRunHookAsTheSidecarShim runs the real hook binary under the name the
// shim gives it and checks that it tuned the fast-path interface only.
func TestRunHookAsTheSidecarShim(t *testing.T) {
	g := NewWithT(t)
	_, file, _, _ := runtime.Caller(0)
	hook := filepath.Join(t.TempDir(), "fastpath-domain-hook")
	build := exec.Command("go", "build", "-o", hook, "./cmd/fastpath-domain-hook")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	xml, err := ConvertDomain(testSpec())
	g.Expect(err).NotTo(HaveOccurred())
	vmi := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"db-0","namespace":"apps","annotations":{"fastpath.io/tuning":"{\"interfaces\":{\"fp-db-link\":{\"mtu\":9000,\"queues\":2,\"rxQueueSize\":1024,\"txQueueSize\":256}}}"}}}`
	dir := t.TempDir()
	hooked, stderr, err := RunHook(hook, dir, []byte(vmi), xml)
	g.Expect(err).NotTo(HaveOccurred(), stderr)
	g.Expect(stderr).To(ContainSubstring("ua-fp-db-link"))
	g.Expect(string(hooked)).To(ContainSubstring(`rx_queue_size="1024"`))
	g.Expect(strings.Count(string(hooked), `rx_queue_size=`)).To(Equal(1), "only the fast-path interface is tuned")
	g.Expect(ValidateDomain(dir, hooked)).To(Succeed())
	link, err := os.Readlink(filepath.Join(dir, "onDefineDomain"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link).To(Equal(hook))

	_, _, err = RunHook(hook, dir, []byte(`{"metadata":{"annotations":{"fastpath.io/tuning":"{\"interfaces\":{\"fp-db-link\":{\"rxQueueSize\":300}}}"}}}`), xml)
	g.Expect(err).To(MatchError(ContainSubstring("rxQueueSize 300 is invalid")))
}

func TestParseConsole(t *testing.T) {
	g := NewWithT(t)
	console := "[    1.0] noise\r\nFPGUEST db-0 eth0 mac 02:00:00:00:00:01 mtu 1500 rx 256 tx 256 queues 2 tso on ip 10.0.2.2/24\r\n" +
		"FPGUEST db-0 eth1 mac 02:00:00:00:00:02 mtu 9000 rx 1024 tx 256 queues 2 tso on ip 10.250.0.10/24\n" +
		"FPGUEST-FEATURES db-1 eth1 rx-checksumming=off\n" +
		"FPGUEST-FEATURES db-0 eth1 rx-checksumming=on tx-checksumming=off rx-gro-hw=off\n" +
		"FPGUEST-VIRTIO db-0 eth1 1010010\n"
	nics, _, ready, err := ParseConsole(console, "db-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeFalse(), "no ready line yet")
	g.Expect(nics).To(BeNil())
	nics, uptime, ready, err := ParseConsole(console+"FPGUEST-READY db-0 4.52\n", "db-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeTrue())
	g.Expect(uptime).To(Equal(4520 * time.Millisecond))
	g.Expect(nics).To(HaveLen(2))
	g.Expect(nics[0].Features).To(BeNil(), "eth0 printed no features line")
	g.Expect(nics[1]).To(Equal(NIC{Name: "eth1", MAC: "02:00:00:00:00:02", MTU: 9000, RX: 1024, TX: 256, Queues: 2, TSO: "on", IP: "10.250.0.10/24",
		Features: map[string]string{"rx-checksumming": "on", "tx-checksumming": "off", "rx-gro-hw": "off"}, Virtio: "1010010"}))
	for bit, want := range map[int]bool{0: true, 1: false, 5: true} {
		on, known := nics[1].VirtioFeature(bit)
		g.Expect(known).To(BeTrue())
		g.Expect(on).To(Equal(want), "bit %d", bit)
	}
	_, known := nics[1].VirtioFeature(64)
	g.Expect(known).To(BeFalse())
	g.Expect(nics[1].Line("db-0")).To(Equal("guest db-0: eth1 mtu 9000 rx 1024 tx 256 queues 2 tso on"))
	_, _, _, err = ParseConsole("FPGUEST-ERROR insmod virtio_net.ko\n", "db-0")
	g.Expect(err).To(MatchError(ContainSubstring("insmod virtio_net.ko")))
	_, _, _, err = ParseConsole("FPGUEST db-0 eth0 mac m mtu x rx 1 tx 1 queues 1 tso on ip none\n", "db-0")
	g.Expect(err).To(MatchError(ContainSubstring(`malformed mtu "x"`)))
	// A line still being written (no newline yet) is not read, not an error.
	partial := "FPGUEST db-0 eth0 mac m mtu 1 rx 1 tx 1 queues 1 tso on ip none\nFPGUEST-FEATURES db-0 eth0 rx-checksumming=on loopback=off r"
	_, _, ready, err = ParseConsole(partial, "db-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeFalse())
	nics, _, ready, err = ParseConsole(partial+"x-gro-hw=off\nFPGUEST-READY db-0 1.5\n", "db-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ready).To(BeTrue())
	g.Expect(nics[0].Features).To(Equal(map[string]string{"rx-checksumming": "on", "loopback": "off", "rx-gro-hw": "off"}))
	_, _, _, err = ParseConsole("FPGUEST db-0 eth0 mac m mtu 1 rx 1 tx 1 queues 1 tso on ip none\nFPGUEST-FEATURES db-0 eth0 rx-checksumming:on\n", "db-0")
	g.Expect(err).To(MatchError(ContainSubstring(`malformed feature "rx-checksumming:on"`)))
	_, _, _, err = ParseConsole("FPGUEST db-0 eth0 mac m mtu 1 rx 1 tx 1 queues 1 tso on ip none\nFPGUEST-VIRTIO db-0 eth0 10x1\n", "db-0")
	g.Expect(err).To(MatchError(ContainSubstring(`malformed virtio feature bits "10x1"`)))
}
