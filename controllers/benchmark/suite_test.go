package benchmark_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fastpath-io/fastpath/controllers/benchmark"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// runnerImage is what the netserver pods and the runner Job must run.
const runnerImage = "registry.example/fastpath-bench:test"

var (
	env       *testenv.Env
	k8s       client.Client
	stopMgr   context.CancelFunc
	mgrDone   chan error
	suiteCtx  context.Context
	suiteStop context.CancelFunc
)

// agentHostCPUPort is the operator's --agent-host-cpu-port in this suite.
const agentHostCPUPort = 9446

func TestBenchmarkController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "FastPathBenchmark controller (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	suiteCtx, suiteStop = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Client

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&benchmark.Reconciler{RunnerImage: runnerImage, SSHKeyRetry: 300 * time.Millisecond, AgentHostCPUPort: agentHostCPUPort}).SetupWithManager(suiteCtx, mgr, controller.Options{})).To(Succeed())

	var mgrCtx context.Context
	mgrCtx, stopMgr = context.WithCancel(suiteCtx)
	mgrDone = make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		mgrDone <- mgr.Start(mgrCtx)
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
		Eventually(mgrDone).Should(Receive(BeNil()))
	}
	if suiteStop != nil {
		suiteStop()
	}
	Expect(env.Stop()).To(Succeed())
})
