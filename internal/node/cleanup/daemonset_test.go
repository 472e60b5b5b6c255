package cleanup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/internal/node/cleanup"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// agentDaemonSet returns the chart's agent DaemonSet as make manifests
// renders it with the default values (config/default/fastpath.yaml).
func agentDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	root, err := testenv.RepoRoot()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(root, "config", "default", "fastpath.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.Contains(doc, "\nkind: DaemonSet") {
			ds := &appsv1.DaemonSet{}
			NewWithT(t).Expect(yaml.UnmarshalStrict([]byte(doc), ds)).To(Succeed())
			return ds
		}
	}
	t.Fatal("no DaemonSet in config/default/fastpath.yaml")
	return nil
}

// SwitchDaemonSet turns the chart's agent DaemonSet into the cleanup (both
// containers get --cleanup, the init container the plugin's state directory,
// every pod is replaced at once) and returns once every scheduled pod runs
// it and is ready; while one is not, it waits, and fails when its context
// ends. The DaemonSet controller is played by the test (envtest runs none).
func TestSwitchDaemonSetWaitsForEveryNode(t *testing.T) {
	g := NewWithT(t)
	env, err := testenv.Start(testenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns, err := env.NewNamespace(ctx, "cleanup")
	g.Expect(err).NotTo(HaveOccurred())
	ds := agentDaemonSet(t)
	ds.Namespace = ns
	g.Expect(env.Client.Create(ctx, ds)).To(Succeed())
	key := client.ObjectKeyFromObject(ds)
	setStatus := func(ready int32) {
		got := &appsv1.DaemonSet{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		got.Status = appsv1.DaemonSetStatus{ObservedGeneration: got.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
			UpdatedNumberScheduled: 2, NumberReady: ready, NumberAvailable: ready, NumberUnavailable: 2 - ready}
		g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	}

	// One node cannot clean up: the wait ends with the context, saying so.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cleanup.SwitchDaemonSet(short, env.Client, key, 100*time.Millisecond, testr.New(t)) }()
	g.Eventually(func() int64 {
		got := &appsv1.DaemonSet{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		return got.Generation
	}, 10*time.Second, 50*time.Millisecond).Should(BeNumerically(">", ds.Generation))
	setStatus(1)
	g.Eventually(done, 10*time.Second).Should(Receive(MatchError(ContainSubstring("1 of 2 pods cleaned up and ready"))))

	got := &appsv1.DaemonSet{}
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	ps := got.Spec.Template.Spec
	g.Expect(ps.InitContainers).To(HaveLen(1))
	g.Expect(ps.Containers).To(HaveLen(1))
	g.Expect(ps.InitContainers[0].Args).To(ContainElements("--install-cni", cleanup.Flag))
	g.Expect(ps.Containers[0].Args).To(ContainElement(cleanup.Flag))
	g.Expect(ps.InitContainers[0].VolumeMounts).To(ContainElement(HaveField("MountPath", "/var/lib/cni/fastpath")))
	g.Expect(ps.Volumes).To(ContainElement(HaveField("VolumeSource.HostPath.Path", "/var/lib/cni/fastpath")))
	g.Expect(ps.Containers[0].VolumeMounts).NotTo(ContainElement(HaveField("MountPath", "/var/lib/cni/fastpath")),
		"the long-running container gets no new mount")
	g.Expect(got.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()).To(Equal("100%"))
	generation := got.Generation

	// Every node ready: it returns, and a second switch changes nothing.
	setStatus(2)
	g.Expect(cleanup.SwitchDaemonSet(ctx, env.Client, key, 100*time.Millisecond, testr.New(t))).To(Succeed())
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	g.Expect(got.Generation).To(Equal(generation), "idempotent")

	// No DaemonSet: nothing to do.
	g.Expect(cleanup.SwitchDaemonSet(ctx, env.Client, client.ObjectKey{Namespace: ns, Name: "gone"}, time.Second, testr.New(t))).To(Succeed())
}
