package bindingplugin_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fastpath-io/fastpath/controllers/bindingplugin"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	vmbinding "github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
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
	Expect(env.BindOperatorRoles(ctx, registrarRole)).To(Succeed())
})

var _ = AfterSuite(func() {
	Expect(env.Stop()).To(Succeed())
})

// registrarRole is the registrar's ClusterRole of
// charts/fastpath/templates/bindingplugin.yaml: get and patch on kubevirts
// named kubevirtName, nothing else. The suite's operator runs as
// testenv.OperatorUser with it and config/rbac/role.yaml, so a write the
// deployment may not make fails here too.
var registrarRole = &rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: "fastpath-operator-binding-plugin"},
	Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{"kubevirts"},
		ResourceNames: []string{kubevirtName}, Verbs: []string{"get", "patch"}}},
}

// startOperator starts a manager running the registrar for the KubeVirt CR
// kv, as fastpath-operator --register-binding-plugins does, and registers
// its stop (which waits until it stopped) as a cleanup of the spec. It
// returns the stop for specs that restart the operator.
func startOperator(kv types.NamespacedName) func() {
	GinkgoHelper()
	stop, err := env.StartManager(env.Config, (&bindingplugin.Reconciler{KubeVirt: kv, Plugins: plugins}).SetupWithManager)
	Expect(err).NotTo(HaveOccurred())
	stopAndCheck := func() {
		GinkgoHelper()
		Expect(stop()).To(Succeed())
	}
	DeferCleanup(stopAndCheck)
	return stopAndCheck
}
