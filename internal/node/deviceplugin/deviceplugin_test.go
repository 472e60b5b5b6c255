package deviceplugin_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/macvtap"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// fakeKubelet is kubelet's side of the device plugin API: the Registration
// service on kubelet.sock in dir and, for every registration, a client of
// the plugin's socket that keeps a ListAndWatch stream open, as kubelet's
// device manager does.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir string
	srv *grpc.Server

	mu      sync.Mutex
	regs    []*pluginapi.RegisterRequest
	lists   [][]*pluginapi.Device
	clients []pluginapi.DevicePluginClient
}

func startKubelet(t *testing.T) *fakeKubelet {
	// sun_path is 108 bytes: t.TempDir() may be longer.
	dir, err := os.MkdirTemp("", "fpdp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	k := &fakeKubelet{dir: dir, srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	ln, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = k.srv.Serve(ln) }()
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := pluginapi.NewDevicePluginClient(conn)
	k.mu.Lock()
	k.regs = append(k.regs, req)
	k.clients = append(k.clients, c)
	k.mu.Unlock()
	go func() {
		defer conn.Close()
		stream, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
		if err != nil {
			return
		}
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			k.mu.Lock()
			k.lists = append(k.lists, r.Devices)
			k.mu.Unlock()
		}
	}()
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) registrations() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.regs...)
}

// lastList returns the health of every device in the latest list.
func (k *fakeKubelet) lastList() map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.lists) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, d := range k.lists[len(k.lists)-1] {
		out[d.ID] = d.Health
	}
	return out
}

func (k *fakeKubelet) client() pluginapi.DevicePluginClient {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.clients[len(k.clients)-1]
}

func TestMacvtapBlock(t *testing.T) {
	g := NewWithT(t)
	for _, lower := range []string{"fastpath0", "fastpath1", "a", "fp-lower.0123"} {
		first := deviceplugin.MacvtapBlock(lower, deviceplugin.DefaultMacvtapCapacity)
		g.Expect(first).To(Equal(deviceplugin.MacvtapBlock(lower, deviceplugin.DefaultMacvtapCapacity)), "stable")
		g.Expect(first).To(BeNumerically(">=", netconf.MinTapIndex))
		g.Expect(first + deviceplugin.DefaultMacvtapCapacity - 1).To(BeNumerically("<=", netconf.MaxTapIndex))
		g.Expect((first - netconf.MinTapIndex) % deviceplugin.DefaultMacvtapCapacity).To(BeZero())
		res := deviceplugin.MacvtapResource(lower, 4)
		g.Expect(res.Name).To(Equal("macvtap.fastpath.io/" + lower))
		g.Expect(res.Devices).To(HaveLen(4))
		for _, id := range res.Devices {
			_, err := netconf.ParseDeviceID(id)
			g.Expect(err).NotTo(HaveOccurred(), "the CNI plugin takes every device ID")
		}
	}
	g.Expect(deviceplugin.MacvtapBlock("fastpath0", 128)).NotTo(Equal(deviceplugin.MacvtapBlock("fastpath1", 128)))
}

// TestServerRegistersServesAndSurvivesKubeletRestart drives the server
// through the real gRPC API as kubelet does.
func TestServerRegistersServesAndSurvivesKubeletRestart(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t)
	res := deviceplugin.MacvtapResource("fastpath0", 3)
	s := deviceplugin.NewServer(res, k.dir, filepath.Join(k.dir, "kubelet.sock"), 50*time.Millisecond, testr.New(t))
	g.Expect(s.Start()).To(Succeed())
	defer s.Stop()

	g.Expect(k.registrations()).To(HaveLen(1))
	reg := k.registrations()[0]
	g.Expect(reg.Version).To(Equal(pluginapi.Version))
	g.Expect(reg.ResourceName).To(Equal("macvtap.fastpath.io/fastpath0"))
	g.Expect(reg.Endpoint).To(Equal("fastpath-macvtap.fastpath.io_fastpath0.sock"))
	healthy := map[string]string{}
	for _, id := range res.Devices {
		healthy[id] = pluginapi.Healthy
	}
	g.Eventually(k.lastList).Should(Equal(healthy))

	resp, err := k.client().Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: res.Devices[:2]}, {DevicesIds: res.Devices[2:]}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.ContainerResponses).To(HaveLen(2))
	n, _ := netconf.ParseDeviceID(res.Devices[0])
	g.Expect(resp.ContainerResponses[0].Devices).To(HaveLen(2))
	g.Expect(resp.ContainerResponses[0].Devices[0]).To(And(
		HaveField("ContainerPath", fmt.Sprintf("/dev/tap%d", n)), HaveField("HostPath", fmt.Sprintf("/dev/tap%d", n)), HaveField("Permissions", "rw")))
	_, err = k.client().Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"tap7"}}}})
	g.Expect(err).To(MatchError(ContainSubstring("resource macvtap.fastpath.io/fastpath0 has no such device")))

	s.SetHealthy(false)
	unhealthy := map[string]string{}
	for _, id := range res.Devices {
		unhealthy[id] = pluginapi.Unhealthy
	}
	g.Eventually(k.lastList).Should(Equal(unhealthy))
	s.SetHealthy(true)
	g.Eventually(k.lastList).Should(Equal(healthy))

	// A kubelet restart empties its device plugin directory.
	g.Expect(os.Remove(s.Socket())).To(Succeed())
	g.Eventually(s.Registrations, 5*time.Second).Should(Equal(2))
	g.Expect(s.Socket()).To(BeAnExistingFile())
	g.Expect(s.Err()).NotTo(HaveOccurred())

	s.Stop()
	g.Expect(s.Socket()).NotTo(BeAnExistingFile())
}

