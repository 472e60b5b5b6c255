package tuning_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fastpath-io/fastpath/controllers/attachment"
	"github.com/fastpath-io/fastpath/controllers/tuning"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// The suite runs the real tuning and attachment reconcilers against envtest.
// No FastPathBenchmark controller runs: the tests write each benchmark's
// status as it would once its runner finished, so they decide what every
// candidate measured and can check the choice against it.

// sweepNS is the operator namespace the sweep's objects go to.
const sweepNS = "fastpath-system"

var (
	env  *testenv.Env
	k8s  client.Client
	ctx  = context.Background()
	stop context.CancelFunc
	done chan struct{}
)

func TestTuningController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "FastPathNetwork tuning controller (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sweepNS}})).To(Succeed())

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&attachment.Reconciler{Options: attachment.Options{
		PodNetworkCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		RelayPorts:      attachment.PortRange{First: 20000, Last: 20999},
		KubeVirtAbsent:  true,
	}}).SetupWithManager(ctx, mgr, controller.Options{})).To(Succeed())
	Expect((&tuning.Reconciler{Namespace: sweepNS}).SetupWithManager(ctx, mgr, controller.Options{})).To(Succeed())
	var mctx context.Context
	mctx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stop != nil {
		stop()
		<-done
	}
	Expect(env.Stop()).To(Succeed())
})
