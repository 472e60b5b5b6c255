package attachment_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/attachment"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// The suite runs the real reconciler in a real manager against a real
// kube-apiserver and etcd (internal/testing/testenv) with fixture CRDs for KubeVirt
// and Multus. Nothing of KubeVirt runs: the tests write VMIs and their status
// the way virt-controller and virt-handler would.

// podNetwork is the cluster pod network the suite's operator is told about.
var podNetwork = netip.MustParsePrefix("10.244.0.0/16")

// relayPorts is the suite operator's relay port range.
var relayPorts = attachment.PortRange{First: 20000, Last: 20999}

var (
	env         *testenv.Env
	stopManager func()
)

func TestAttachmentController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "FastPathAttachment controller (envtest)")
}

var _ = BeforeSuite(func() {
	// For every spec, whatever the random order: the Macvtap specs set none
	// of their own, and ran with Gomega's 1 s default when they came first.
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(interval)
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	// The suite's operator runs as testenv.OperatorUser, bound to the
	// generated ClusterRole, so a missing RBAC marker fails the suite as it
	// would fail a deployment.
	Expect(env.BindOperatorRoles(ctx)).To(Succeed())
	createDefaultNetwork()
	createKubeVirt()
	stopManager = startManager(env.Config)
})

// kubevirtCR is the suite's KubeVirt CR, with Fastpath's binding plugins
// registered (registerBindingPlugins) unless a spec takes them out.
var kubevirtCR = kubevirtcr.DefaultKubeVirt

// suiteHookImage is the binding plugins' sidecarImage in the suite.
const suiteHookImage = "registry.example.com/fastpath/fastpath-domain-hook:test"

func createKubeVirt() {
	GinkgoHelper()
	Expect(createKubeVirtCR(ctx, env.Client)).To(Succeed())
}

// createKubeVirtCR creates the KubeVirt CR kubevirtCR, in its namespace,
// with Fastpath's binding plugins registered: without them the operator
// wires no VM (VMsWired=False/BindingPluginNotRegistered).
func createKubeVirtCR(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubevirtCR.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
	kv.SetNamespace(kubevirtCR.Namespace)
	kv.SetName(kubevirtCR.Name)
	if err := unstructured.SetNestedField(kv.Object, true, "spec", "configuration", "developerConfiguration", "useEmulation"); err != nil {
		return err
	}
	if err := c.Create(ctx, kv); err != nil {
		return fmt.Errorf("failed to create the KubeVirt CR %s: %w", kubevirtCR, err)
	}
	return registerBindingPluginsIn(ctx, c)
}

// registerBindingPlugins writes the binding plugins into the suite's
// KubeVirt CR, as an admin (or the operator's registrar) does.
func registerBindingPlugins() {
	GinkgoHelper()
	Expect(registerBindingPluginsIn(ctx, env.Client)).To(Succeed())
}

func registerBindingPluginsIn(ctx context.Context, c client.Client) error {
	plugins, err := kubevirtcr.Plugins(kubevirtcr.Names{Bridge: wiring.DefaultBinding, Macvtap: wiring.DefaultMacvtapBinding}, suiteHookImage)
	if err != nil {
		return err
	}
	return kubevirtcr.Register(ctx, c, kubevirtCR, plugins)
}

// defaultNetwork is the suite's default FastPathNetwork: every namespace may
// use it, so the tests that are not about networks need no spec.networkRef.
const defaultNetwork = "suite-default"

func createDefaultNetwork() {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, &v1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: defaultNetwork, Annotations: map[string]string{v1alpha1.DefaultNetworkAnnotation: "true"}},
		Spec:       v1alpha1.FastPathNetworkSpec{Bridge: "fastpath0", MTU: &v1alpha1.MTURange{Max: ptr(int32(65535)), Default: ptr(int32(9000))}},
	})).To(Succeed())
}

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	Expect(env.Stop()).To(Succeed())
})

// suiteOptions are the options of the suite's operator.
func suiteOptions() attachment.Options {
	return attachment.Options{PodNetworkCIDRs: []netip.Prefix{podNetwork}, RelayPorts: relayPorts}
}

// startManager starts a manager running the attachment reconciler with
// suiteOptions as testenv.OperatorUser and returns a function that stops it
// and waits until it has stopped.
func startManager(cfg *rest.Config) func() {
	GinkgoHelper()
	return startManagerWith(cfg, suiteOptions())
}

// startManagerWith is startManager with other reconciler options.
func startManagerWith(cfg *rest.Config, opts attachment.Options) func() {
	GinkgoHelper()
	stop, err := env.StartManager(cfg, func(mgr ctrl.Manager) error {
		r := &attachment.Reconciler{Options: opts}
		return r.SetupWithManager(context.Background(), mgr, controller.Options{MaxConcurrentReconciles: 2})
	})
	Expect(err).NotTo(HaveOccurred())
	return func() {
		GinkgoHelper()
		Expect(stop()).To(Succeed())
	}
}

func ptr[T any](v T) *T { return &v }