func TestServerWithoutKubeletReportsAndRetries(t *testing.T) {
	g := NewWithT(t)
	dir, err := os.MkdirTemp("", "fpdp")
	g.Expect(err).NotTo(HaveOccurred())
	defer os.RemoveAll(dir)
	s := deviceplugin.NewServer(deviceplugin.MacvtapResource("fastpath0", 1), dir, filepath.Join(dir, "kubelet.sock"), 50*time.Millisecond, testr.New(t))
	g.Expect(s.Start()).To(MatchError(ContainSubstring("failed to register resource macvtap.fastpath.io/fastpath0 with kubelet")))
	defer s.Stop()
	g.Expect(s.Err()).To(HaveOccurred())
}

func TestManagerSync(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t)
	m := &deviceplugin.Manager{Dir: k.dir, KubeletSocket: filepath.Join(k.dir, "kubelet.sock"), WatchInterval: 50 * time.Millisecond, Log: testr.New(t)}
	defer m.Stop()
	a, b := deviceplugin.MacvtapResource("fastpath0", 2), deviceplugin.MacvtapResource("fastpath1", 2)
	errs := m.Sync([]deviceplugin.Want{{Resource: a, Healthy: true}, {Resource: b, Healthy: true}})
	g.Expect(errs).To(Equal(map[string]error{a.Name: nil, b.Name: nil}))
	g.Expect(m.Running()).To(Equal([]string{a.Name, b.Name}))
	g.Expect(k.registrations()).To(HaveLen(2))

	// The same again: nothing restarts.
	m.Sync([]deviceplugin.Want{{Resource: a, Healthy: true}, {Resource: b, Healthy: true}})
	g.Expect(k.registrations()).To(HaveLen(2))

	// b goes; a's devices become unhealthy.
	m.Sync([]deviceplugin.Want{{Resource: a, Healthy: false}})
	g.Expect(m.Running()).To(Equal([]string{a.Name}))
	g.Expect(filepath.Join(k.dir, deviceplugin.SocketName(b.Name))).NotTo(BeAnExistingFile())

	// Two resources whose devices overlap are both refused.
	clash := deviceplugin.Resource{Name: "macvtap.fastpath.io/other", Devices: a.Devices, Allocate: a.Allocate}
	errs = m.Sync([]deviceplugin.Want{{Resource: a, Healthy: true}, {Resource: clash, Healthy: true}})
	g.Expect(errs[a.Name]).To(MatchError(ContainSubstring("its device IDs overlap those of macvtap.fastpath.io/other")))
	g.Expect(errs[clash.Name]).To(HaveOccurred())
	g.Expect(m.Running()).To(BeEmpty())
}

// TestAllocatedDeviceIsTheCNIPluginsMacvtap (root): the /dev/tapN the
// device plugin hands a container is, once the CNI plugin's macvtap package
// created the macvtap with the allocated ID in a pod's namespace, a
// character device of the kernel's macvtap driver.
func TestAllocatedDeviceIsTheCNIPluginsMacvtap(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	lower := testutil.UniqueName("fpdpl")
	g.Expect(netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: lower, MTU: 9000}, PeerName: lower + "p"})).To(Succeed())
	defer func() {
		if l, err := netlink.LinkByName(lower); err == nil {
			_ = netlink.LinkDel(l)
		}
	}()
	lowerLink, err := netlink.LinkByName(lower)
	g.Expect(err).NotTo(HaveOccurred())
	podNS, err := testutils.NewNS()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		podNS.Close()
		_ = testutils.UnmountNS(podNS)
	}()

	res := deviceplugin.MacvtapResource(lower, 4)
	car, err := res.Allocate(res.Devices[1:2])
	g.Expect(err).NotTo(HaveOccurred())
	host := car.Devices[0].HostPath
	index, err := netconf.ParseDeviceID(res.Devices[1])
	g.Expect(err).NotTo(HaveOccurred())
	_, err = macvtap.Create(podNS, lowerLink, macvtap.Spec{Name: "net1", MTU: 9000, Index: index})
	g.Expect(err).NotTo(HaveOccurred())
	var st unix.Stat_t
	g.Expect(unix.Stat(host, &st)).To(Succeed())
	g.Expect(st.Mode & unix.S_IFMT).To(BeEquivalentTo(unix.S_IFCHR))
	g.Expect(unix.Major(st.Rdev)).To(BeEquivalentTo(charMajor(t, "macvtap")))
	// QEMU opens it read-write; so can we, as root.
	f, err := os.OpenFile(host, os.O_RDWR, 0)
	g.Expect(err).NotTo(HaveOccurred())
	f.Close()
	g.Expect(podNS.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("net1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Attrs().Index).To(Equal(index))
		return nil
	})).To(Succeed())
}

// charMajor returns the major number /proc/devices lists for driver.
func charMajor(t *testing.T, driver string) int {
	f, err := os.Open("/proc/devices")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[1] == driver {
			n, err := strconv.Atoi(fields[0])
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no character device driver %s in /proc/devices", driver)
	return 0
}
