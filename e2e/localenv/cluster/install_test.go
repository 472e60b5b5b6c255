package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// TestInstall installs Fastpath on a real cluster both ways an admin does —
// helm install of charts/fastpath and kubectl apply -k of an overlay of
// config/default — with the images make images builds: each time the
// operator, agent and vsock backend pods run (the backend runs the relay by
// default, and Sibling's backends with HelmValues), the agent installs the
// CNI binary into the cluster's CNI bin directory and the node's
// FastPathNode turns Ready; the cluster then goes without a trace.
func TestInstall(t *testing.T) {
	testutil.RequireRoot(t)
	root, err := testenv.RepoRoot()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	imgs := filepath.Join(root, "_out", "images")
	var log strings.Builder
	_, err = (&images.Builder{Root: root, Out: imgs, Log: &log}).Build(ctx, append([]string{"pause"}, ChartImages...)...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), log.String())

	for _, kustomize := range []bool{false, true} {
		name := map[bool]string{false: "helm", true: "kustomize"}[kustomize]
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, opts, out, err := upForTest(ctx, t, root, "cluster-test", imgs)
			g.Expect(err).NotTo(HaveOccurred(), out.String())
			g.Expect(Install(ctx, opts, InstallOptions{Kustomize: kustomize, RepoRoot: root})).To(Succeed(), out.String())
			g.Expect(out.String()).To(Or(ContainSubstring("helm install fastpath"), ContainSubstring("apply --server-side -k")))

			cl, err := adminClient(c.Kubeconfig)
			g.Expect(err).NotTo(HaveOccurred())
			pods := &corev1.PodList{}
			g.Expect(cl.List(ctx, pods, client.InNamespace(Namespace))).To(Succeed())
			images := map[string]bool{}
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
				for _, c := range p.Spec.Containers {
					images[c.Image] = true
					if kustomize {
						g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullNever), "%s/%s", p.Name, c.Name)
					}
				}
				if !kustomize {
					// Pulled by digest from the cluster's registry, as a user's
					// cluster pulls from theirs: containerd reports the digest
					// the pod names.
					for _, c := range p.Spec.Containers {
						_, digest, ok := strings.Cut(c.Image, "@")
						g.Expect(ok).To(BeTrue(), "%s/%s image %s by digest", p.Name, c.Name, c.Image)
						g.Expect(p.Status.ContainerStatuses).To(ContainElement(And(HaveField("Name", c.Name), HaveField("ImageID", HaveSuffix(digest)))), "%s/%s", p.Name, c.Name)
					}
				}
			}
			if kustomize {
				// The operator, the agent and the vsock backend, which runs
				// the relay (agent.relay.backend.enabled, the chart's default).
				g.Expect(images).To(Equal(map[string]bool{"localhost/fastpath-operator:local": true, "localhost/fastpath-agent:local": true,
					"localhost/fastpath-vsock-backend:local": true}))
			} else {
				// The operator, the agent and the vsock backend (the relay's
				// by default; Sibling's too with HelmValues).
				g.Expect(images).To(HaveLen(3))
				for ref := range images {
					g.Expect(ref).To(MatchRegexp(`^127\.0\.0\.1:%d/fastpath/fastpath-(operator|agent|vsock-backend)@sha256:[0-9a-f]{64}$`, RegistryPort))
				}
			}
		})
	}
}
