package e2e

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// fastpathImage is a Fastpath image by digest in a registry:
// <host>[/<path>]/fastpath-<component>@sha256:<hex>.
var fastpathImage = regexp.MustCompile(`^([^/]+)(/[^@]*)?/fastpath-([a-z-]+)@(sha256:[0-9a-f]{64})$`)

// make cluster-install installs as the README says a user does: images and
// chart pushed to a registry (the cluster's own), helm install from
// oci://, every image by digest.
var _ = Describe("Fastpath installed from a registry", func() {
	It("runs every Fastpath container from an image pulled by digest from one registry", func(ctx SpecContext) {
		if env.Emulated() {
			notRun("on the local stack: its pods are processes of this host, not containers pulled from a registry; make e2e-cluster installs from the cluster's registry")
		}
		pods := &corev1.PodList{}
		Expect(env.Client().List(ctx, pods)).To(Succeed())
		hosts, components := map[string]bool{}, map[string]bool{}
		var seen []string
		for _, p := range pods.Items {
			for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
				if !strings.Contains(c.Image, "fastpath-") || strings.Contains(c.Image, "fastpath-guest") {
					continue // not Fastpath's (the guests' kernel boot image is the e2e's)
				}
				m := fastpathImage.FindStringSubmatch(c.Image)
				Expect(m).NotTo(BeNil(), "pod %s/%s container %s: image %q is not <registry>/fastpath-<component>@sha256:<digest>", p.Namespace, p.Name, c.Name, c.Image)
				Expect(m[1]).NotTo(Equal("localhost"), "pod %s/%s container %s: an image imported into containerd, not pulled", p.Namespace, p.Name, c.Name)
				hosts[m[1]], components[m[3]] = true, true
				statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
				i := slices.IndexFunc(statuses, func(s corev1.ContainerStatus) bool { return s.Name == c.Name })
				if i >= 0 && statuses[i].ImageID != "" {
					Expect(statuses[i].ImageID).To(HaveSuffix(m[4]), "pod %s/%s container %s: containerd runs the digest the pod names", p.Namespace, p.Name, c.Name)
				}
				seen = append(seen, fmt.Sprintf("%s/%s:%s", p.Namespace, p.Name, c.Name))
			}
		}
		// The vsock backend runs the relay by default (agent.relay.backend.enabled).
		Expect(components).To(And(HaveKey("operator"), HaveKey("agent"), HaveKey("vsock-backend")), "the operator's, agent's and vsock backend's pods: %v", seen)
		Expect(hosts).To(HaveLen(1), "one registry: %v", hosts)
		AddReportEntry("images by digest", fmt.Sprintf("%d Fastpath containers (%s) from registry %s", len(seen), strings.Join(slices.Sorted(maps.Keys(components)), ", "), strings.Join(slices.Sorted(maps.Keys(hosts)), "")))
	})
})
