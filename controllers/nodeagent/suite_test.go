package nodeagent_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	agent "github.com/fastpath-io/fastpath/controllers/nodeagent"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// The envtest suite runs the agent's real manager and reconciler against a
// real kube-apiserver and etcd, with a fake probe and a fake bridge manager
// (no root needed) and the real relay over the UNIX-socket EMULATION of vsock.

func TestAgentEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Node agent envtest suite")
}

var env *testenv.Env

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed())
})

// fakeBridges is a BridgeManager that remembers the bridges it "created":
// Ensure records the spec and reports it ready (or the error set for the
// name); Managed returns every bridge ever ensured, like the real manager
// lists the bridges carrying its marker.
type fakeBridges struct {
	mu      sync.Mutex
	errs    map[string]error
	created map[string]bridge.State
	calls   []bridge.Spec
}

func newFakeBridges() *fakeBridges {
	return &fakeBridges{errs: map[string]error{}, created: map[string]bridge.State{}}
}

func (f *fakeBridges) Ensure(_ context.Context, spec bridge.Spec) (bridge.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, spec)
	if err := f.errs[spec.Name]; err != nil {
		return bridge.State{Name: spec.Name, Datapath: spec.Datapath}, err
	}
	st := bridge.State{Name: spec.Name, Datapath: spec.Datapath, Exists: true, Up: true, MTU: spec.MTU, Managed: true}
	_, existed := f.created[spec.Name]
	f.created[spec.Name] = st
	st.Created = !existed
	return st, nil
}

func (f *fakeBridges) Managed(context.Context) ([]bridge.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bridge.State
	for _, st := range f.created {
		out = append(out, st)
	}
	return out, nil
}

// RemoveUnused forgets a port-less bridge, as the real manager deletes it.
func (f *fakeBridges) RemoveUnused(_ context.Context, name string, _ fastpathv1alpha1.Datapath) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.created[name]; ok && len(st.Ports) > 0 {
		return fmt.Errorf("failed to remove bridge %s: %w", name, bridge.ErrInUse)
	}
	delete(f.created, name)
	return nil
}

// setPorts gives the "created" bridge name ports.
func (f *fakeBridges) setPorts(name string, ports ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.created[name]
	st.Ports = ports
	f.created[name] = st
}

func (f *fakeBridges) setErr(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[name] = err
}

// ensured returns the specs Ensure was called with for name.
func (f *fakeBridges) ensured(name string) []bridge.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bridge.Spec
	for _, c := range f.calls {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// mutableProbe is a Prober whose capabilities a test can change.
type mutableProbe struct {
	mu   sync.Mutex
	caps fastpathv1alpha1.NodeCapabilities
}

func (p *mutableProbe) Probe(context.Context) fastpathv1alpha1.NodeCapabilities {
	p.mu.Lock()
	defer p.mu.Unlock()
	return *p.caps.DeepCopy()
}

func (p *mutableProbe) set(f func(*fastpathv1alpha1.NodeCapabilities)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.caps)
}

// agentUnderTest is one running agent (manager + reconciler) for one node.
type agentUnderTest struct {
	node      string
	probe     *mutableProbe
	bridges   *fakeBridges
	relay     *relay.Relay
	vsockRoot string // root of the emulated vsock transport
	// stop stops the agent's manager (an agent restart); the spec's
	// cleanup calls it too.
	stop func()
}

// goodNode is what the fake probe reports unless a test changes it.
func goodNode() fastpathv1alpha1.NodeCapabilities {
	return fastpathv1alpha1.NodeCapabilities{
		VhostNet: true, VhostVSOCK: true, Tun: true, Kernel: "6.1.0-envtest",
		OVS: &fastpathv1alpha1.OVSInfo{Reachable: true, Version: "3.1.0", DatapathTypes: []string{"netdev", "system"}},
	}
}

// startAgent runs an agent for node (a new unique name when empty) until the
// spec ends. customise may adjust the reconciler before it starts.
func startAgent(node string, customise func(*agent.Reconciler)) *agentUnderTest {
	GinkgoHelper()
	if node == "" {
		node = testutil.UniqueName("node-")
	}
	a := &agentUnderTest{
		node:      node,
		probe:     &mutableProbe{caps: goodNode()},
		bridges:   newFakeBridges(),
		vsockRoot: GinkgoT().TempDir(),
	}
	var err error
	transport := vsock.NewUnixTransport(a.vsockRoot, vsock.HostCID)
	a.relay, err = relay.New(relay.Options{
		Transport:  transport,
		Registerer: prometheus.NewRegistry(),
		Logger:     ctrl.Log.WithName("relay"),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(a.relay.Close)

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      agent.CacheOptions(a.node),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}, // one manager per spec
	})
	Expect(err).NotTo(HaveOccurred())
	r := &agent.Reconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		NodeName:       a.node,
		Prober:         a.probe,
		Bridges:        a.bridges,
		Relay:          a.relay,
		RelayTransport: transport,
		AgentVersion:   "v0.0.0-envtest",
		ResyncPeriod:   200 * time.Millisecond,
		RetryPeriod:    200 * time.Millisecond,
	}
	if customise != nil {
		customise(r)
	}
	Expect(r.SetupWithManager(context.Background(), mgr, controller.Options{})).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	var once sync.Once
	a.stop = func() { once.Do(func() { cancel(); <-done }) }
	DeferCleanup(a.stop)
	return a
}

// fpn returns the agent's FastPathNode; use it inside Eventually(func(g Gomega)).
func (a *agentUnderTest) fpn(g Gomega) *fastpathv1alpha1.FastPathNode {
	fpn := &fastpathv1alpha1.FastPathNode{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: a.node}, fpn)).To(Succeed())
	return fpn
}

func condition(fpn *fastpathv1alpha1.FastPathNode, t string) metav1.Condition {
	for _, c := range fpn.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func bridgeStatus(fpn *fastpathv1alpha1.FastPathNode, name string) *fastpathv1alpha1.BridgeStatus {
	i := slices.IndexFunc(fpn.Status.Bridges, func(b fastpathv1alpha1.BridgeStatus) bool { return b.Name == name })
	if i < 0 {
		return nil
	}
	return &fpn.Status.Bridges[i]
}
