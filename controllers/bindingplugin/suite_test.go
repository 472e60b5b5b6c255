package bindingplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/controllers/bindingplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	vmbinding "github.com/fastpath-io/fastpath/internal/vm/bindingplugin"
)

// The suite runs the registrar in a real manager against a real
// kube-apiserver and etcd (internal/testing/testenv) with the fixture CRD
// for the KubeVirt CR. Nothing of KubeVirt runs. Each spec starts and stops
// its own operator, since when it starts is part of what is tested, and
// uses a KubeVirt CR of its own (name kubevirt, in a namespace of its own).

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
	// quiet is how long a spec watches for a write that must not come; the
	// registrar reacts to an event within milliseconds here.
	quiet = 2 * time.Second
)

// operatorUser is the ServiceAccount the suite's operator runs as (by
// impersonation), bound to the generated ClusterRole config/rbac/role.yaml
// and to the chart's narrow grant for the registrar, so a write the
// deployment may not make fails here too.
const operatorUser = "system:serviceaccount:fastpath-system:fastpath-operator"

// kubevirtName is the name of every spec's KubeVirt CR, the one the
// registrar's grant names.
const kubevirtName = "kubevirt"

// hookImage is the binding plugins' sidecarImage in the suite.
const hookImage = "registry.example.com/fastpath/fastpath-domain-hook:test"

var (
	env *testenv.Env
	ctx = context.Background()
	// plugins are the entries the suite's operator registers.
	plugins map[string]kubevirtv1.InterfaceBindingPlugin
	names   = vmbinding.Names{Bridge: "fastpath", Macvtap: "fastpath-macvtap"}
)

func TestBindingPluginController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Binding plugin registrar (envtest)")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(interval)
	SetDefaultConsistentlyDuration(quiet)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	plugins, err = vmbinding.Plugins(names, hookImage)
	Expect(err).NotTo(HaveOccurred())
	env, err = testenv.Start(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	bindOperatorRoles()
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed())
})

// bindOperatorRoles installs config/rbac/role.yaml and the registrar's
// ClusterRole of charts/fastpath/templates/bindingplugin.yaml (get and
// patch on kubevirts named kubevirtName, nothing else), and binds both to
// operatorUser.
func bindOperatorRoles() {
	GinkgoHelper()
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(data, role)).To(Succeed())
	registrar := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "fastpath-operator-binding-plugin"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"},
			ResourceNames: []string{kubevirtName}, Verbs: []string{"get", "patch"}}},
	}
	for _, r := range []*rbacv1.ClusterRole{role, registrar} {
		Expect(env.Client.Create(ctx, r)).To(Succeed())
		Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fastpath-system", Name: "fastpath-operator"}},
		})).To(Succeed())
	}
}

// startOperator starts a manager running the registrar for the KubeVirt CR
// kv as operatorUser, as fastpath-operator --register-binding-plugins does,
// and registers its stop (which waits until it stopped) as a cleanup of the
// spec. It returns the stop for specs that restart the operator.
func startOperator(kv types.NamespacedName) func() {
	GinkgoHelper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every spec starts its own operator in this process.
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&bindingplugin.Reconciler{KubeVirt: kv, Plugins: plugins}).SetupWithManager(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	DeferCleanup(stop)
	return stop
}

func ptr[T any](v T) *T { return &v }
