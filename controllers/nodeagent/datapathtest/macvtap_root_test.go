package datapathtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/ptr"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// registrations is kubelet's Registration service, recording what registers.
type registrations struct {
	pluginapi.UnimplementedRegistrationServer
	mu        sync.Mutex
	resources []string
}

func (r *registrations) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resources = append(r.resources, req.ResourceName)
	return &pluginapi.Empty{}, nil
}

func (r *registrations) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.resources...)
}

// TestMacvtapNetworkGetsLowerDeviceAndDevicePlugin: a FastPathNetwork with
// datapath Macvtap makes the agent create the lower device (a marked veth
// with its carrier peer, at the network's MTU) and register the network's
// macvtap resource with kubelet; FastPathNode reports both and lists
// Macvtap among the node's datapath types. Raising the MTU raises both ends.
func TestMacvtapNetworkGetsLowerDeviceAndDevicePlugin(t *testing.T) {
	g := NewWithT(t)
	n := newNode(t)
	ns := namespace(t)
	lower := testutil.UniqueName("fpag")
	deleteLinuxBridgeAtCleanup(t, lower) // a link of any kind
	net1 := network(t, fastpathv1alpha1.DatapathMacvtap, lower, 9000)
	attach(t, ns, "vms", net1.Name)

	dir, err := os.MkdirTemp("", "fpag")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubelet := &registrations{}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, kubelet)
	ln, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	dp := &deviceplugin.Manager{Dir: dir, KubeletSocket: filepath.Join(dir, "kubelet.sock"), WatchInterval: 100 * time.Millisecond, Log: testr.New(t)}
	t.Cleanup(dp.Stop)

	r := n.newInstance()
	r.DevicePlugins, r.MacvtapCapacity = dp, 16
	reconcile(t, r)

	l := link(t, lower)
	g.Expect(l.Type()).To(Equal("veth"))
	g.Expect(l.Attrs().MTU).To(Equal(9000))
	g.Expect(l.Attrs().Alias).To(Equal(wellknown.MarkerKey + "=" + n.marker))
	g.Expect(link(t, wellknown.LowerPeerName(lower)).Attrs().MTU).To(Equal(9000))
	resource := "macvtap.fastpath.io/" + lower
	fpn := n.fpn()
	g.Expect(bridgeStatus(fpn, lower)).To(Equal(fastpathv1alpha1.BridgeStatus{Name: lower, Datapath: fastpathv1alpha1.DatapathMacvtap, MTU: 9000,
		Ready: true, Network: net1.Name, Attachments: []string{ns + "/vms"}, ResourceName: resource}))
	g.Expect(fpn.Status.Capabilities.DatapathTypes).To(ContainElement(fastpathv1alpha1.DatapathMacvtap))
	g.Expect(condition(fpn, fastpathv1alpha1.BridgesReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(kubelet.list()).To(Equal([]string{resource}))
	g.Expect(filepath.Join(dir, deviceplugin.SocketName(resource))).To(BeAnExistingFile())

	t.Log("The admin raises the MTU")
	net1.Spec.MTU.Max = ptr.To[int32](65535)
	g.Expect(env.Client.Update(context.Background(), net1)).To(Succeed())
	reconcile(t, r)
	g.Expect(link(t, lower).Attrs().MTU).To(Equal(65535))
	g.Expect(link(t, wellknown.LowerPeerName(lower)).Attrs().MTU).To(Equal(65535))
	g.Expect(bridgeStatus(n.fpn(), lower).MTU).To(Equal(int32(65535)))
	g.Expect(kubelet.list()).To(HaveLen(1), "the device plugin was not restarted")

	t.Log("The network goes: the device plugin stops, the lower device stays (it may carry traffic)")
	g.Expect(env.Client.Delete(context.Background(), net1)).To(Succeed())
	reconcile(t, r)
	g.Expect(filepath.Join(dir, deviceplugin.SocketName(resource))).NotTo(BeAnExistingFile())
	g.Expect(link(t, lower).Type()).To(Equal("veth"))
	g.Expect(bridgeStatus(n.fpn(), lower).Message).To(ContainSubstring("no FastPathNetwork names this bridge any more"))
}
