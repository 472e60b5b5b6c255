package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestE2E runs the suite against the local stack, or against the cluster of
// KUBECONFIG when it is set. The local stack needs root.
func TestE2E(t *testing.T) {
	if os.Getenv("KUBECONFIG") == "" {
		testutil.RequireRoot(t)
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Fastpath e2e")
}

var (
	env     Environment
	ns      string
	objs    Objects
	keyFile string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	var priv, pub []byte
	keyFile, priv, pub, err = keyPair(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	objs, err = LoadSamples(root)
	Expect(err).NotTo(HaveOccurred())

	ns = "fastpath-e2e-" + time.Now().UTC().Format("150405")
	bridge, subnet := localBridge, localSubnet
	if os.Getenv("KUBECONFIG") != "" {
		user := "fedora"
		if objs.Benchmark.Spec.SSHUser != "" {
			user = objs.Benchmark.Spec.SSHUser
		}
		env, err = startCluster(ctx, keyFile, user)
		Expect(err).NotTo(HaveOccurred())
		bridge, subnet = "fpe2e0", localSubnet
	} else {
		env, err = startLocal(ctx, root, ns, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
	}
	AddReportEntry("environment", env.Name())
	objs.Adapt(ns, bridge, subnet, env.VSOCKMode(), priv, pub)
	if !env.Emulated() {
		// Real VMs (under TCG on the local cluster): 5-second runs, so that a
		// guest's scheduling hiccup does not decide a point.
		objs.Benchmark.Spec.Duration = &metav1.Duration{Duration: 5 * time.Second}
	}
	Expect(env.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if env == nil {
		return
	}
	if !env.Emulated() && ns != "" {
		_ = env.Client().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	Expect(env.Stop()).To(Succeed())
}, NodeTimeout(3*time.Minute))

// eventually is Eventually with the suite's polling interval.
func eventually(ctx context.Context, f any, timeout time.Duration) AsyncAssertion {
	return Eventually(ctx, f).WithTimeout(timeout).WithPolling(250 * time.Millisecond)
}
